"""Convolutions over time: `conv1d` (nn.Conv1d) and `conv_transpose1d` (nn.ConvTranspose1d).

Activations are time-major: x [B, T, Cin] (a rank-2 [B, T] input is one channel), out
[B, T', Cout]. Weights come in torch's layouts (Conv1d [Cout, Cin/groups, K], ConvTranspose1d
[Cin, Cout/groups, K]; weight-normed layers are declared with "fold": "weight_norm") and are
packed for the variant's kernel. `bias` is optional (conv1x1 shortcuts have none).
Input `res` is optional: a residual [B, T', Cout] added after the activation (kcc.compiler.passes fuses
an `add` into its producing conv this way).

Attrs: stride, padding, dilation, groups (and output_padding for the transposed form);
act "none" | "leaky_relu" with slope, fused after the bias.

The algorithm is chosen here, at lowering, by the rule table VARIANTS: the first rule that
matches the shapes and attrs names the variant, which fixes the C function (one per variant:
kcc_conv1d_<variant>_f32 in conv1d_<variant>_f32.c) and its weight layout.

    {"op": "conv1d", "in": {"x": "h"}, "w": {"weight": "c1_w", "bias": "c1_b"},
     "attrs": {"padding": 1, "act": "leaky_relu", "slope": 0.2}, "out": "h1"}
"""
from __future__ import annotations

import math

import numpy as np

from kcc.kernels.registry import Contract, F32, I64, IN_F32, KERNELS, Kernel, OUT_F32, WEIGHT, c_constant, register
from kcc.ops.core import OPS, BindContext, Case, OpDef, c_float, define_op, expect
from kcc.ops.cost_terms import epilogue
from kcc.ops.elementwise import paren_extent, same_extent

NR = c_constant("conv1d_grouped_f32.c", "KCC_CONV_NR")  # the grouped layout's column panels, zero-padded
GEMM_NR = c_constant("gemm_tile_f32.c", "KCC_GEMM_NR")   # the GEMM and polyphase layouts' panel width


