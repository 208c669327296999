"""Normalisation ops: `layer_norm` over the last axis, with an optional fused residual add."""
from __future__ import annotations

from kcc.kernels.registry import F32, I64, IN_F32, OUT_F32, WEIGHT, Contract, Kernel, register
from kcc.ops.core import BindContext, OpDef, c_float, define_op, expect

register(Kernel(
    name="kcc_layer_norm_f32",
    source="layer_norm_f32.c",
    args=(("x", IN_F32), ("res", IN_F32), ("has_res", I64), ("rows", I64), ("n_chan", I64),
          ("gamma", WEIGHT), ("beta", WEIGHT), ("eps", F32), ("out", OUT_F32)),
    contract=Contract(accumulation="x + res rounded to f32; mean/variance two-pass in f64; "
                                   "normalised value rounded to f32, affine in f32",
                      tolerance=2e-5, notes="res is not read when has_res = 0"),
))


def _infer(name, ins, ws, attrs):
    x = ins["x"]
    c = x[-1]
    if "res" in ins:
        expect(tuple(ins["res"]) == tuple(x), name, f"res extent {list(ins['res'])} differs from x {list(x)}")
    for role in ("gamma", "beta"):
        expect(tuple(ws[role]) == (c,), name, f"weight '{role}' has shape {list(ws[role])}, expected [{c}]")
    return tuple(x), "f32"


def _bind(ctx: BindContext):
    has_res = "res" in ctx.in_ptr
    return "kcc_layer_norm_f32", {
        "x": ctx.in_ptr["x"], "res": ctx.in_ptr["res" if has_res else "x"], "has_res": "1" if has_res else "0",
        "rows": ctx.rows("x"), "n_chan": ctx.dim("x", -1),
        "gamma": ctx.w_ptr["gamma"], "beta": ctx.w_ptr["beta"], "eps": c_float(ctx.attrs["eps"]),
        "out": ctx.out_ptr,
    }


define_op(OpDef("layer_norm", ("x", "res?"), ("gamma", "beta"), {"eps": 1e-5}, _infer, _bind))
