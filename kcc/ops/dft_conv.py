"""Long stride-1 convolutions as block DFTs (dft_conv1d_f32.c), made by kcc.compiler.passes.spectral_convs.

`dft_conv1d`: x [B, T, Cin], optional res; weights `weight`, `spectrum` (both name the conv's
one weight: packed at lowering, `weight` into the GEMM pack [K, panels, Cin, 16] and `spectrum`
into its n-point spectrum [n/2, 3, panels, Cin, 16], made once in f64 and rounded to f32) and
`bias`; attrs n (DFT length, a power of two > K-1), k_size, c_out, min_rows, padding, dilation,
act (none | leaky_relu), slope: the conv1d it replaces, same output and epilogue. Below min_rows
input rows (B * T) it runs the direct conv on the GEMM pack: there reading the spectrum (~48/K
times the weight's bytes at n = 32) costs more than the multiplies it saves.

The cost model lives here, once: `tile_madds` counts what the kernel does per tile (slot GEMMs,
transforms); `choose(c_in, c_out, k)` weighs it, per output row and with the spectrum's traffic,
against the direct conv and returns the DFT length and min_rows, or None. The pass that makes
dft_conv1d (kcc.compiler.passes.spectral_convs), the op's FLOP formula (kcc report) and
bench/bench_dft_conv.py all read it; its constants are below.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kcc.kernels.registry import Contract, F32, I64, IN_F32, KERNELS, Kernel, OUT_F32, WEIGHT, c_constant, register
from kcc.ops.conv import (GEMM_NR, bf16_bind, bf16_gemm_pack, bf16_pairs, conv_case, conv_reference, gemm_pack, panels,
                          residue_tiles, stride1_out)
from kcc.ops.core import OPS, BindContext, Case, OpDef, c_float, define_op, expect
from kcc.ops.cost_terms import epilogue

MAX_N = c_constant("dft_conv1d_f32.c", "KCC_DFT_MAX_N")
WORK = c_constant("dft_conv1d_f32.c", "KCC_DFT_WORK")     # floats of one thread's work area

register(Kernel(
    name="kcc_dft_conv1d_f32",
    source="dft_conv1d_f32.c",
    args=(("x", IN_F32), ("n_batch", I64), ("t_in", I64), ("c_in", I64), ("wp", WEIGHT), ("spec", WEIGHT),
          ("n", I64), ("min_rows", I64), ("bias", WEIGHT), ("c_out", I64), ("k_size", I64), ("pad", I64),
          ("dilation", I64), ("neg_slope", F32), ("res", IN_F32), ("has_res", I64), ("out", OUT_F32)),
    contract=Contract(
        accumulation="f32: input real FFT (radix 2 over n/2 complex points), three real GEMMs per "
                     "spectrum slot (Gauss's complex product; 128-term chunks from zero, FMA where the "
                     "target has it), the real inverse FFT (the same plan backwards); then + bias, "
                     "leaky slope, + res as kcc_conv1d_gemm_f32",
        tolerance=2e-5,
        notes="not bit-identical to the direct conv: a different (unitary) basis; measured max-abs "
              "1.1-2.3x the direct conv's own f32 error vs float64. Identical for any thread count. Below "
              "min_rows input rows it is kcc_conv1d_gemm_f32 exactly"),
    requires=("kcc_conv_out_rows", "kcc_conv1d_gemm_f32"),
))


# -- the cost model ------------------------------------------------------------------------------
SIZES = (16, 32, 64)   # DFT lengths the pass tries
MIN_TAPS = 5           # K = 3: the DFT (n 8 / 16) measured 1.1-1.4x the direct conv alone at 128 / 256
                       # channels; with the AdaIN fusion it gives up, resblocks.3 went 37 -> 32 ms (EPYC)
                       # but the whole synthesis only ~3% (inside the noise), for 60 MB more spectra and
                       # unfused direct convs below min_rows: not taken
MIN_GAIN = 1.3         # modelled multiply-adds direct / DFT below this: keep the direct conv (and its fusion)
MAX_SPECTRUM = 16 << 20   # bytes: every block of tiles re-reads the whole spectrum, so it must stay
                          # cache-resident (the L3 of the CPUs benchmarked here: 32 MiB on an EPYC,
                          # 260 MiB on a Xeon); the text encoder's 512-channel K 5 convs (50 MB each)
                          # stay direct
# Weights in slot-GEMM multiply-adds (calibrated on the EPYC at the generator's four geometries,
# bench/bench_dft_conv.py, portable build, 2 threads, each conv alone): the transforms (a real
# FFT each way) at about a third of the tiles' rate, the spectrum's bytes (re-read once per block
# of tiles, mostly from L3) at a quarter; the modelled gains land within 5% of the measured ones.
# Measured ms per conv: C 128 K 11 n = 64 14.5 (n = 32 15.9); K 7 n = 32 14.1 (n = 16 16.3,
# n = 64 13.9); C 256 K 11 n = 32 18.3; K 7 n = 16 18.4 (n = 32 15.9 alone, but see
# LONGER_MAX_SPECTRUM; n = 64 27: 5 tiles a block, the GEMM's row tiles part empty, which
# dft_cost counts as whole 8-row tiles).
TRANSFORM_WEIGHT = 3.0
SPECTRUM_WEIGHT = 0.25
# The shortest transform the pass tries has tiles at least as long as the kernel (h = n - K + 1
# >= K; shorter ones spend most of each transform on the overlap). A longer one doubles the
# spectrum, the bulk of the generator's weight bytes (and of RSS), and it is re-read per block of
# tiles by both threads while the activations stream through the same L3: it is taken only where
# the model gains LONGER_MIN_GAIN and the spectrum stays within LONGER_MAX_SPECTRUM. Measured in
# the whole synthesis (bench/bench_short.py profile, 2 threads): C 256 K 7 at n = 32 (12.6 MB)
# ran 1.09x slower than at n = 16, though 0.87x alone (bench_dft_conv.py, the spectrum hot).
LONGER_MIN_GAIN = 1.05
LONGER_MAX_SPECTRUM = 8 << 20
# Multiply-adds one byte of weight traffic is worth: half the ridge point kcc report measured
# on the 2-core EPYC benchmarked here (~150 GFLOP/s over ~48 GB/s). Prices reading the
# spectrum instead of the weight (min_rows).
MADDS_PER_BYTE = 1.5
VW = c_constant("dft_conv1d_f32.c", "KCC_DFT_VW")   # the padding lane block of each work-area row


def tiles_per_block(c_in: int, c_out: int, n: int) -> int:
    """Tiles one block of the kernel holds: its work area over a tile's n/2 + 1 regions of three
    GEMM rows (as wide as the wider side) less the rows' padding, in whole 8-row GEMM tiles."""
    regions = n // 2 + 1
    fit = (WORK - regions * 3 * VW) // (regions * 3 * max(c_in, panels(c_out) * GEMM_NR))
    return fit // 8 * 8 if fit >= 8 else fit


