"""Dense ops: `linear` (nn.Linear over the last axis) with a fused activation epilogue.

Weights come in torch's nn.Linear layout (`weight` [N, K], `bias` [N]); lowering packs
`weight` into 16-column panels [ceil(N/16), K, 16] (zero-padded) for the blocked GEMM in
gemm_f32.c (on the micro-kernel of gemm_tile_f32.c). `bias` is required (every Linear kcc lowers has one).
"""
from __future__ import annotations

import numpy as np

from kcc.kernels.registry import Contract, F32, I64, IN_F32, Kernel, OUT_F32, WEIGHT, c_constant, register
from kcc.ops.core import BindContext, Case, OpDef, c_float, define_op, expect
from kcc.ops.cost_terms import epilogue

PANEL = c_constant("gemm_tile_f32.c", "KCC_GEMM_NR")   # panel width of the packed weight
ACTIVATIONS = {"none": 0, "gelu_new": 1, "leaky_relu": 2, "tanh": 3, "sigmoid": 4, "relu": 5}

register(Kernel(
    name="kcc_gemm_tile_f32",
    source="gemm_tile_f32.c",
    args=(("a", IN_F32), ("lda", I64), ("mr", I64), ("b", IN_F32), ("b_step", I64), ("kc", I64), ("c", OUT_F32),
          ("ldc", I64), ("nr", I64), ("first", I64)),
    contract=Contract(
        accumulation="f32: each output one chain of multiply-adds in k order from zero (FMA where the "
                     "target has it), the same in every tile, so blockings and thread splits agree bit "
                     "for bit; callers add KC-term chunk sums in order",
        tolerance=2e-5,
        notes="a micro-kernel other kernels call (no op lowers to it); mr <= 8, nr <= 32, kc <= 128"),
))

register(Kernel(
    name="kcc_linear_f32",
    source="gemm_f32.c",
    args=(("x", IN_F32), ("rows", I64), ("k", I64), ("wp", WEIGHT), ("bias", WEIGHT), ("n", I64),
          ("act", I64), ("slope", F32), ("out", OUT_F32)),
    contract=Contract(
        accumulation="f32: each 128-term K chunk summed in k order from zero (FMA where the target has "
                     "it), chunk sums added in order; then + bias, activation evaluated in f64 (gelu_new, "
                     "tanh, sigmoid on kcc_exp_f64: correctly rounded in tests), rounded once",
        tolerance=2e-5,
        notes="vs torch (MKL/oneDNN, FMA, blocked order) expect ~sqrt(K)*2^-24*sum|x*w| per element; "
              "x and out must not alias"),
    requires=("kcc_gemm_tile_f32",),
))


def pack_panels(w: np.ndarray, attrs=None) -> np.ndarray:
    """[N, K] -> [ceil(N/16), K, 16] with zeros past N: panel p holds columns p*16..p*16+15."""
    n, k = w.shape
    panels = -(-n // PANEL)
    padded = np.zeros((panels * PANEL, k), dtype=np.float32)
    padded[:n] = w
    return np.ascontiguousarray(padded.reshape(panels, PANEL, k).transpose(0, 2, 1))


def _infer(name, ins, ws, attrs):
    x = ins["x"]
    expect(len(ws["weight"]) == 2, name, f"weight must be [N, K], got {list(ws['weight'])}")
    n, k = ws["weight"]
    expect(x[-1] == k, name, f"input last extent {x[-1]} differs from weight K = {k} (weight {list(ws['weight'])})")
    expect(tuple(ws["bias"]) == (n,), name, f"bias has shape {list(ws['bias'])}, expected [{n}]")
    expect(attrs["act"] in ACTIVATIONS, name, f"act {attrs['act']!r} is not one of {sorted(ACTIVATIONS)}")
    return (*x[:-1], n), "f32"


def _bind(ctx: BindContext):
    return "kcc_linear_f32", {
        "x": ctx.in_ptr["x"], "rows": ctx.rows("x"), "k": ctx.dim("x", -1),
        "wp": ctx.w_ptr["weight"], "bias": ctx.w_ptr["bias"], "n": str(ctx.w_shape["bias"][0]),
        "act": str(ACTIVATIONS[ctx.attrs["act"]]), "slope": c_float(ctx.attrs["slope"]), "out": ctx.out_ptr,
    }


def activation(y: np.ndarray, act: str, slope=0.01) -> np.ndarray:
    """The GEMM epilogue's activations, in f64."""
    if act == "gelu_new":
        return 0.5 * y * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (y + 0.044715 * y ** 3)))
    if act == "leaky_relu":
        return np.where(y < 0, y * float(slope), y)
    if act == "relu":
        return np.maximum(y, 0.0)
    if act == "tanh":
        return np.tanh(y)
    if act == "sigmoid":
        return 1.0 / (1.0 + np.exp(-y))
    return y


def linear_reference(x, w, b, act="none", slope=0.01) -> np.ndarray:
    y = x.astype(np.float64) @ w.astype(np.float64).T + b.astype(np.float64)
    return activation(y, act, slope)


def _cases():
    rng = np.random.default_rng(50)

    def case(name, lead, k, n, act):
        w = (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)
        return Case(name, {"x": rng.standard_normal((*lead, k)).astype(np.float32)},
                    {"weight": w, "bias": rng.standard_normal(n).astype(np.float32)}, {"act": act, "slope": 0.2})
    return [case("rank3_panel_tail", (2, 7), 13, 37, "none"), case("k_over_chunk_gelu", (1, 19), 300, 16, "gelu_new"),
            case("rank2_leaky", (9,), 64, 5, "leaky_relu"), case("tanh", (1, 3), 8, 33, "tanh"),
            case("sigmoid", (2, 1), 5, 17, "sigmoid"), case("relu_one_row", (1, 1), 129, 48, "relu")]


def _cost(v) -> int:
    k, n = v.ins["x"][-1], v.out[-1]
    m = v.n(v.ins["x"]) // k
    return 2 * m * k * n + epilogue(v, m * n)


define_op(OpDef("linear", ("x",), ("weight", "bias"), {"act": "none", "slope": 0.01}, _infer, _bind,
                pack={"weight": ("panel16", pack_panels)},
                reference=lambda i, w, a: linear_reference(i["x"], w["weight"], w["bias"], a["act"], a["slope"]),
                cases=_cases, cost=_cost))
