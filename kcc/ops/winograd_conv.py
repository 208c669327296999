"""K = 3 stride-1 convolutions as Winograd F(m, 3) (winograd_conv1d_f32.c), made by
kcc.compiler.passes.winograd_convs.

`winograd_conv1d`: x [B, T, Cin], optional style [B, S] (then the style instance norm of `adain`
with its act runs on x first, fused into the input read: weights norm_w, norm_b, fc_w, fc_b,
alpha? and attrs eps, norm_act, norm_slope as adain_conv1d's) and res; weights `weight` (the conv's,
torch layout [Cout, Cin, 3] or its GEMM pack [3, panels, Cin, 16]; packed at lowering into the
slot layout [m + 2, panels, Cin, 16], U_s = sum_k G[s][k] w_k in f64, rounded once) and `bias`;
attrs m (outputs per tile: 2 or 3), c_out, padding, dilation, act (none | leaky_relu), slope:
the conv1d / adain_conv1d it replaces, same output and epilogue.

The transforms come from the interpolation points (POINTS; the kernel holds the same BT and AT);
the cost model (`choose`) weighs a tile's slot GEMMs, its transforms and the slot weights'
re-reads against the direct conv, per output row.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from kcc.kernels.registry import Contract, F32, I64, IN_F32, Kernel, OUT_F32, WEIGHT, c_constant, register
from kcc.ops.adain import ACTS as NORM_ACTS
from kcc.ops.adain import MAX_CHANNELS
from kcc.ops.adain import _infer as adain_infer
from kcc.ops.adain import adain_reference, adain_weights
from kcc.ops.conv import GEMM_NR, conv_case, conv_reference, gemm_pack, panels, residue_tiles, stride1_out
from kcc.ops.core import BindContext, Case, OpDef, c_float, define_op, expect
from kcc.ops.cost_terms import ACT_FLOPS, epilogue

MAX_M = c_constant("winograd_conv1d_f32.c", "KCC_WG_MAX_M")
WORK = c_constant("winograd_conv1d_f32.c", "KCC_WG_WORK")    # floats of one thread's work area
VW = c_constant("winograd_conv1d_f32.c", "KCC_WG_VW")
GEMM_MR = c_constant("gemm_tile_f32.c", "KCC_GEMM_MR")
K = 3
# Finite interpolation points per m (and infinity): 0, +-1 and 2 keep every BT / AT entry a small
# integer (exact in f32). Measured max-abs vs float64 after an AdaIN + Snake (C = 128-1024,
# bench/bench_winograd.py): m = 2 0.9-1.4x the direct conv's own f32 error, m = 3 2.1-4.2x.
POINTS = {2: (0, 1, -1), 3: (0, 1, -1, 2)}

register(Kernel(
    name="kcc_winograd_conv1d_f32",
    source="winograd_conv1d_f32.c",
    args=(("x", IN_F32), ("style", IN_F32), ("n_batch", I64), ("t_in", I64), ("c_in", I64), ("n_style", I64),
          ("norm_w", WEIGHT), ("norm_b", WEIGHT), ("fc_w", WEIGHT), ("fc_b", WEIGHT), ("alpha", WEIGHT),
          ("act", I64), ("slope", F32), ("eps", F32), ("has_norm", I64), ("u", WEIGHT), ("m", I64),
          ("bias", WEIGHT), ("c_out", I64), ("pad", I64), ("dilation", I64), ("neg_slope", F32),
          ("res", IN_F32), ("has_res", I64), ("out", OUT_F32)),
    contract=Contract(
        accumulation="f32: forward transform (integer BT, u order), m + 2 slot GEMMs on kcc_gemm_packed_f32 "
                     "(128-term chunks from zero, FMA where the target has it), inverse (integer AT, slot "
                     "order); then + bias, leaky slope, + res as kcc_conv1d_gemm_f32. The fused norm is "
                     "kcc_instance_norm_style_f32's rows, bit for bit",
        tolerance=2e-5,
        notes="not bit-identical to the direct conv (a different basis): measured max-abs vs float64 "
              "0.9-1.4x the direct conv's own f32 error at m = 2, 2.1-4.2x at m = 3; identical for any "
              "thread count"),
    requires=("kcc_conv_out_rows", "kcc_instance_norm_style_f32", "kcc_gemm_tile_f32"),
))


def transforms(m: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(AT [m, a], G [a, 3], BT [a, a]) of F(m, 3) at POINTS[m] and infinity, exact rationals as
    f64: y = AT ((G w) * (BT x)) is the correlation y_i = sum_k w_k x_(i+k). BT row j holds
    prod_{l != j}(x - p_l) (ascending powers), the infinity row prod_l (x - p_l); G carries
    1 / prod_{l != j}(p_j - p_l). The kernel's tables are these BT and AT."""
    p = [Fraction(v) for v in POINTS[m]]
    a = m + K - 1

    def poly(roots):
        c = [Fraction(1)]
        for r in roots:
            c = [(c[i - 1] if i else 0) - r * (c[i] if i < len(c) else 0) for i in range(len(c) + 1)]
        return c + [Fraction(0)] * (a - len(c))

    bt = [poly([q for q in p if q != pj]) for pj in p] + [poly(p)]
    g = [[pj ** k / math.prod((pj - q for q in p if q != pj), start=Fraction(1)) for k in range(K)] for pj in p]
    g.append([Fraction(0)] * (K - 1) + [Fraction(1)])
    at = [[pj ** i for pj in p] + [Fraction(int(i == m - 1))] for i in range(m)]
    return tuple(np.array([[float(v) for v in row] for row in t]) for t in (at, g, bt))


