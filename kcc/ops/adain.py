"""`adain`: upstream AdaIN1d (istftnet.py) with an optional fused activation.

    y = (1 + gamma) * InstanceNorm1d(x; norm_w, norm_b, eps) + beta,  [gamma, beta] = chunk(fc(style), 2)

x [B, T, C] time-major (statistics over T per batch and channel, biased variance), style
[B, S]. Weights: norm_w/norm_b (`*.norm.weight/bias`, [C]), fc_w/fc_b (`*.fc.weight/bias`,
[2C, S], [2C]) and, for act "snake", alpha (`alpha1.{j}` / `alpha2.{j}`, [1, C, 1]).
Attrs: eps (1e-5), act "none" | "leaky_relu" (slope) | "snake" (Snake1D: y + sin(alpha*y)^2 / alpha).

One AdaINResBlock1 pass j (generator resblock r, dilation d_j, kernel size K) in circuit JSON,
x carried in; repeat for j = 0, 1, 2 with dilations 1, 3, 5 (weights declared per j, e.g.
"r0_c1_0": {"ref": "decoder.generator.resblocks.0.convs1.0", "fold": "weight_norm"}):

    {"op": "adain", "in": {"x": "x", "style": "style"},
     "w": {"norm_w": "r0_n1_0_nw", "norm_b": "r0_n1_0_nb", "fc_w": "r0_n1_0_fw", "fc_b": "r0_n1_0_fb",
           "alpha": "r0_a1_0"}, "attrs": {"act": "snake"}, "out": "r0_h0"},
    {"op": "conv1d", "in": {"x": "r0_h0"}, "w": {"weight": "r0_c1_0", "bias": "r0_c1_0_b"},
     "attrs": {"padding": "<d_j*(K-1)/2>", "dilation": "<d_j>"}, "out": "r0_h1"},
    {"op": "adain", "in": {"x": "r0_h1", "style": "style"},
     "w": {..."adain2.{j}" weights..., "alpha": "r0_a2_0"}, "attrs": {"act": "snake"}, "out": "r0_h2"},
    {"op": "conv1d", "in": {"x": "r0_h2"}, "w": {"weight": "r0_c2_0", "bias": "r0_c2_0_b"},
     "attrs": {"padding": "<(K-1)/2>"}, "out": "r0_h3"},
    {"op": "add", "in": {"a": "r0_h3", "b": "x"}, "out": "r0_x1"}

(padding/dilation are integers in real JSON). The generator's (xs1 + xs2 + xs3) / 3 is
{"op": "add", "in": {"a": ..., "b": ..., "c": ...}, "attrs": {"divisor": 3}}.
"""
from __future__ import annotations

import numpy as np

from kcc.kernels.registry import Contract, F32, I64, IN_F32, Kernel, OUT_F32, WEIGHT, c_constant, register
from kcc.ops.core import BindContext, Case, OpDef, c_float, define_op, expect
from kcc.ops.cost_terms import ACT_FLOPS

MAX_CHANNELS = c_constant("instance_norm_style_f32.c", "KCC_IN_MAX_C")   # statistics in stack arrays

ACTS = {"none": 0, "leaky_relu": 1, "snake": 2}

register(Kernel(
    name="kcc_instance_norm_style_f32",
    source="instance_norm_style_f32.c",
    args=(("x", IN_F32), ("style", IN_F32), ("n_batch", I64), ("n_time", I64), ("n_chan", I64),
          ("n_style", I64), ("norm_w", WEIGHT), ("norm_b", WEIGHT), ("fc_w", WEIGHT), ("fc_b", WEIGHT),
          ("alpha", WEIGHT), ("act", I64), ("slope", F32), ("eps", F32), ("out", OUT_F32)),
    contract=Contract(
        accumulation="one-pass shifted f64 sums over 8 fixed parts of time, added in order (the same "
                     "bits for any thread count); mean and invstd rounded to f32; xn = x * scale + offset "
                     "in f32 with scale = invstd * norm_w, offset = norm_b - mean * scale (torch's CPU "
                     "batch-norm form; one multiply-add where the target has FMA); fc(style) dot products "
                     "in f64, rounded once; (1+gamma)*xn+beta in f32; snake y + (1/alpha)*sin(alpha*y)^2 "
                     "in f32 (branch-free f32 sin^2 polynomial, ~2 ulp; libm in f64 past |alpha*y| > 8192)",
        tolerance=2e-5,
        notes="against torch's InstanceNorm1d: bit-equal on ~80% of elements with FMA, max-abs 4.8e-7 "
              "(C=64, T=60); at most 2048 channels; alpha is not read unless act = snake"),
))


def _numel(shape) -> int:
    n = 1
    for e in shape:
        n *= e
    return n


