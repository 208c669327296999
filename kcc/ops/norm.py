"""Normalisation ops: `layer_norm` over the last axis, with an optional fused residual add."""
from __future__ import annotations

import numpy as np

from kcc.kernels.registry import F32, I64, IN_F32, OUT_F32, WEIGHT, Contract, Kernel, register
from kcc.ops.core import BindContext, Case, OpDef, c_float, define_op, expect

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


def layer_norm_reference(x, gamma, beta, eps) -> np.ndarray:
    """LayerNorm over the last axis in f64 (biased variance), then the affine."""
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=-1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=-1, keepdims=True)
    y = (x64 - mean) / np.sqrt(var + float(eps))
    return y * gamma.astype(np.float64) + beta.astype(np.float64) if gamma is not None else y


def _reference(ins, ws, a):
    x = ins["x"] + ins["res"] if "res" in ins else ins["x"]       # the kernel rounds x + res to f32 first
    return layer_norm_reference(x, ws["gamma"], ws["beta"], a["eps"])


def _cases():
    rng = np.random.default_rng(51)

    def case(name, shape, res=False, eps=1e-5):
        c = shape[-1]
        ins = {"x": (rng.standard_normal(shape) * 3 + 1).astype(np.float32)}
        if res:
            ins["res"] = rng.standard_normal(shape).astype(np.float32)
        return Case(name, ins, {"gamma": (1 + 0.1 * rng.standard_normal(c)).astype(np.float32),
                                "beta": (0.1 * rng.standard_normal(c)).astype(np.float32)}, {"eps": eps})
    return [case("rank3_odd", (2, 7, 5)), case("residual_768", (1, 3, 768), res=True),
            case("rank2_eps_1e-12", (4, 33), eps=1e-12), case("one_channel", (1, 2, 1))]


def _cost(v) -> int:
    n = v.n_out                                # mean 1, variance 3, normalise 2, affine 2
    return 8 * n + (n if "res" in v.ins else 0)


define_op(OpDef("layer_norm", ("x", "res?"), ("gamma", "beta"), {"eps": 1e-5}, _infer, _bind,
                reference=_reference, cases=_cases, cost=_cost))