def winograd_pack(w: np.ndarray, a: dict) -> np.ndarray:
    """The conv weight (torch layout [Cout, Cin, 3] or its GEMM pack [3, panels, Cin, 16]) -> the
    slot layout [m + 2, panels, Cin, 16]: U_s = sum_k G[s][k] w_k in f64, rounded once."""
    wp = gemm_pack("winograd_conv1d")(w, a) if w.ndim == 3 else w
    _, g, _ = transforms(a["m"])
    return np.einsum("sk,kpcj->spcj", g, wp.astype(np.float64)).astype(np.float32)


# -- the cost model ------------------------------------------------------------------------------
# Both sides per output row, in GEMM multiply-adds: the GEMMs, the weights' bytes (the direct conv
# streams its pack once per KCC_CONV_MC rows, the Winograd kernel its slot weights once per block
# of tiles) and the transforms. Calibrated on the EPYC (1 thread, process CPU time: the machine is
# shared) with the AdaIN + Snake fused, bench/bench_winograd.py: measured direct / F(2, 3) x1.26
# (C 128, T 15241), x1.35 (C 256, T 2540), x1.30 (512 -> 256, T 254), x1.16 (C 1024, T 127). The
# transforms cost ~10x their multiply-adds (each tile's rows go through L2 twice: written by the
# forward transform, read by the slot GEMMs; the inverse likewise); a weight byte ~1.75 of them.
TRANSFORM_WEIGHT = 10.0
WEIGHT_BYTE = 1.75
DIRECT_ROWS = c_constant("conv_epilogue_f32.c", "KCC_CONV_MC")   # rows per pass over the direct conv's pack
MIN_GAIN = 1.1      # modelled direct / Winograd below this: keep the direct conv
# The m the pass tries. m = 3's error is 2-4x the direct conv's on one conv, but at the X-Ray
# checkpoints (seeded generator and decoder, real weights' predictor and decoder) it stays within
# the direct build's: worst 8.6e-6 (gate 2e-5) vs 7.8e-6 direct (bench/results/winograd.md).
SIZES = (2, 3)


def tiles_per_block(m: int, c_in: int, c_out: int, dilation: int, norm: bool) -> int:
    """Tiles one block of the kernel holds (kcc_wg_tiles_per_block): alpha + 1 regions of one
    row per tile as wide as the wider side, their padding, and with the norm the input rows."""
    alpha, w = m + 2, max(c_in, panels(c_out) * GEMM_NR)
    fixed = (alpha + 1) * VW + c_in + ((dilation * m + dilation * (m + 2)) * c_in if norm else 0)
    fit = (WORK - fixed) // ((alpha + 1) * w + (m * c_in if norm else 0)) if fixed < WORK else 0
    return fit // GEMM_MR * GEMM_MR if fit >= GEMM_MR else fit


def _nonzero(t: np.ndarray) -> int:
    return int(np.count_nonzero(t))


def tile_madds(m: int, c_in: int, c_out: int) -> tuple[int, int]:
    """(slot GEMMs, transforms): the kernel's multiply-adds for one tile of m outputs."""
    at, _, bt = transforms(m)
    ldm = panels(c_out) * GEMM_NR
    return (m + 2) * c_in * ldm, _nonzero(bt) * c_in + _nonzero(at) * ldm


def direct_cost(c_in: int, c_out: int) -> float:
    """The direct conv's weighted multiply-adds per output row, as the GEMM variant runs them
    (padded Cout), with its share of the weight pack's re-reads."""
    madds = K * c_in * panels(c_out) * GEMM_NR
    return madds + WEIGHT_BYTE * 4 * madds / DIRECT_ROWS


