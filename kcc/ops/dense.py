"""Dense ops: `linear` (nn.Linear over the last axis) with a fused activation epilogue.

Weights come in torch's nn.Linear layout (`weight` [N, K], `bias` [N]); lowering packs
`weight` into 16-column panels [ceil(N/16), K, 16] (zero-padded) for the blocked GEMM in
gemm_f32.c (on the micro-kernel of gemm_tile_f32.c). `bias` is required (every Linear kcc lowers has one).
`linear_q8` is its int8-storage twin (kcc.weights.quantised): lowering picks it for a weight
that is int8 * per-row scale in the checkpoint, packs the int8 panels + scales (a quarter of
the bytes) and gemm_q8.c expands them in registers: the same bits as `linear`.
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


register(Kernel(
    name="kcc_linear_q8",
    source="gemm_q8.c",
    args=(("x", IN_F32), ("rows", I64), ("k", I64), ("wq", WEIGHT), ("bias", WEIGHT), ("n", I64),
          ("act", I64), ("slope", F32), ("out", OUT_F32)),
    contract=Contract(
        accumulation="kcc_linear_f32's, on the weight (float)q * scale (an exact product rounded once, "
                     "the FP32 path's weight): the same bits as kcc_linear_f32 on the dequantised weight",
        tolerance=2e-5,
        notes="wq: pack_q8_panels words (scales [panels*16] f32, then int8 [panels][K][16]); "
              "x and out must not alias"),
    requires=("kcc_linear_f32",),
))


def q8_words(scales: np.ndarray, q: np.ndarray) -> np.ndarray:
    """One packed int8 weight as 32-bit words (the blob's unit): f32 scales, then the int8
    values, zero-padded to a whole word. The kernel reads the bytes after the scales as int8."""
    raw = np.ascontiguousarray(scales, dtype=np.float32).tobytes() + np.ascontiguousarray(q, dtype=np.int8).tobytes()
    raw += bytes(-len(raw) % 4)
    return np.frombuffer(raw, dtype=np.float32).copy()


def pack_q8_panels(quant, attrs=None) -> np.ndarray:
    """Quantised [N, K] -> pack_panels' layout in int8 (zero past N) after one scale per column
    (zero past N): the gemm_q8.c words."""
    n, k = quant.q.shape
    panels = -(-n // PANEL)
    q = np.zeros((panels * PANEL, k), dtype=np.int8)
    q[:n] = quant.q
    s = np.zeros(panels * PANEL, dtype=np.float32)
    s[:n] = quant.scale
    return q8_words(s, q.reshape(panels, PANEL, k).transpose(0, 2, 1))


def int8_exact(rng, n: int, k: int) -> np.ndarray:
    """A random [n, k] f32 weight that is exactly int8 * a power-of-two scale per row, each row
    reaching +-127 (its max/127 is its scale): test cases for the int8-storage twins."""
    q = rng.integers(-127, 128, (n, k))
    q[:, 0] = rng.choice([-127, 127], n)
    return (q * np.exp2(-rng.integers(4, 9, n))[:, None]).astype(np.float32)


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


def _bind_q8(ctx: BindContext):
    _, args = _bind(ctx)
    args["wq"] = args.pop("wp")
    return "kcc_linear_q8", args


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


def _reference(i, w, a):
    return linear_reference(i["x"], w["weight"], w["bias"], a["act"], a["slope"])


def _q8_cases():
    rng = np.random.default_rng(51)

    def case(name, lead, k, n, act):
        return Case(name, {"x": rng.standard_normal((*lead, k)).astype(np.float32)},
                    {"weight": int8_exact(rng, n, k), "bias": rng.standard_normal(n).astype(np.float32)},
                    {"act": act, "slope": 0.2})
    return [case("odd_panel_tail", (2, 7), 13, 37, "none"), case("k_over_chunk_gelu", (1, 70), 300, 16, "gelu_new"),
            case("one_panel_pair_tail", (3,), 129, 5, "leaky_relu")]


define_op(OpDef("linear", ("x",), ("weight", "bias"), {"act": "none", "slope": 0.01}, _infer, _bind,
                pack={"weight": ("panel16", pack_panels)}, reference=_reference, cases=_cases, cost=_cost,
                int8_twin="linear_q8"))
define_op(OpDef("linear_q8", ("x",), ("weight", "bias"), {"act": "none", "slope": 0.01}, _infer, _bind_q8,
                pack={"weight": ("q8panel16", pack_q8_panels)}, reference=_reference, cases=_q8_cases, cost=_cost,
                int8_roles=("weight",)))
