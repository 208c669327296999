"""The int8 precision's ops (kcc/compiler/precision.py, `--precision int8`): int8 twins of the GEMM-path
convs, integer dot products on AVX512-VNNI (kcc/kernels/c/gemm_tile_s8.c).

- `conv1d_int8`: conv1d (groups 1, not transposed: the GEMM variant) on an int8 weight pack.
- `adain_conv1d_int8`: the fused AdaIN (+ snake / leaky) -> conv of kcc.ops.fused on that pack.
- `conv_transpose1d_int8`: conv_transpose1d's polyphase variant (groups 1, dilation 1) on that pack.

Weights: quantised at lowering from the f32 effective weight (any checkpoint; weight norm folded
first), symmetric, one f32 scale per output channel (max |W[o]| / 127 over Cin and K), rounded
to nearest even: `s8_conv_pack`. Activations: u8 with the +128 shift, one scale per input row
(time step), quantised inside the kernel; the shift is undone by a per-tap weight-sum column
stored with the weights (onnxruntime MLAS / oneDNN's compensation). Products are summed exactly
in s32 per tap, dequantised (x row scale) and summed over taps in f32, times the channel scale,
then the f32 conv epilogue. Judged by the listening gate, not the X-Ray gate.
"""
from __future__ import annotations

import numpy as np

from kcc.kernels.registry import Contract, I64, IN_I32, KERNELS, Kernel, OUT_I32, WEIGHT, c_constant, register
from kcc.ops import fused
from kcc.ops.conv import _pack, bf16_bind, conv_case, gemm_pack, polyphase_cases, variant
from kcc.ops.core import OPS, BindContext, OpDef, define_op, expect

QUAD = 4                                                       # K rows one vpdpbusd word holds
ROWS_BYTES = c_constant("conv1d_s8.c", "KCC_S8_ROWS")          # a block's quantised input rows
MAX_ROWS = c_constant("conv1d_s8.c", "KCC_S8_MAX_ROWS")
TOLERANCE = 6e-2   # max-abs at unit-scale inputs: ~2^-8 relative quanta on both operands, summed

register(Kernel(
    name="kcc_gemm_u8s8_s32", source="gemm_tile_s8.c",
    args=(("a", IN_I32), ("rows", I64), ("kq", I64), ("b", WEIGHT), ("n", I64), ("c", OUT_I32)),
    contract=Contract(accumulation="s32, exact: sum over K of u8 * s8 (vpdpbusd with AVX512_VNNI / AVX-VNNI, AVX2 vpmaddwd, else ISO C)",
                      tolerance=0.0,
                      notes="the micro-kernel kcc_gemm_tile_s8 as a whole GEMM, for tests and benches; "
                            "no op lowers to it"),
    requires=("kcc_gemm_tile_f32",),
))

register(Kernel(
    name="kcc_conv1d_gemm_s8", source="conv1d_s8.c", args=KERNELS["kcc_conv1d_gemm_f32"].args,
    contract=Contract(accumulation="per tap exact s32 sums of u8 (row-quantised x) * s8 (channel-quantised W), "
                                   "dequantised and summed over taps in f32, x channel scale; f32 epilogue",
                      tolerance=TOLERANCE, notes="identical for any thread count and dispatch path"),
    requires=("kcc_conv1d_gemm_f32", "kcc_gemm_u8s8_s32"),
))

register(Kernel(
    name="kcc_conv1d_polyphase_s8", source="conv1d_polyphase_s8.c", args=KERNELS["kcc_conv1d_polyphase_f32"].args,
    contract=Contract(accumulation="kcc_conv1d_gemm_s8's, per stride phase", tolerance=TOLERANCE,
                      notes="identical for any thread count and dispatch path"),
    requires=("kcc_conv1d_polyphase_f32", "kcc_conv1d_gemm_s8"),
))

register(Kernel(
    name="kcc_norm_conv1d_s8", source="norm_conv1d_s8.c", args=KERNELS["kcc_norm_conv1d_f32"].args,
    contract=Contract(accumulation="kcc_norm_conv1d_f32 with the conv rows of kcc_conv1d_gemm_s8",
                      tolerance=TOLERANCE,
                      notes="equal to adain -> conv1d_int8 bit for bit; identical for any thread count"),
    requires=("kcc_norm_conv1d_f32", "kcc_conv1d_gemm_s8"),
))