def winograd_cost(m: int, c_in: int, c_out: int, dilation: int, norm: bool) -> float:
    """Weighted multiply-adds per output row: the tile's GEMMs, its transforms and its share of
    the slot weights' re-reads (once per block of tiles)."""
    gemm, trans = tile_madds(m, c_in, c_out)
    tb = max(tiles_per_block(m, c_in, c_out, dilation, norm), 1)
    return (gemm + TRANSFORM_WEIGHT * trans + WEIGHT_BYTE * 4 * gemm / tb) / m


@dataclass(frozen=True)
class Choice:
    m: int
    gain: float      # modelled direct / Winograd multiply-adds per output row


def choose(c_in: int, c_out: int, dilation: int, norm: bool) -> Choice | None:
    """The m that models cheapest for a K = 3 stride-1 groups-1 conv, or None where none gains
    MIN_GAIN or the kernel cannot hold one tile."""
    if norm and c_in > MAX_CHANNELS:
        return None
    fits = [m for m in SIZES if tiles_per_block(m, c_in, c_out, dilation, norm) >= 1]
    if not fits:
        return None
    m = min(fits, key=lambda m: winograd_cost(m, c_in, c_out, dilation, norm))
    gain = direct_cost(c_in, c_out) / winograd_cost(m, c_in, c_out, dilation, norm)
    return Choice(m, gain) if gain >= MIN_GAIN else None


# -- the op ----------------------------------------------------------------------------------------
NORM_ROLES = ("norm_w", "norm_b", "fc_w", "fc_b", "alpha")
ATTRS = {"m": None, "c_out": None, "padding": 0, "dilation": 1, "act": "none", "slope": 0.01,
         "eps": 1e-5, "norm_act": "none", "norm_slope": 0.01}


def _c_in(name, w, c_out) -> int:
    """c_in of the conv weight: torch layout [Cout, Cin, 3] or the GEMM pack [3, panels, Cin, 16]."""
    if len(w) == 3:
        expect(w[0] == c_out and w[2] == K, name, f"weight {list(w)} must be [{c_out}, Cin, {K}] (attr c_out {c_out})")
        return w[1]
    expect(len(w) == 4 and w[0] == K and w[1] == panels(c_out) and w[3] == GEMM_NR, name,
           f"weight must be [Cout, Cin, {K}] or the conv GEMM pack [{K}, {panels(c_out)}, Cin, 16], got {list(w)}")
    return w[2]


def _infer(name, ins, ws, a):
    x, c_out, m = ins["x"], a["c_out"], a["m"]
    expect(len(x) == 3 and isinstance(x[2], int), name, f"x must be [B, T, C] with fixed C, got {list(x)}")
    expect(isinstance(c_out, int) and c_out >= 1, name, f"attr c_out {c_out!r} must be an integer >= 1")
    expect(m in POINTS, name, f"attr m {m!r} must be one of {sorted(POINTS)}")
    c_in = _c_in(name, ws["weight"], c_out)
    expect(c_in == x[2], name, f"weight {list(ws['weight'])} expects {c_in} input channels, x has {x[2]}")
    for key in ("padding", "dilation"):
        expect(isinstance(a[key], int) and a[key] >= (key == "dilation"), name,
               f"attr {key} must be an integer, got {a[key]!r}")
    expect(a["act"] in ("none", "leaky_relu"), name, f"act {a['act']!r} is not 'none' or 'leaky_relu'")
    expect(tuple(ws["bias"]) == (c_out,), name, f"bias has shape {list(ws['bias'])}, expected [{c_out}]")
    norm = "style" in ins
    given = [r for r in NORM_ROLES if r in ws]
    if norm:
        missing = [r for r in NORM_ROLES[:4] if r not in ws]     # alpha is optional (act none)
        expect(not missing, name, f"the input 'style' needs norm weights {missing}")
        adain_infer(name, {"x": x, "style": ins["style"]}, {r: ws[r] for r in given},
                    {"eps": a["eps"], "act": a["norm_act"], "slope": a["norm_slope"]})
    else:
        expect(not given, name, f"norm weights {given} need the input 'style'")
    expect(tiles_per_block(m, c_in, c_out, a["dilation"], norm) >= 1, name,
           f"Cin {c_in} and Cout {c_out} at m = {m} exceed the kernel's work area")
    return stride1_out(name, x, c_out, a["padding"], a["dilation"] * (K - 1), ins.get("res")), "f32"