def panels(c_out: int) -> int:
    """GEMM_NR-wide column panels of c_out output channels (the last zero-padded)."""
    return -(-c_out // GEMM_NR)


def residue_tiles(t_out: int, dilation: int, length: int) -> int:
    """Tiles of `length` outputs the block-transform convs (block DFT, Winograd) cut t_out rows
    into, per residue of the dilation as many as residue 0's (kcc_conv_tiles, conv_geometry.c)."""
    return dilation * math.ceil(math.ceil(t_out / dilation) / length)


ACTS = ("none", "leaky_relu")

# (variant, rule(c_in, c_out, groups, dilation, transposed)): the first match wins.
VARIANTS = (
    ("depthwise", lambda c_in, c_out, g, d, tr: c_in // g == 1 and c_out // g == 1),   # incl. 1 in, 1 out
    ("gemm", lambda c_in, c_out, g, d, tr: g == 1 and not tr),
    ("polyphase", lambda c_in, c_out, g, d, tr: g == 1 and tr and d == 1),
    ("grouped", lambda c_in, c_out, g, d, tr: True),
)


def variant(c_in: int, c_out: int, groups: int, dilation: int, transposed: bool) -> str:
    """The conv algorithm for these shapes and attrs (VARIANTS): its kernel is kcc_conv1d_<variant>_f32."""
    return next(name for name, rule in VARIANTS if rule(c_in, c_out, groups, dilation, transposed))


_EPILOGUE_NOTE = "bias / res are not read when has_* = 0; identical for any thread count"
_GEMM_ACC = ("f32 throughout: each tap's KC-channel chunks summed from zero (FMA where the target has it) and "
             "added in (tap, chunk) order to the output's f32 partial, then + bias, the leaky slope, + res in f32")
_GEMM_NOTES = ("torch accumulates in f32 (oneDNN order); the difference is of torch's own rounding, "
               "~sqrt(K*Cin/64)*2^-24*|out|. " + _EPILOGUE_NOTE)
_CONV_HEAD = (("x", IN_F32), ("n_batch", I64), ("t_in", I64), ("c_in", I64), ("wp", WEIGHT), ("bias", WEIGHT),
              ("has_bias", I64))
_CONV_TAIL = (("neg_slope", F32), ("res", IN_F32), ("has_res", I64), ("out", OUT_F32))

register(Kernel(
    name="kcc_conv_out_rows", source="conv_geometry.c",
    args=(("n_batch", I64), ("t_in", I64), ("c_in", I64), ("c_out", I64), ("k_size", I64), ("stride", I64),
          ("pad", I64), ("dilation", I64), ("output_padding", I64), ("groups", I64), ("transposed", I64)),
    contract=Contract(accumulation="integers only", tolerance=0.0,
                      notes="a helper every conv variant pastes (with the tap and phase row helpers); no op lowers to it"),
))

register(Kernel(
    name="kcc_conv_epilogue_f32", source="conv_epilogue_f32.c",
    args=(("ob", OUT_F32), ("c_out", I64), ("t0", I64), ("t1", I64), ("bias", WEIGHT), ("has_bias", I64),
          ("neg_slope", F32), ("res", IN_F32), ("has_res", I64)),
    contract=Contract(accumulation="f32: + bias, the leaky slope, + res", tolerance=0.0,
                      notes="a helper the GEMM-path conv variants paste; no op lowers to it"),
))

register(Kernel(
    name="kcc_conv_rows_f32", source="conv_rows_f32.c",
    args=(("xs", IN_F32), ("r0", I64), ("t_in", I64), ("c_in", I64), ("wp", WEIGHT), ("c_out", I64),
          ("k_size", I64), ("pad", I64), ("dilation", I64), ("stride", I64), ("t0", I64), ("t1", I64),
          ("ob", OUT_F32)),
    contract=Contract(accumulation=_GEMM_ACC.split(", then")[0], tolerance=2e-5,
                      notes="a helper: the GEMM variant's rows, shared by the fused and block-DFT convs"),
    requires=("kcc_conv_out_rows", "kcc_gemm_tile_f32"),
))

register(Kernel(
    name="kcc_conv1d_gemm_f32", source="conv1d_gemm_f32.c",
    args=_CONV_HEAD + (("c_out", I64), ("k_size", I64), ("stride", I64), ("pad", I64), ("dilation", I64)) + _CONV_TAIL,
    contract=Contract(accumulation=_GEMM_ACC, tolerance=2e-5, notes=_GEMM_NOTES),
    requires=("kcc_conv_out_rows", "kcc_conv_epilogue_f32", "kcc_conv_rows_f32"),
))

register(Kernel(
    name="kcc_conv1d_polyphase_f32", source="conv1d_polyphase_f32.c",
    args=_CONV_HEAD + (("c_out", I64), ("k_size", I64), ("stride", I64), ("pad", I64), ("output_padding", I64))
    + _CONV_TAIL,
    contract=Contract(accumulation="the GEMM variant's, per stride phase: " + _GEMM_ACC, tolerance=2e-5,
                      notes=_GEMM_NOTES),
    requires=("kcc_conv_out_rows", "kcc_conv_epilogue_f32", "kcc_gemm_tile_f32"),
))

register(Kernel(
    name="kcc_conv1d_depthwise_f32", source="conv1d_depthwise_f32.c",
    args=(("x", IN_F32), ("n_batch", I64), ("t_in", I64), ("channels", I64), ("wp", WEIGHT), ("bias", WEIGHT),
          ("has_bias", I64), ("k_size", I64), ("stride", I64), ("pad", I64), ("dilation", I64),
          ("output_padding", I64), ("transposed", I64)) + _CONV_TAIL,
    contract=Contract(accumulation="f64: the bias, then the taps in order, rounded once; the leaky slope and + res "
                                   "in f32", tolerance=2e-5, notes=_EPILOGUE_NOTE),
    requires=("kcc_conv_out_rows",),
))

register(Kernel(
    name="kcc_conv1d_grouped_f32", source="conv1d_grouped_f32.c",
    args=_CONV_HEAD + (("c_out", I64), ("k_size", I64), ("stride", I64), ("pad", I64), ("dilation", I64),
                       ("output_padding", I64), ("groups", I64), ("transposed", I64)) + _CONV_TAIL,
    contract=Contract(accumulation="f32 partial sums over <= 32 input channels of one tap, summed in f64 across "
                                   "chunks and taps, rounded once after the f64 bias add; then the leaky slope "
                                   "and + res in f32", tolerance=2e-5, notes=_EPILOGUE_NOTE),
    requires=("kcc_conv_out_rows",),
))


def _torch_channels(w: np.ndarray, transposed: bool, groups: int) -> tuple[int, int]:
    """(c_in, c_out) of a torch-layout weight: Conv1d [Cout, Cin/g, K], ConvTranspose1d [Cin, Cout/g, K]."""
    return (w.shape[0], w.shape[1] * groups) if transposed else (w.shape[1] * groups, w.shape[0])


def _pack(w: np.ndarray, transposed: bool, groups: int, stride: int, dilation: int) -> np.ndarray:
    """torch layout -> its variant's: [K, panels, Cin, 16] (gemm, polyphase), [K, C] (depthwise)
    or [G, panels, K, cig, 8] (grouped); panels zero-padded."""
    k = w.shape[2]
    kind = variant(*_torch_channels(w, transposed, groups), groups, dilation, transposed)
    if kind == "gemm":
        c_out, c_in = w.shape[0], w.shape[1]
        out = np.zeros((k, c_in, panels(c_out) * GEMM_NR), dtype=np.float32)
        out[..., :c_out] = w.transpose(2, 1, 0)                             # [K, Cin, Cout]
        return np.ascontiguousarray(out.reshape(k, c_in, panels(c_out), GEMM_NR).transpose(0, 2, 1, 3))
    if kind == "polyphase":
        c_in, c_out = w.shape[0], w.shape[1]
        out = np.zeros((k, c_in, panels(c_out) * GEMM_NR), dtype=np.float32)
        out[..., :c_out] = w.transpose(2, 0, 1)                             # [K, Cin, Cout]
        return np.ascontiguousarray(out.reshape(k, c_in, panels(c_out), GEMM_NR).transpose(0, 2, 1, 3))
    if transposed:
        c_in, cog = w.shape[0], w.shape[1]
        c_out, cig = cog * groups, c_in // groups
        gk = w.reshape(groups, cig, cog, k).transpose(0, 3, 1, 2)          # [G, K, cig, cog]
    else:
        c_out, cig = w.shape[0], w.shape[1]
        cog, c_in = c_out // groups, cig * groups
        gk = w.reshape(groups, cog, cig, k).transpose(0, 3, 2, 1)          # [G, K, cig, cog]
    if kind == "depthwise":
        return np.ascontiguousarray(gk[:, :, 0, 0].T)                       # [K, C]
    n_panels = -(-cog // NR)                                                # NR-wide: the grouped kernel's own
    out = np.zeros((groups, k, cig, n_panels * NR), dtype=np.float32)
    out[..., :cog] = gk
    return np.ascontiguousarray(out.reshape(groups, k, cig, n_panels, NR).transpose(0, 3, 1, 2, 4))


def gemm_pack(op_name: str):
    """The weight pack of an op that runs a stride-1 conv as the GEMM variant (adain_conv1d,
    dft_conv1d): torch layout [Cout, Cin, K] -> [K, panels, Cin, 16], refused for other variants."""
    def pack(w, a):
        g = a.get("groups", 1)
        expect(variant(w.shape[1] * g, w.shape[0], g, 1, False) == "gemm", op_name,
               f"weight {list(w.shape)} with groups={g} is not a GEMM-variant conv")
        return _pack(w, False, 1, 1, 1)
    return pack


def stride1_out(name: str, x, c_out: int, padding: int, span: int, res=None) -> tuple:
    """[B, T', Cout] of a stride-1 conv over x [B, T, C] with tap span dilation*(K-1), T' kept as
    an extent expression; a residual `res` (shape or None) must match it. Shared by the fused
    and block-DFT conv ops."""
    add, t = 2 * padding - span, x[1]
    t_out = t + add if isinstance(t, int) else (t if add == 0 else f"({t}{'+' if add > 0 else '-'}{abs(add)})")
    expect(not isinstance(t_out, int) or t_out >= 1, name, f"time extent {t} is too short for this conv")
    out = (x[0], t_out, c_out)
    if res is not None:
        expect(len(res) == 3 and all(same_extent(p, q) for p, q in zip(res, out)), name,
               f"residual {list(res)} must have the output's extent {list(out)}")
    return out


def _out_extent(t, transposed: bool, k: int, a: dict):
    s, p, d = a["stride"], a["padding"], a["dilation"]
    if transposed:
        mul, add, div = s, d * (k - 1) + a["output_padding"] + 1 - 2 * p - s, 1   # (T-1)*s + ...
    else:
        mul, add, div = 1, 2 * p - d * (k - 1) - 1, s
    if isinstance(t, int):
        return (t * mul + add) // div + (0 if transposed else 1)
    if not transposed and s == 1 and add == -1:
        return t                                   # 'same' padding keeps the extent string
    tm = t if mul == 1 else f"{mul}*{paren_extent(t)}"
    body = f"({tm}{'+' if add >= 0 else '-'}{abs(add)})" if add else f"({tm})"
    return body if transposed else f"({body}/{div}+1)"


def _make(op: str, transposed: bool):
    extra = {"output_padding": 0} if transposed else {}
    attrs = {"stride": 1, "padding": 0, "dilation": 1, "groups": 1, **extra, "act": "none", "slope": 0.01}

    def infer(name, ins, ws, a):
        x, w = ins["x"], ws["weight"]
        expect(len(x) in (2, 3), name, f"x must be [B, T, C] (or [B, T] for one channel), got {list(x)}")
        c_in = x[2] if len(x) == 3 else 1
        expect(isinstance(c_in, int), name, f"channel extent {c_in!r} must be fixed")
        for key in ("stride", "dilation", "groups"):
            expect(isinstance(a[key], int) and a[key] >= 1, name, f"attr {key} must be an integer >= 1, got {a[key]!r}")
        for key in ("padding", *extra):
            expect(isinstance(a[key], int) and a[key] >= 0, name, f"attr {key} must be an integer >= 0, got {a[key]!r}")
        expect(a["act"] in ACTS, name, f"act {a['act']!r} is not one of {ACTS}")
        g = a["groups"]
        expect(len(w) == 3, name, f"weight must be rank 3 (torch layout), got {list(w)}")
        if transposed:
            c_out = w[1] * g
            expect(w[0] == c_in, name, f"weight {list(w)} expects {w[0]} input channels, x has {c_in}")
        else:
            c_out = w[0]
            expect(w[1] * g == c_in, name, f"weight {list(w)} with groups={g} expects {w[1] * g} input channels, x has {c_in}")
        expect(c_in % g == 0 and c_out % g == 0, name, f"groups={g} does not divide Cin={c_in} and Cout={c_out}")
        if "bias" in ws:
            expect(tuple(ws["bias"]) == (c_out,), name, f"bias has shape {list(ws['bias'])}, expected [{c_out}]")
        t_out = _out_extent(x[1], transposed, w[2], a)
        expect(not isinstance(t_out, int) or t_out >= 1, name, f"time extent {x[1]} is too short for this conv")
        shape = (x[0], t_out, c_out)
        if "res" in ins:
            r = ins["res"]
            expect(len(r) == 3 and all(same_extent(p, q) for p, q in zip(r, shape)), name,
                   f"residual {list(r)} must have the output's extent {list(shape)}")
        return shape, "f32"

    def bind(ctx: BindContext):
        a = ctx.attrs
        has_bias = "bias" in ctx.w_ptr
        x = ctx.in_shape["x"]
        expect(len(ctx.out_shape) == 3, ctx.op_name, "bind needs the inferred output extent")
        c_in = x[2] if len(x) == 3 else 1
        kernel = f"kcc_conv1d_{variant(c_in, ctx.out_shape[2], a['groups'], a['dilation'], transposed)}_f32"
        args = {
            "x": ctx.in_ptr["x"], "n_batch": ctx.dim("x", 0), "t_in": ctx.dim("x", 1),
            "c_in": str(c_in), "channels": str(c_in),
            "wp": ctx.w_ptr["weight"], "bias": ctx.w_ptr["bias" if has_bias else "weight"],
            "has_bias": "1" if has_bias else "0", "c_out": str(ctx.out_shape[2]),
            "k_size": str(_k(ctx)), "stride": str(a["stride"]), "pad": str(a["padding"]),
            "dilation": str(a["dilation"]), "output_padding": str(a.get("output_padding", 0)),
            "groups": str(a["groups"]), "transposed": "1" if transposed else "0",
            "neg_slope": c_float(a["slope"] if a["act"] == "leaky_relu" else 1.0),
            "res": ctx.in_ptr.get("res", ctx.in_ptr["x"]), "has_res": "1" if "res" in ctx.in_ptr else "0",
            "out": ctx.out_ptr,
        }
        return kernel, {arg: args[arg] for arg, _ in KERNELS[kernel].args}

    def pack(w, a):
        return _pack(w, transposed, a["groups"], a["stride"], a["dilation"])

    def reference(ins, ws, a):
        return conv_reference(ins["x"], ws["weight"], ws.get("bias"), a, transposed, ins.get("res"))

    define_op(OpDef(op, ("x", "res?"), ("weight", "bias?"), attrs, infer, bind, pack={"weight": ("conv_pack", pack)},
                    reference=reference, cases=_transposed_cases if transposed else _conv_cases, cost=conv_cost))


def _k(ctx: BindContext) -> int:
    wp = ctx.w_shape["weight"]  # packed: [K, panels, Cin, 16] GEMM, [K, C] depthwise, [G, panels, K, cig, 8] dense
    return wp[0] if len(wp) in (2, 4) else wp[2]


# -- reference, harness cases and cost (shared by the conv-shaped ops: fused, block-DFT, bf16) --------

def _leaky64(y: np.ndarray, act: str, slope) -> np.ndarray:
    return np.where(y < 0, y * float(slope), y) if act == "leaky_relu" else y


def conv_reference(x, w, bias, a: dict, transposed: bool = False, res=None) -> np.ndarray:
    """nn.Conv1d / nn.ConvTranspose1d in f64 on time-major x ([B, T, C] or [B, T]), torch weight
    layout, then + bias, the leaky slope and + res as the kernel's epilogue; rounded to f32 once."""
    x64 = x.astype(np.float64)
    x64 = x64[..., None] if x64.ndim == 2 else x64
    b, t, c_in = x64.shape
    s, p, d, g, k = a.get("stride", 1), a["padding"], a["dilation"], a.get("groups", 1), w.shape[2]
    w64 = w.astype(np.float64)
    if transposed:
        cig, cog = c_in // g, w.shape[1]
        t_out = (t - 1) * s - 2 * p + d * (k - 1) + a.get("output_padding", 0) + 1
        full = np.zeros((b, max(t_out + p, (t - 1) * s + d * (k - 1) + 1), cog * g))
        for gi in range(g):
            xs, wg = x64[..., gi * cig:(gi + 1) * cig], w64[gi * cig:(gi + 1) * cig]
            for j in range(k):
                full[:, j * d:j * d + s * (t - 1) + 1:s, gi * cog:(gi + 1) * cog] += xs @ wg[:, :, j]
        out = full[:, p:p + t_out]
    else:
        cig, cog = w.shape[1], w.shape[0] // g
        xp = np.pad(x64, [(0, 0), (p, p), (0, 0)])
        t_out = (t + 2 * p - d * (k - 1) - 1) // s + 1
        out = np.zeros((b, t_out, cog * g))
        for gi in range(g):
            wg = w64[gi * cog:(gi + 1) * cog]
            for j in range(k):
                xs = xp[:, j * d:j * d + s * (t_out - 1) + 1:s, gi * cig:(gi + 1) * cig]
                out[..., gi * cog:(gi + 1) * cog] += xs @ wg[:, :, j].T
    if bias is not None:
        out = out + bias.astype(np.float64)
    out = _leaky64(out, a.get("act", "none"), a.get("slope", 0.01))
    if res is not None:
        out = out + res.astype(np.float64)
    return out.astype(np.float32)


def conv_weight(rng, c_out: int, cig: int, k: int) -> np.ndarray:
    """A seeded weight scaled 1/sqrt(fan-in): unit-scale outputs from unit-scale inputs."""
    return (rng.standard_normal((c_out, cig, k)) / np.sqrt(cig * k)).astype(np.float32)


def conv_case(rng, name: str, b: int, t: int, c_in: int, c_out: int, k: int, bias: bool = True,
              res_t: int | None = None, rank2: bool = False, transposed: bool = False, **attrs) -> Case:
    """One conv-shaped case: x [B, T, Cin] (or [B, T]), weight in torch layout, optional bias and
    a residual of res_t output rows; attrs as the op's."""
    g = attrs.get("groups", 1)
    x = rng.standard_normal((b, t) if rank2 else (b, t, c_in)).astype(np.float32)
    w = conv_weight(rng, c_in, c_out // g, k) if transposed else conv_weight(rng, c_out, c_in // g, k)
    ws = {"weight": w, **({"bias": rng.standard_normal(c_out).astype(np.float32)} if bias else {})}
    ins = {"x": x, **({"res": rng.standard_normal((b, res_t, c_out)).astype(np.float32)} if res_t else {})}
    return Case(name, ins, ws, attrs)


def _conv_cases():
    rng = np.random.default_rng(20)
    return [
        conv_case(rng, "gemm_same_pad", 2, 23, 8, 24, 3, padding=1),
        conv_case(rng, "gemm_stride2_leaky_cout_tail", 1, 19, 9, 20, 3, bias=False, stride=2, padding=2,
                  dilation=2, act="leaky_relu", slope=0.2),
        conv_case(rng, "gemm_k11_d5_residual", 1, 40, 33, 17, 11, res_t=40, padding=25, dilation=5),
        conv_case(rng, "gemm_stride6", 1, 37, 22, 40, 12, stride=6, padding=3),
        conv_case(rng, "conv1x1_cout5", 2, 13, 33, 5, 1, bias=False, act="leaky_relu", slope=0.2),
        conv_case(rng, "grouped_stride3", 1, 29, 12, 40, 7, stride=3, dilation=2, groups=4),
        conv_case(rng, "depthwise_dilated", 2, 21, 16, 16, 3, bias=False, padding=3, dilation=3, groups=16),
        conv_case(rng, "one_channel_row", 1, 26, 1, 1, 3, rank2=True, stride=2, padding=1),
    ]


def _transposed_cases():
    rng = np.random.default_rng(21)
    return [
        conv_case(rng, "polyphase_up2", 1, 11, 24, 12, 4, transposed=True, stride=2, padding=1),
        conv_case(rng, "polyphase_up10_outpad", 1, 7, 16, 19, 20, transposed=True, stride=10, padding=5,
                  output_padding=1, act="leaky_relu", slope=0.1),
        conv_case(rng, "depthwise_up2", 2, 9, 8, 8, 3, transposed=True, stride=2, padding=1, output_padding=1,
                  groups=8),
        conv_case(rng, "grouped_dilated", 1, 10, 6, 9, 3, bias=False, transposed=True, stride=1, padding=2,
                  dilation=2, groups=3),
    ]


def conv_cost(v) -> int:
    x = v.ins["x"]
    c_in = x[2] if len(x) == 3 else 1
    b, _, c_out = v.out
    g, k = v.attrs["groups"], v.karg("k_size")
    if v.op.type == "conv_transpose1d":       # every input row scatters to (Cout/g) * K outputs
        mac = b * x[1] * c_in * (c_out // g) * k
    else:                                      # every output row gathers (Cin/g) * K inputs
        mac = b * v.out[1] * c_out * (c_in // g) * k
    return 2 * mac + epilogue(v, v.n_out)


_make("conv1d", transposed=False)
_make("conv_transpose1d", transposed=True)


# -- the bf16 precision (kcc/compiler/precision.py): GEMM-path convs on bf16-pair weights -------------
register(Kernel(
    name="kcc_gemm_tile_bf16",
    source="gemm_tile_bf16.c",
    args=(("a", IN_F32), ("lda", I64), ("mr", I64), ("b", IN_F32), ("b_step", I64), ("kc", I64), ("c", OUT_F32),
          ("ldc", I64), ("nr", I64), ("first", I64)),
    contract=Contract(
        accumulation="a and B rounded to bf16 (nearest even; B at lowering), their products exact in f32, "
                     "summed in f32 pair by pair from zero (vdpbf16ps on AVX512_BF16, else an ISO C "
                     "emulation); callers add KC-term chunk sums in order",
        tolerance=2e-2,
        notes="a micro-kernel other kernels call; mr <= 8, nr <= 32, kc <= 128; error ~2^-8 relative "
              "per operand: the listening gate (tests/test_precision_gate.py), not the X-Ray gate, "
              "judges it"),
    requires=("kcc_gemm_tile_f32",),
))

# The bf16 twins of the two GEMM variants take the f32 kernels' argument lists: one bind serves both.
BF16_VARIANTS = {"kcc_conv1d_gemm_f32": "kcc_conv1d_gemm_bf16", "kcc_conv1d_polyphase_f32": "kcc_conv1d_polyphase_bf16"}


def _register_bf16(f32: str, source: str, driver: tuple[str, ...] = ()) -> None:
    register(Kernel(
        name=BF16_VARIANTS[f32], source=source, args=KERNELS[f32].args,
        contract=Contract(accumulation=f"{f32} with the tiles of kcc_gemm_tile_bf16; epilogue in f32",
                          tolerance=2e-2, notes="identical for any thread count"),
        requires=("kcc_conv_out_rows", "kcc_conv_epilogue_f32", "kcc_gemm_tile_bf16", *driver),
    ))


_register_bf16("kcc_conv1d_gemm_f32", "conv1d_bf16.c", driver=("kcc_conv1d_gemm_f32",))   # its row-block driver
_register_bf16("kcc_conv1d_polyphase_f32", "conv1d_polyphase_bf16.c", driver=("kcc_conv1d_polyphase_f32",))


def bf16_pairs(w: np.ndarray) -> np.ndarray:
    """A GEMM pack [..., Cin, 16] (f32) -> [..., ceil(Cin/2), 16] 32-bit words (stored as float32):
    bf16 of row 2q in the low half, of row 2q + 1 in the high half, rounded to nearest even; an
    odd Cin ends in a zero row. The layout of gemm_tile_bf16.c."""
    bits = np.ascontiguousarray(w, dtype=np.float32).view(np.uint32).astype(np.uint64)
    half = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint32)
    if half.shape[-2] % 2:
        half = np.concatenate([half, np.zeros_like(half[..., :1, :])], axis=-2)
    return np.ascontiguousarray(half[..., 0::2, :] | (half[..., 1::2, :] << 16)).view(np.float32)


def bf16_gemm_pack(op: str):
    """pack fn for a bf16 op's GEMM-path `weight`: torch layout or the f32 GEMM pack -> bf16 pairs."""
    to_gemm = gemm_pack(op)

    def pack(w, a):
        return bf16_pairs(w if w.ndim == 4 else to_gemm(w, a))
    return pack


def bf16_bind(bind, kernel: str):
    def wrapped(ctx: BindContext):
        _, args = bind(ctx)
        return kernel, args
    return wrapped


def _bf16_variant_bind(bind):
    """A conv op's bind with its variant's kernel swapped for the bf16 twin (GEMM variants only)."""
    def wrapped(ctx: BindContext):
        kernel, args = bind(ctx)
        expect(kernel in BF16_VARIANTS, ctx.op_name, f"{kernel} has no bf16 twin (only the GEMM variants do)")
        return BF16_VARIANTS[kernel], args
    return wrapped


def _bf16_conv_cases():
    """GEMM-variant shapes only (the others have no bf16 twin)."""
    rng = np.random.default_rng(22)
    return [conv_case(rng, "same_pad", 2, 23, 8, 24, 3, padding=1),
            conv_case(rng, "stride2_odd_cin_residual", 1, 30, 33, 17, 5, res_t=14, stride=2, padding=1,
                      act="leaky_relu", slope=0.2)]


define_op(OpDef("conv1d_bf16", OPS["conv1d"].inputs, OPS["conv1d"].weights, OPS["conv1d"].attrs,
                OPS["conv1d"].infer, _bf16_variant_bind(OPS["conv1d"].bind),
                pack={"weight": ("bf16_pack", bf16_gemm_pack("conv1d_bf16"))},
                reference=OPS["conv1d"].reference, cases=_bf16_conv_cases, cost=conv_cost))


def _bf16_polyphase_pack(w, a):
    """conv_transpose1d_bf16's weight: torch layout or the f32 polyphase pack -> bf16 pairs."""
    if w.ndim == 3:
        expect(variant(w.shape[0], w.shape[1] * a["groups"], a["groups"], a["dilation"], True) == "polyphase",
               "conv_transpose1d_bf16", f"weight {list(w.shape)} is not a polyphase-variant transposed conv")
        w = _pack(w, True, a["groups"], a["stride"], a["dilation"])
    return bf16_pairs(w)


def polyphase_cases(seed: int) -> list:
    """Polyphase-variant transposed convs only (the other variants have no bf16 / int8 twin): an
    odd Cin with stride 6, and stride 10 with output padding and a leaky epilogue."""
    rng = np.random.default_rng(seed)
    return [conv_case(rng, "polyphase_up6_odd_cin", 1, 9, 33, 16, 12, transposed=True, stride=6, padding=3),
            conv_case(rng, "polyphase_up10_outpad", 1, 7, 16, 19, 20, transposed=True, stride=10, padding=5,
                      output_padding=1, act="leaky_relu", slope=0.1)]


define_op(OpDef("conv_transpose1d_bf16", OPS["conv_transpose1d"].inputs, OPS["conv_transpose1d"].weights,
                OPS["conv_transpose1d"].attrs, OPS["conv_transpose1d"].infer,
                _bf16_variant_bind(OPS["conv_transpose1d"].bind),
                pack={"weight": ("bf16_pack", _bf16_polyphase_pack)},
                reference=OPS["conv_transpose1d"].reference, cases=lambda: polyphase_cases(23), cost=conv_cost))
