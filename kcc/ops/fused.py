"""Fused ops that kcc.compiler.passes makes from chains of the families' ops (usable in circuits too).

- `adain_conv1d`: adain (act none | leaky_relu | snake) feeding a stride-1, groups-1 conv1d,
  with the conv's epilogue (bias, act leaky_relu, optional residual `res`). The normalised
  tensor never materialises: kcc_norm_conv1d_f32 normalises time tiles (with the conv's halo)
  into a local buffer and runs the GEMM-path conv on them. Attrs: the adain's as eps,
  norm_act, norm_slope; the conv's as padding, dilation, act, slope. Weights: the adain's
  (norm_w, norm_b, fc_w, fc_b, alpha?) and the conv's (weight, bias?), the conv weight in
  torch layout [Cout, Cin, K] (packed here) or already in the GEMM pack (from the pass).

`fits_norm_conv(c_in, span)` is the kernel's size condition (norm_conv1d_f32.c).
"""
from __future__ import annotations

import numpy as np

from kcc.kernels.registry import Contract, F32, I64, IN_F32, KERNELS, Kernel, OUT_F32, WEIGHT, c_constant, register
from kcc.ops.adain import ACTS as NORM_ACTS
from kcc.ops.adain import MAX_CHANNELS
from kcc.ops.adain import _infer as adain_infer
from kcc.ops.adain import adain_reference, adain_weights
from kcc.ops.conv import GEMM_NR, bf16_bind, bf16_gemm_pack, conv_case, conv_reference, gemm_pack, stride1_out
from kcc.ops.core import OPS, BindContext, Case, OpDef, c_float, define_op, expect
from kcc.ops.cost_terms import ACT_FLOPS, epilogue

NC_TILE = c_constant("norm_conv1d_f32.c", "KCC_NC_TILE")
GEMM_MR = c_constant("gemm_tile_f32.c", "KCC_GEMM_MR")


def fits_norm_conv(c_in: int, span: int) -> bool:
    return c_in <= MAX_CHANNELS and c_in * (span + GEMM_MR) <= NC_TILE


register(Kernel(
    name="kcc_norm_conv1d_f32",
    source="norm_conv1d_f32.c",
    args=(("x", IN_F32), ("style", IN_F32), ("n_batch", I64), ("t_in", I64), ("c_in", I64), ("n_style", I64),
          ("norm_w", WEIGHT), ("norm_b", WEIGHT), ("fc_w", WEIGHT), ("fc_b", WEIGHT), ("alpha", WEIGHT),
          ("act", I64), ("slope", F32), ("eps", F32), ("wp", WEIGHT), ("bias", WEIGHT), ("has_bias", I64),
          ("c_out", I64), ("k_size", I64), ("pad", I64), ("dilation", I64), ("neg_slope", F32),
          ("res", IN_F32), ("has_res", I64), ("out", OUT_F32)),
    contract=Contract(
        accumulation="the adain of kcc_instance_norm_style_f32 and the conv rows of kcc_conv1d_gemm_f32, "
                     "through the same helpers",
        tolerance=2e-5,
        notes="bit-identical to the unfused adain -> conv1d (-> add) for any thread count; "
              "KCC_EDIMS unless fits_norm_conv(c_in, dilation*(K-1))"),
    requires=("kcc_instance_norm_style_f32", "kcc_conv_rows_f32", "kcc_conv_epilogue_f32"),
))

ATTRS = {"eps": 1e-5, "norm_act": "none", "norm_slope": 0.01, "padding": 0, "dilation": 1,
         "act": "none", "slope": 0.01}


def _geometry(w) -> tuple[int, int, int]:
    """(c_out, c_in, K) from the torch layout [Cout, Cin, K] or the GEMM pack [K, panels, Cin, 16]."""
    if len(w) == 4:
        return w[1] * GEMM_NR, w[2], w[0]
    return w[0], w[1], w[2]


def _infer(name, ins, ws, a):
    norm_ws = {r: ws[r] for r in ("norm_w", "norm_b", "fc_w", "fc_b", "alpha") if r in ws}
    shape, _ = adain_infer(name, {"x": ins["x"], "style": ins["style"]}, norm_ws,
                           {"eps": a["eps"], "act": a["norm_act"], "slope": a["norm_slope"]})
    w = ws["weight"]
    expect(len(w) in (3, 4), name, f"weight must be [Cout, Cin, K] or the GEMM pack, got {list(w)}")
    c_out, c_in, k = _geometry(w)
    if "bias" in ws:
        c_out = ws["bias"][0]
    expect(c_in == shape[2], name, f"weight {list(w)} expects {c_in} input channels, x has {shape[2]}")
    for key in ("padding", "dilation"):
        expect(isinstance(a[key], int) and a[key] >= (key == "dilation"), name, f"attr {key} must be an integer, got {a[key]!r}")
    expect(a["act"] in ("none", "leaky_relu"), name, f"act {a['act']!r} is not 'none' or 'leaky_relu'")
    span = a["dilation"] * (k - 1)
    expect(fits_norm_conv(c_in, span), name, f"Cin {c_in} with tap span {span} does not fit the kernel's tile")
    return stride1_out(name, shape, c_out, a["padding"], span, ins.get("res")), "f32"