def _bind(ctx: BindContext):
    a, w, norm = ctx.attrs, ctx.w_ptr, "style" in ctx.in_ptr
    return "kcc_winograd_conv1d_f32", {
        "x": ctx.in_ptr["x"], "style": ctx.in_ptr.get("style", ctx.in_ptr["x"]), "n_batch": ctx.dim("x", 0),
        "t_in": ctx.dim("x", 1), "c_in": ctx.dim("x", 2), "n_style": ctx.dim("style", 1) if norm else "1",
        "norm_w": w.get("norm_w", w["bias"]), "norm_b": w.get("norm_b", w["bias"]), "fc_w": w.get("fc_w", w["bias"]),
        "fc_b": w.get("fc_b", w["bias"]), "alpha": w.get("alpha", w["bias"]),
        "act": str(NORM_ACTS[a["norm_act"]]), "slope": c_float(a["norm_slope"]), "eps": c_float(a["eps"]),
        "has_norm": "1" if norm else "0", "u": w["weight"], "m": str(a["m"]), "bias": w["bias"],
        "c_out": str(a["c_out"]), "pad": str(a["padding"]), "dilation": str(a["dilation"]),
        "neg_slope": c_float(a["slope"] if a["act"] == "leaky_relu" else 1.0),
        "res": ctx.in_ptr.get("res", ctx.in_ptr["x"]), "has_res": "1" if "res" in ctx.in_ptr else "0",
        "out": ctx.out_ptr,
    }


def _reference(ins, ws, a):
    """The conv (after the adain, when style is given) it replaces: a change of basis, not of result."""
    x = ins["x"]
    if "style" in ins:
        x = adain_reference(x, ins["style"], ws, a["eps"], a["norm_act"], a["norm_slope"])
    return conv_reference(x, ws["weight"], ws["bias"], a, res=ins.get("res"))


def _case(rng, name, b, t, c_in, c_out, m, res=False, norm_act=None, **attrs) -> Case:
    t_out = t + 2 * attrs.get("padding", 0) - attrs.get("dilation", 1) * (K - 1)
    conv = conv_case(rng, name, b, t, c_in, c_out, K, res_t=t_out if res else None, **attrs)
    ins, ws, extra = dict(conv.inputs), dict(conv.weights), {}
    if norm_act is not None:
        ins["style"] = rng.standard_normal((b, 8)).astype(np.float32)
        ws.update(adain_weights(rng, c_in, 8, norm_act == "snake"))
        extra = {"norm_act": norm_act, "norm_slope": 0.2}
    return Case(name, ins, ws, {**conv.attrs, **extra, "m": m, "c_out": c_out})


def _cases():
    rng = np.random.default_rng(50)
    return [_case(rng, "m2_same_odd_tail", 1, 53, 24, 20, 2, padding=1),
            _case(rng, "m3_d3_residual_leaky_batch2", 2, 61, 16, 33, 3, res=True, padding=3, dilation=3,
                  act="leaky_relu", slope=0.1),
            _case(rng, "m3_d5_snake_norm", 1, 97, 40, 32, 3, norm_act="snake", padding=5, dilation=5),
            _case(rng, "m2_valid_short", 1, 4, 5, 3, 2),
            _case(rng, "m3_leaky_norm_residual", 2, 30, 17, 18, 3, res=True, norm_act="leaky_relu", padding=1),
            _case(rng, "m3_one_output", 1, 3, 8, 16, 3),
            _case(rng, "m2_d5_tiles_past_the_end", 1, 41, 16, 16, 2, padding=5, dilation=5),   # residues 1-4
            _case(rng, "m2_many_blocks_d3", 1, 700, 64, 64, 2, norm_act="none", padding=3, dilation=3)]


def _cost(v) -> int:
    """The kernel's multiply-adds (tile_madds) x 2, tiles as it cuts them, plus the fused norm's
    formula (adain_conv1d's) and the epilogue."""
    b, t_out, c_out = v.out
    c_in, m, d = v.ins["x"][2], v.attrs["m"], v.attrs["dilation"]
    tiles = b * residue_tiles(t_out, d, m)
    norm = 0
    if "style" in v.ins:
        s = v.ins["style"][1]
        norm = 2 * b * s * 2 * c_in + b * 2 * c_in + (8 + ACT_FLOPS[v.attrs["norm_act"]]) * v.n(v.ins["x"])
    return 2 * tiles * sum(tile_madds(m, c_in, c_out)) + norm + epilogue(v, v.n_out)


define_op(OpDef("winograd_conv1d", ("x", "style?", "res?"), ("weight", "bias", *(f"{r}?" for r in NORM_ROLES)),
                ATTRS, _infer, _bind, pack={"weight": ("winograd{m}", winograd_pack)},
                reference=_reference, cases=_cases, cost=_cost))