def fits_work(c_in: int, c_out: int, n: int) -> bool:
    """One tile's work rows fit the kernel's per-thread work area."""
    return tiles_per_block(c_in, c_out, n) >= 1


def tile_madds(c_in: int, c_out: int, k: int, n: int) -> tuple[int, float]:
    """(slot GEMMs, transforms): the kernel's multiply-adds for one tile of h = n-K+1 outputs. The
    GEMMs: three real products of Cin x padded Cout per slot (Gauss's complex product); the
    transforms: the input's real FFT and the outputs' inverse one (~2.5 n log2 n per channel each)."""
    gemm = n // 2 * 3 * c_in * panels(c_out) * GEMM_NR
    return gemm, (c_in + c_out) * 2.5 * n * math.log2(n)


def spectrum_bytes(c_in: int, c_out: int, n: int) -> int:
    return 4 * n // 2 * 3 * c_in * panels(c_out) * GEMM_NR


def direct_cost(c_in: int, c_out: int, k: int) -> int:
    """The direct conv's multiply-adds per output row, as the GEMM variant runs them (padded Cout)."""
    return k * c_in * panels(c_out) * GEMM_NR


def dft_cost(c_in: int, c_out: int, k: int, n: int) -> float:
    """Weighted multiply-adds per output row: the tile's GEMMs (a block's rows in whole 8-row
    register tiles), its transforms at TRANSFORM_WEIGHT and its share of the spectrum's re-reads
    (once per block of tiles) at SPECTRUM_WEIGHT."""
    h, tb = n - k + 1, max(tiles_per_block(c_in, c_out, n), 1)
    gemm, transforms = tile_madds(c_in, c_out, k, n)
    row_tiles = math.ceil(tb / 8) * 8 / tb
    return (gemm * row_tiles + TRANSFORM_WEIGHT * transforms + SPECTRUM_WEIGHT * spectrum_bytes(c_in, c_out, n) / tb) / h