def _bind(ctx: BindContext):
    a, w = ctx.attrs, ctx.w_ptr
    c_out, c_in, k = _geometry(ctx.w_shape["weight"])
    return "kcc_norm_conv1d_f32", {
        "x": ctx.in_ptr["x"], "style": ctx.in_ptr["style"], "n_batch": ctx.dim("x", 0), "t_in": ctx.dim("x", 1),
        "c_in": ctx.dim("x", 2), "n_style": ctx.dim("style", 1), "norm_w": w["norm_w"], "norm_b": w["norm_b"],
        "fc_w": w["fc_w"], "fc_b": w["fc_b"], "alpha": w.get("alpha", w["norm_w"]),
        "act": str(NORM_ACTS[a["norm_act"]]), "slope": c_float(a["norm_slope"]), "eps": c_float(a["eps"]),
        "wp": w["weight"], "bias": w.get("bias", w["weight"]), "has_bias": "1" if "bias" in w else "0",
        "c_out": str(ctx.out_shape[2]), "k_size": str(k), "pad": str(a["padding"]), "dilation": str(a["dilation"]),
        "neg_slope": c_float(a["slope"] if a["act"] == "leaky_relu" else 1.0),
        "res": ctx.in_ptr.get("res", ctx.in_ptr["x"]), "has_res": "1" if "res" in ctx.in_ptr else "0",
        "out": ctx.out_ptr,
    }


def _reference(ins, ws, a):
    xn = adain_reference(ins["x"], ins["style"], ws, a["eps"], a["norm_act"], a["norm_slope"])
    return conv_reference(xn, ws["weight"], ws.get("bias"), a, res=ins.get("res"))


def _case(rng, name, b, t, c_in, c_out, k, n_style, norm_act, res=False, bias=True, **conv_attrs) -> Case:
    conv = conv_case(rng, name, b, t, c_in, c_out, k, bias=bias, **conv_attrs)
    t_out = t + 2 * conv_attrs.get("padding", 0) - conv_attrs.get("dilation", 1) * (k - 1)
    ins = {"x": conv.inputs["x"], "style": rng.standard_normal((b, n_style)).astype(np.float32),
           **({"res": rng.standard_normal((b, t_out, c_out)).astype(np.float32)} if res else {})}
    return Case(name, ins, {**adain_weights(rng, c_in, n_style, norm_act == "snake"), **conv.weights},
                {**conv.attrs, "norm_act": norm_act, "norm_slope": 0.2})


def _cases():
    rng = np.random.default_rng(31)
    return [_case(rng, "snake_k3", 2, 23, 16, 24, 3, 8, "snake", padding=1),
            _case(rng, "leaky_k7_d3_residual", 1, 70, 33, 17, 7, 16, "leaky_relu", res=True, padding=9, dilation=3,
                  act="leaky_relu", slope=0.1),
            _case(rng, "plain_valid_no_bias", 1, 9, 5, 3, 3, 4, "none", bias=False)]


def _cost(v) -> int:
    """The adain's formula on its input (its act is attr norm_act) and the conv's on the output."""
    b, s = v.ins["style"]
    c_in = v.ins["x"][2]
    n_in = v.n(v.ins["x"])
    norm = 2 * b * s * 2 * c_in + b * 2 * c_in + (8 + ACT_FLOPS[v.attrs["norm_act"]]) * n_in
    b, t_out, c_out = v.out
    return norm + 2 * b * t_out * c_out * c_in * v.karg("k_size") + epilogue(v, v.n_out)


define_op(OpDef("adain_conv1d", ("x", "style", "res?"),
                ("norm_w", "norm_b", "fc_w", "fc_b", "alpha?", "weight", "bias?"), ATTRS, _infer, _bind,
                pack={"weight": ("conv_pack", gemm_pack("adain_conv1d"))},
                reference=_reference, cases=_cases, cost=_cost))


# -- the bf16 precision (kcc/compiler/precision.py) ----------------------------------------------------
register(Kernel(
    name="kcc_norm_conv1d_bf16",
    source="norm_conv1d_bf16.c",
    args=KERNELS["kcc_norm_conv1d_f32"].args,
    contract=Contract(
        accumulation="kcc_norm_conv1d_f32 with the conv rows on kcc_gemm_tile_bf16 (bf16 products, f32 sums)",
        tolerance=2e-2,
        notes="same limits as kcc_norm_conv1d_f32; identical for any thread count"),
    requires=("kcc_norm_conv1d_f32", "kcc_conv1d_gemm_bf16"),
))

define_op(OpDef("adain_conv1d_bf16", OPS["adain_conv1d"].inputs, OPS["adain_conv1d"].weights, ATTRS, _infer,
                bf16_bind(_bind, "kcc_norm_conv1d_bf16"),
                pack={"weight": ("bf16_pack", bf16_gemm_pack("adain_conv1d_bf16"))},
                reference=_reference, cases=_cases, cost=_cost))
