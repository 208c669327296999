"""Convolutions over time: `conv1d` (nn.Conv1d) and `conv_transpose1d` (nn.ConvTranspose1d).

Activations are time-major: x [B, T, Cin] (a rank-2 [B, T] input is one channel), out
[B, T', Cout]. Weights come in torch's layouts (Conv1d [Cout, Cin/groups, K], ConvTranspose1d
[Cin, Cout/groups, K]; weight-normed layers are declared with "fold": "weight_norm") and are
packed for kcc_conv1d_f32 (see conv1d_f32.c). `bias` is optional (conv1x1 shortcuts have none).

Attrs: stride, padding, dilation, groups (and output_padding for the transposed form);
act "none" | "leaky_relu" with slope, fused after the bias.

    {"op": "conv1d", "in": {"x": "h"}, "w": {"weight": "c1_w", "bias": "c1_b"},
     "attrs": {"padding": 1, "act": "leaky_relu", "slope": 0.2}, "out": "h1"}
"""
from __future__ import annotations

import numpy as np

from kcc.kernels.registry import F32, I64, IN_F32, OUT_F32, WEIGHT, Contract, Kernel, register
from kcc.ops.core import BindContext, OpDef, c_float, define_op, expect
from kcc.ops.elementwise import paren_extent

NR = 8  # KCC_CONV_NR in conv1d_f32.c: dense layouts are column panels of 8, zero-padded
ACTS = ("none", "leaky_relu")

register(Kernel(
    name="kcc_conv1d_f32",
    source="conv1d_f32.c",
    args=(("x", IN_F32), ("n_batch", I64), ("t_in", I64), ("c_in", I64), ("wp", WEIGHT), ("bias", WEIGHT),
          ("has_bias", I64), ("c_out", I64), ("k_size", I64), ("stride", I64), ("pad", I64),
          ("dilation", I64), ("output_padding", I64), ("groups", I64), ("transposed", I64),
          ("neg_slope", F32), ("out", OUT_F32)),
    contract=Contract(
        accumulation="f32 register partial sums over <= 32 input channels of one tap, summed in f64 "
                     "across chunks and taps (padded edges: f64 throughout), rounded once after the "
                     "f64 bias add; the leaky slope is applied in f32 to the rounded value",
        tolerance=2e-5,
        notes="torch accumulates in f32 (oneDNN order); the difference is torch's own rounding, "
              "~sqrt(K*Cin/groups)*2^-24*sum|w*x|. bias is not read when has_bias = 0"),
))


def _is_depthwise(c_in: int, c_out: int, groups: int) -> bool:
    return c_in // groups == 1 and c_out // groups == 1


def _pack(w: np.ndarray, transposed: bool, groups: int) -> np.ndarray:
    """torch layout -> the kernel's: [K, C] (depthwise) or [G, panels, K, cig, 8] (dense, zero-padded)."""
    k = w.shape[2]
    if transposed:
        c_in, cog = w.shape[0], w.shape[1]
        c_out, cig = cog * groups, c_in // groups
        gk = w.reshape(groups, cig, cog, k).transpose(0, 3, 1, 2)          # [G, K, cig, cog]
    else:
        c_out, cig = w.shape[0], w.shape[1]
        cog, c_in = c_out // groups, cig * groups
        gk = w.reshape(groups, cog, cig, k).transpose(0, 3, 2, 1)          # [G, K, cig, cog]
    if _is_depthwise(c_in, c_out, groups):
        return np.ascontiguousarray(gk[:, :, 0, 0].T)                       # [K, C]
    panels = -(-cog // NR)
    out = np.zeros((groups, k, cig, panels * NR), dtype=np.float32)
    out[..., :cog] = gk
    return np.ascontiguousarray(out.reshape(groups, k, cig, panels, NR).transpose(0, 3, 1, 2, 4))


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
        return (x[0], t_out, c_out), "f32"

    def bind(ctx: BindContext):
        a = ctx.attrs
        has_bias = "bias" in ctx.w_ptr
        x = ctx.in_shape["x"]
        expect(len(ctx.out_shape) == 3, ctx.op_name, "bind needs the inferred output extent")
        return "kcc_conv1d_f32", {
            "x": ctx.in_ptr["x"], "n_batch": ctx.dim("x", 0), "t_in": ctx.dim("x", 1),
            "c_in": ctx.dim("x", 2) if len(x) == 3 else "1",
            "wp": ctx.w_ptr["weight"], "bias": ctx.w_ptr["bias" if has_bias else "weight"],
            "has_bias": "1" if has_bias else "0", "c_out": str(ctx.out_shape[2]),
            "k_size": str(_k(ctx)), "stride": str(a["stride"]), "pad": str(a["padding"]),
            "dilation": str(a["dilation"]), "output_padding": str(a.get("output_padding", 0)),
            "groups": str(a["groups"]), "transposed": "1" if transposed else "0",
            "neg_slope": c_float(a["slope"] if a["act"] == "leaky_relu" else 1.0), "out": ctx.out_ptr,
        }

    def pack(w, a):
        return _pack(w, transposed, a["groups"])

    define_op(OpDef(op, ("x",), ("weight", "bias?"), attrs, infer, bind, pack={"weight": ("conv_pack", pack)}))


def _k(ctx: BindContext) -> int:
    wp = ctx.w_shape["weight"]          # packed: [K, C] depthwise, [G, panels, K, cig, 8] dense
    return wp[0] if len(wp) == 2 else wp[2]


_make("conv1d", transposed=False)
_make("conv_transpose1d", transposed=True)