def _infer(name, ins, ws, attrs):
    x, s = ins["x"], ins["style"]
    expect(len(x) == 3, name, f"x must be [B, T, C], got {list(x)}")
    expect(len(s) == 2 and s[0] == x[0], name, f"style must be [B, S] with x's batch {x[0]!r}, got {list(s)}")
    c, n_style = x[2], s[1]
    expect(isinstance(c, int) and isinstance(n_style, int), name, f"channel extents {c!r}, {n_style!r} must be fixed")
    expect(c <= MAX_CHANNELS, name, f"{c} channels exceed the kernel's {MAX_CHANNELS} (KCC_IN_MAX_C)")
    for role in ("norm_w", "norm_b"):
        expect(tuple(ws[role]) == (c,), name, f"weight '{role}' has shape {list(ws[role])}, expected [{c}]")
    expect(tuple(ws["fc_w"]) == (2 * c, n_style), name, f"fc_w has shape {list(ws['fc_w'])}, expected [{2 * c}, {n_style}]")
    expect(tuple(ws["fc_b"]) == (2 * c,), name, f"fc_b has shape {list(ws['fc_b'])}, expected [{2 * c}]")
    expect(attrs["act"] in ACTS, name, f"act {attrs['act']!r} is not one of {sorted(ACTS)}")
    expect((attrs["act"] == "snake") == ("alpha" in ws), name, "act 'snake' needs weight 'alpha' and only it does")
    if "alpha" in ws:
        expect(_numel(ws["alpha"]) == c, name, f"alpha has shape {list(ws['alpha'])}, expected {c} values ([1, {c}, 1])")
    expect(float(attrs["eps"]) > 0, name, f"eps must be > 0, got {attrs['eps']!r}")
    return tuple(x), "f32"


def _bind(ctx: BindContext):
    a = ctx.attrs
    return "kcc_instance_norm_style_f32", {
        "x": ctx.in_ptr["x"], "style": ctx.in_ptr["style"], "n_batch": ctx.dim("x", 0),
        "n_time": ctx.dim("x", 1), "n_chan": ctx.dim("x", 2), "n_style": ctx.dim("style", 1),
        "norm_w": ctx.w_ptr["norm_w"], "norm_b": ctx.w_ptr["norm_b"], "fc_w": ctx.w_ptr["fc_w"],
        "fc_b": ctx.w_ptr["fc_b"], "alpha": ctx.w_ptr["alpha" if "alpha" in ctx.w_ptr else "norm_w"],
        "act": str(ACTS[a["act"]]), "slope": c_float(a["slope"]), "eps": c_float(a["eps"]), "out": ctx.out_ptr,
    }


def adain_reference(x, style, ws: dict, eps, act: str, slope) -> np.ndarray:
    """AdaIN1d in f64: instance norm over time (biased variance), (1 + gamma) * xn + beta with
    [gamma | beta] = fc(style), then the activation; f64 throughout (not rounded)."""
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=1, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=1, keepdims=True)
    xn = (x64 - mean) / np.sqrt(var + float(eps)) * ws["norm_w"].astype(np.float64) + ws["norm_b"].astype(np.float64)
    h = style.astype(np.float64) @ ws["fc_w"].astype(np.float64).T + ws["fc_b"].astype(np.float64)
    c = x.shape[2]
    y = (1.0 + h[:, None, :c]) * xn + h[:, None, c:]
    if act == "leaky_relu":
        y = np.where(y < 0, y * float(slope), y)
    elif act == "snake":
        alpha = ws["alpha"].astype(np.float64).reshape(1, 1, c)
        y = y + np.sin(alpha * y) ** 2 / alpha
    return y


def adain_weights(rng, c: int, n_style: int, snake: bool) -> dict:
    """Seeded AdaIN weights at unit scale (fc kept small, as trained ones are)."""
    ws = {"norm_w": (1 + 0.1 * rng.standard_normal(c)).astype(np.float32),
          "norm_b": (0.1 * rng.standard_normal(c)).astype(np.float32),
          "fc_w": (rng.standard_normal((2 * c, n_style)) / np.sqrt(4 * n_style)).astype(np.float32),
          "fc_b": (0.1 * rng.standard_normal(2 * c)).astype(np.float32)}
    if snake:
        ws["alpha"] = (0.5 + rng.random((1, c, 1))).astype(np.float32)
    return ws


def _cases():
    rng = np.random.default_rng(30)
    out = []
    for name, (b, t, c, s, act) in {"plain": (2, 23, 5, 7, "none"), "leaky_tail": (1, 67, 33, 16, "leaky_relu"),
                                    "snake": (2, 9, 64, 16, "snake"), "two_rows": (1, 2, 3, 4, "none")}.items():
        x = (rng.standard_normal((b, t, c)) * 2 + 0.5).astype(np.float32)
        style = rng.standard_normal((b, s)).astype(np.float32)
        out.append(Case(name, {"x": x, "style": style}, adain_weights(rng, c, s, act == "snake"),
                        {"act": act, "slope": 0.2}))
    return out


def _cost(v) -> int:
    b, s = v.ins["style"]
    c2 = v.w["fc_b"][0]
    n = v.n_out                                # fc(style) + instance norm + (1+gamma)*xn+beta
    return 2 * b * s * c2 + b * c2 + 8 * n + ACT_FLOPS[v.attrs["act"]] * n


define_op(OpDef("adain", ("x", "style"), ("norm_w", "norm_b", "fc_w", "fc_b", "alpha?"),
                {"eps": 1e-5, "act": "none", "slope": 0.01}, _infer, _bind,
                reference=lambda i, w, a: adain_reference(i["x"], i["style"], w, a["eps"], a["act"], a["slope"]),
                cases=_cases, cost=_cost))