def spectrum_cost(c_in: int, c_out: int, k: int, n: int) -> float:
    """Multiply-add equivalents per run: the spectrum's bytes read from memory, less the GEMM
    pack's that the direct conv would have read."""
    return (spectrum_bytes(c_in, c_out, n) - 4 * k * c_in * panels(c_out) * GEMM_NR) * MADDS_PER_BYTE


@dataclass(frozen=True)
class Choice:
    n: int             # DFT length
    min_rows: int      # input rows (B * T) from which the DFT pays for reading its spectrum
    gain: float        # modelled direct / DFT multiply-adds per output row


def choose(c_in: int, c_out: int, k: int) -> Choice | None:
    """The DFT length for a stride-1, groups-1 conv of K taps: the shortest with tiles as long as
    the kernel, or a longer one where it pays (LONGER_MIN_GAIN, LONGER_MAX_SPECTRUM); and
    min_rows. None where it gains less than MIN_GAIN over the direct conv (or K < MIN_TAPS, or the
    spectrum exceeds MAX_SPECTRUM)."""
    if k < MIN_TAPS:
        return None
    n = None
    for m in SIZES:                     # the shortest with h >= K, then longer ones as they pay
        if m < 2 * k - 1 or not fits_work(c_in, c_out, m):
            continue
        if n is None or (spectrum_bytes(c_in, c_out, m) <= LONGER_MAX_SPECTRUM
                         and dft_cost(c_in, c_out, k, n) >= LONGER_MIN_GAIN * dft_cost(c_in, c_out, k, m)):
            n = m
    direct = direct_cost(c_in, c_out, k)
    if n is None or direct < MIN_GAIN * dft_cost(c_in, c_out, k, n) or spectrum_bytes(c_in, c_out, n) > MAX_SPECTRUM:
        return None
    per_row = dft_cost(c_in, c_out, k, n)
    return Choice(n, math.ceil(MIN_GAIN * spectrum_cost(c_in, c_out, k, n) / (direct - MIN_GAIN * per_row)),
                  direct / per_row)