def fits_int8(c_in: int, span: int, stride: int = 1) -> bool:
    """The int8 conv rows' size condition (kcc_s8_rows_per_block >= 1 in conv1d_s8.c): the input
    rows one output row reads, quantised, fit the kernel's stack block."""
    held = min(ROWS_BYTES // (-(-c_in // QUAD) * QUAD), MAX_ROWS)
    return held >= span + 1


def quantise_channels(w: np.ndarray, axis: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per channel: (q int8, scale f32) with w ~ q * scale, the scale max |w| / 127
    over `axis` (reduced, kept as 1), q = round(w / scale) (nearest even), |q| <= 127; an
    all-zero channel gets scale 0 and q 0."""
    scale = (np.abs(w.astype(np.float64)).max(axis=axis, keepdims=True) / 127.0).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1)).astype(np.float64)
    q = np.clip(np.rint(w.astype(np.float64) / safe), -127, 127).astype(np.int8)
    return q, scale


def s8_panels(q: np.ndarray) -> np.ndarray:
    """[..., R, 16] int8 (R K-rows of a 16-column panel) -> [..., ceil(R/4), 16, 4]: quad r holds
    column j's rows 4r .. 4r+3 at bytes 4j .. 4j+3 (gemm_tile_s8.c's layout), zero rows past R."""
    r = q.shape[-2]
    pad = -r % QUAD
    if pad:
        q = np.concatenate([q, np.zeros((*q.shape[:-2], pad, q.shape[-1]), np.int8)], axis=-2)
    quads = q.reshape(*q.shape[:-2], -1, QUAD, q.shape[-1])
    return np.ascontiguousarray(np.swapaxes(quads, -1, -2))


def s8_conv_pack(w: np.ndarray, a: dict) -> np.ndarray:
    """A GEMM-variant conv weight (torch layout [Cout, Cin, K] or the f32 GEMM pack [K, panels,
    Cin, 16]) -> the int8 pack of conv1d_s8.c, 32-bit words [K, panels, kq + 2, 16] (stored as
    float32): per (tap, panel) the channel scales, the tap's shift correction 128 * sum_ci q,
    then the s8 panel quads."""
    w4 = w if w.ndim == 4 else gemm_pack("conv1d_int8")(w, a)
    k, panels, _, nr = w4.shape
    q, scale = quantise_channels(w4, axis=(0, 2))                # per output column (panel, lane)
    comp = (128 * q.astype(np.int32).sum(axis=2, keepdims=True)).astype(np.int32)   # [K, P, 1, 16]
    body = s8_panels(q).reshape(k, panels, -1, nr * QUAD).view(np.float32)          # [K, P, kq, 16] words
    head = np.concatenate([np.broadcast_to(scale, (k, panels, 1, nr)).astype(np.float32), comp.view(np.float32)],
                          axis=2)
    return np.ascontiguousarray(np.concatenate([head, body], axis=2))


# The int8 twins of the conv variants that have one; same argument lists, so one bind serves both.
INT8_VARIANTS = {"kcc_conv1d_gemm_f32": "kcc_conv1d_gemm_s8", "kcc_conv1d_polyphase_f32": "kcc_conv1d_polyphase_s8"}


def _int8_bind(bind):
    """A conv op's bind with its variant's kernel swapped for the int8 twin."""
    def wrapped(ctx: BindContext):
        kernel, args = bind(ctx)
        expect(kernel in INT8_VARIANTS, ctx.op_name, f"{kernel} has no int8 twin (only the GEMM and polyphase "
                                                     "variants do)")
        return INT8_VARIANTS[kernel], args
    return wrapped


def _conv_infer(name, ins, ws, a):
    shape, dtype = OPS["conv1d"].infer(name, ins, ws, a)
    w = ws["weight"]
    c_in = ins["x"][2] if len(ins["x"]) == 3 else 1
    if len(w) == 3:
        expect(variant(c_in, w[0], a["groups"], a["dilation"], False) == "gemm", name,
               f"weight {list(w)} with groups={a['groups']} is not a GEMM-variant conv (no int8 twin)")
        expect(fits_int8(c_in, a["dilation"] * (w[2] - 1), a["stride"]), name,
               f"Cin {c_in} with tap span {a['dilation'] * (w[2] - 1)} does not fit the int8 rows' block")
    return shape, dtype


def _conv_cases():
    """GEMM-variant shapes only: partial row tiles and panels, Cin not a multiple of 4, stride,
    dilation, the residual and leaky epilogue."""
    rng = np.random.default_rng(26)
    return [conv_case(rng, "same_pad", 2, 23, 8, 24, 3, padding=1),
            conv_case(rng, "stride2_cin33_residual", 1, 30, 33, 17, 5, res_t=14, stride=2, padding=1,
                      act="leaky_relu", slope=0.2),
            conv_case(rng, "k11_d5_three_panels", 1, 70, 64, 40, 11, padding=25, dilation=5)]


define_op(OpDef("conv1d_int8", OPS["conv1d"].inputs, OPS["conv1d"].weights, OPS["conv1d"].attrs, _conv_infer,
                _int8_bind(OPS["conv1d"].bind), pack={"weight": ("s8_pack", s8_conv_pack)},
                reference=OPS["conv1d"].reference, cases=_conv_cases, cost=OPS["conv1d"].cost))


def _polyphase_pack(w, a):
    """conv_transpose1d_int8's weight: torch layout [Cin, Cout, K] or the f32 polyphase pack -> the int8 pack."""
    if w.ndim == 3:
        expect(variant(w.shape[0], w.shape[1] * a["groups"], a["groups"], a["dilation"], True) == "polyphase",
               "conv_transpose1d_int8", f"weight {list(w.shape)} is not a polyphase-variant transposed conv")
        w = _pack(w, True, a["groups"], a["stride"], a["dilation"])
    return s8_conv_pack(w, a)


def _transposed_infer(name, ins, ws, a):
    shape, dtype = OPS["conv_transpose1d"].infer(name, ins, ws, a)
    w = ws["weight"]
    c_in = ins["x"][2] if len(ins["x"]) == 3 else 1
    if len(w) == 3:
        expect(variant(c_in, w[1] * a["groups"], a["groups"], a["dilation"], True) == "polyphase", name,
               f"weight {list(w)} with groups={a['groups']}, dilation={a['dilation']} is not a polyphase-variant "
               "transposed conv (no int8 twin)")
        expect(fits_int8(c_in, (w[2] - 1) // a["stride"]), name, f"Cin {c_in} does not fit the int8 rows' block")
    return shape, dtype


define_op(OpDef("conv_transpose1d_int8", OPS["conv_transpose1d"].inputs, OPS["conv_transpose1d"].weights,
                OPS["conv_transpose1d"].attrs, _transposed_infer, _int8_bind(OPS["conv_transpose1d"].bind),
                pack={"weight": ("s8_pack", _polyphase_pack)}, reference=OPS["conv_transpose1d"].reference,
                cases=lambda: polyphase_cases(27), cost=OPS["conv_transpose1d"].cost))


def _fused_infer(name, ins, ws, a):
    shape, dtype = OPS["adain_conv1d"].infer(name, ins, ws, a)
    c_out, c_in, k = fused._geometry(ws["weight"])
    if len(ws["weight"]) == 3:
        expect(fits_int8(c_in, a["dilation"] * (k - 1)), name,
               f"Cin {c_in} with tap span {a['dilation'] * (k - 1)} does not fit the int8 rows' block")
    return shape, dtype


define_op(OpDef("adain_conv1d_int8", OPS["adain_conv1d"].inputs, OPS["adain_conv1d"].weights, fused.ATTRS,
                _fused_infer, bf16_bind(OPS["adain_conv1d"].bind, "kcc_norm_conv1d_s8"),
                pack={"weight": ("s8_pack", s8_conv_pack)}, reference=OPS["adain_conv1d"].reference,
                cases=OPS["adain_conv1d"].cases, cost=OPS["adain_conv1d"].cost))