def dft_basis(n: int) -> tuple[np.ndarray, np.ndarray]:
    """[n/2, n] (cos, sin) of 2 pi f u / n in f64, the slots of dft_conv1d_f32.c: slot 0 holds the
    real bins 0 and n/2 as (1, (-1)^u); exact zeros where cos / sin have them."""
    f, u = np.arange(n // 2)[:, None], np.arange(n)[None, :]
    j = (f * u) & (n - 1)
    cs = np.where((4 * j == n) | (4 * j == 3 * n), 0.0, np.cos(2 * np.pi * j / n))
    sn = np.where((2 * j == n) | (j == 0), 0.0, np.sin(2 * np.pi * j / n))
    cs[0], sn[0] = 1.0, np.where(u[0] & 1, -1.0, 1.0)
    return cs, sn


def spectrum_pack(w: np.ndarray, a: dict) -> np.ndarray:
    """The conv weight (torch layout [Cout, Cin, K] or its GEMM pack) -> the n-point spectrum
    [n/2, 3, panels, Cin, 16]: per slot f, (c, d - c, c + d) of conj(DFT_n(w))_f = c + id scaled
    by 2/n (slot 0: (c_0, c_n/2, 0) by 1/n), in f64 and rounded once."""
    wp = gemm_pack("dft_conv1d")(w, a) if w.ndim == 3 else w
    n, k = a["n"], wp.shape[0]
    cs, sn = dft_basis(n)
    scale = np.where(np.arange(n // 2) == 0, 1.0, 2.0)[:, None] / n
    w64 = wp.astype(np.float64)
    sa = np.einsum("fk,kpcj->fpcj", cs[:, :k] * scale, w64)
    sb = np.einsum("fk,kpcj->fpcj", sn[:, :k] * scale, w64)
    spec = np.stack([sa, sb - sa, sa + sb], axis=1)
    spec[0, 1], spec[0, 2] = sb[0], 0.0
    return spec.astype(np.float32)


def _valid_n(n, k) -> bool:
    return isinstance(n, int) and 4 <= n <= MAX_N and n & (n - 1) == 0 and 1 <= k < n


def _geometry(name, w, a) -> tuple[int, int]:
    """(c_in, K) of the conv weight: torch layout [Cout, Cin, K] (a circuit; packed at lowering)
    or the GEMM pack [K, panels, Cin, 16] (kcc.compiler.passes); checked against attrs k_size, c_out."""
    c_out = a["c_out"]
    expect(isinstance(c_out, int) and c_out >= 1, name, f"attr c_out {c_out!r} must be an integer >= 1")
    if len(w) == 3:
        expect(w[0] == c_out, name, f"weight {list(w)} has {w[0]} output channels, attr c_out is {c_out}")
        c_in, k = w[1], w[2]
    else:
        expect(len(w) == 4 and w[3] == GEMM_NR and w[1] == panels(c_out), name,
               f"weight must be [Cout, Cin, K] or the conv GEMM pack [K, {panels(c_out)}, Cin, 16], got {list(w)}")
        c_in, k = w[2], w[0]
    expect(k == a["k_size"], name, f"attr k_size {a['k_size']} does not match the weight's {k} taps")
    return c_in, k


def _check_common(name, x, ws, a) -> tuple[int, int]:
    """x [B, T, C] with fixed C, the weight's geometry against attrs and x, the DFT length and
    min_rows. Returns (c_in, K)."""
    expect(len(x) == 3 and isinstance(x[2], int), name, f"x must be [B, T, C] with fixed C, got {list(x)}")
    c_in, k = _geometry(name, ws["weight"], a)
    expect(_valid_n(a["n"], k), name, f"attr n {a['n']!r} must be a power of two in [4, {MAX_N}] above K-1 = {k - 1}")
    expect(c_in == x[2], name, f"weight {list(ws['weight'])} expects {c_in} input channels, x has {x[2]}")
    expect(isinstance(a["min_rows"], int) and a["min_rows"] >= 0, name, f"attr min_rows {a['min_rows']!r} must be an integer >= 0")
    return c_in, k


def _conv_infer(name, ins, ws, a):
    x, c_out = ins["x"], a["c_out"]
    _, k = _check_common(name, x, ws, a)
    expect(tuple(ws["spectrum"]) == tuple(ws["weight"]), name,
           f"weight roles 'spectrum' {list(ws['spectrum'])} and 'weight' {list(ws['weight'])} must name "
           "the same conv weight (the spectrum is packed from it)")
    expect(fits_work(x[2], c_out, a["n"]), name, f"Cin {x[2]} and Cout {c_out} at n = {a['n']} exceed the kernel's work area")
    for key in ("padding", "dilation"):
        expect(isinstance(a[key], int) and a[key] >= (key == "dilation"), name, f"attr {key} must be an integer, got {a[key]!r}")
    expect(a["act"] in ("none", "leaky_relu"), name, f"act {a['act']!r} is not 'none' or 'leaky_relu'")
    expect(tuple(ws["bias"]) == (c_out,), name, f"bias has shape {list(ws['bias'])}, expected [{c_out}]")
    return stride1_out(name, x, c_out, a["padding"], a["dilation"] * (k - 1), ins.get("res")), "f32"


def _conv_bind(ctx: BindContext):
    a, w = ctx.attrs, ctx.w_ptr
    return "kcc_dft_conv1d_f32", {
        "x": ctx.in_ptr["x"], "n_batch": ctx.dim("x", 0), "t_in": ctx.dim("x", 1), "c_in": ctx.dim("x", 2),
        "wp": w["weight"], "spec": w["spectrum"], "n": str(a["n"]), "min_rows": str(a["min_rows"]),
        "bias": w["bias"],
        "c_out": str(a["c_out"]), "k_size": str(a["k_size"]), "pad": str(a["padding"]),
        "dilation": str(a["dilation"]), "neg_slope": c_float(a["slope"] if a["act"] == "leaky_relu" else 1.0),
        "res": ctx.in_ptr.get("res", ctx.in_ptr["x"]), "has_res": "1" if "res" in ctx.in_ptr else "0",
        "out": ctx.out_ptr,
    }


def _reference(ins, ws, a):
    """The conv it replaces (same output and epilogue): a DFT is a change of basis, not of result."""
    return conv_reference(ins["x"], ws["weight"], ws["bias"], a, res=ins.get("res"))


def _case(rng, name, b, t, c_in, c_out, k, n, min_rows=0, res=False, **attrs) -> Case:
    t_out = t + 2 * attrs.get("padding", 0) - attrs.get("dilation", 1) * (k - 1)
    conv = conv_case(rng, name, b, t, c_in, c_out, k, res_t=t_out if res else None, **attrs)
    return Case(name, conv.inputs, {**conv.weights, "spectrum": conv.weights["weight"]},
                {**conv.attrs, "n": n, "k_size": k, "c_out": c_out, "min_rows": min_rows})


def _cases():
    rng = np.random.default_rng(40)
    return [_case(rng, "k7_n16_tiles_tail", 1, 53, 24, 20, 7, 16, padding=3),
            _case(rng, "k11_n32_d3_residual_leaky", 2, 61, 16, 33, 11, 32, res=True, padding=15, dilation=3,
                  act="leaky_relu", slope=0.1),
            _case(rng, "k3_n4_odd", 1, 10, 5, 3, 3, 4),
            _case(rng, "below_min_rows_direct", 1, 30, 8, 16, 7, 16, min_rows=1000, padding=3),
            _case(rng, "resblock_k11_d5_many_blocks", 1, 500, 64, 64, 11, 32, padding=25, dilation=5)]


def reads_spectrum(v) -> bool:
    """dft_conv1d below min_rows input rows runs the direct conv (its spectrum is not read)."""
    b, t, _ = v.ins["x"]
    return b * t >= v.attrs["min_rows"]


def _cost(v) -> int:
    """The cost model's multiply-adds per tile (tile_madds, unweighted) x 2, tiles as the kernel
    cuts them (every residue of the dilation the same count). Below min_rows: the direct conv's."""
    b, t_out, c_out = v.out
    c_in, k, n, d = v.ins["x"][2], v.attrs["k_size"], v.attrs["n"], v.attrs["dilation"]
    if not reads_spectrum(v):
        return 2 * b * t_out * c_out * c_in * k + epilogue(v, v.n_out)
    tiles = b * residue_tiles(t_out, d, n - k + 1)
    return round(2 * tiles * sum(tile_madds(c_in, c_out, k, n))) + epilogue(v, v.n_out)


define_op(OpDef("dft_conv1d", ("x", "res?"), ("weight", "spectrum", "bias"),
                {"n": None, "k_size": None, "c_out": None, "min_rows": 0, "padding": 0, "dilation": 1,
                 "act": "none", "slope": 0.01},
                _conv_infer, _conv_bind,
                pack={"weight": ("conv_pack", gemm_pack("dft_conv1d")), "spectrum": ("dft{n}", spectrum_pack)},
                reference=_reference, cases=_cases, cost=_cost))


# -- the bf16 precision (kcc/compiler/precision.py): both layouts as bf16 pairs ------------------------
register(Kernel(
    name="kcc_dft_conv1d_bf16",
    source="dft_conv1d_bf16.c",
    args=KERNELS["kcc_dft_conv1d_f32"].args,
    contract=Contract(
        accumulation="kcc_dft_conv1d_f32 with the slot GEMMs on kcc_gemm_tile_bf16 (spectrum and tile bins in "
                     "bf16, f32 sums); transforms and epilogue in f32",
        tolerance=2e-2,
        notes="below min_rows it is kcc_conv1d_gemm_bf16 exactly; identical for any thread count"),
    requires=("kcc_dft_conv1d_f32", "kcc_conv1d_gemm_bf16"),
))


def _spectrum_bf16(w, a):
    """The spectrum as bf16 pairs, from the conv weight (either layout) or its f32 spectrum
    [n/2, 3, panels, Cin, 16] (a dft_conv1d lowered before the bf16 pass rewrote it)."""
    return bf16_pairs(w if w.ndim == 5 else spectrum_pack(w, a))


define_op(OpDef("dft_conv1d_bf16", OPS["dft_conv1d"].inputs, OPS["dft_conv1d"].weights, OPS["dft_conv1d"].attrs,
                _conv_infer, bf16_bind(_conv_bind, "kcc_dft_conv1d_bf16"),
                pack={"weight": ("bf16_pack", bf16_gemm_pack("dft_conv1d_bf16")),
                      "spectrum": ("dft{n}_bf16", _spectrum_bf16)},
                reference=_reference, cases=_cases, cost=_cost))
