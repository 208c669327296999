"""Attention: multi-head scaled dot-product attention with a per-sequence key length.

q, k and v come from three `linear` ops (separate [B, T, H*D] tensors): fusing them into one
N = 3*H*D GEMM would need a concatenated weight, which the checkpoint does not hold, and each
768-wide GEMM already runs at full tile efficiency, so three linears cost nothing extra.
"""
from __future__ import annotations

import numpy as np

from kcc.kernels.registry import Contract, F32, I64, IN_F32, IN_I32, Kernel, OUT_F32, c_constant, register
from kcc.ops.core import BindContext, Case, OpDef, c_float, define_op, expect

MAX_HEAD_DIM = c_constant("attention_f32.c", "KCC_ATTN_MAX_D")   # the packed blocks' bound

register(Kernel(
    name="kcc_attention_f32",
    source="attention_f32.c",
    args=(("q", IN_F32), ("k", IN_F32), ("v", IN_F32), ("lengths", IN_I32), ("n_seq", I64), ("n_tok", I64),
          ("heads", I64), ("head_dim", I64), ("scale", F32), ("out", OUT_F32)),
    contract=Contract(
        accumulation="scores and p*v on the GEMM tiles (f32, k-ordered, FMA where the target has it, "
                     "128-term chunks); online softmax with f64 max, exp (kcc_exp_f64, floored at e^-708) "
                     "and denominator; the output rescaled at most T/64 times",
        tolerance=2e-5,
        notes="validates 1 <= lengths[b] <= T before the first write (KCC_EBADINPUT); keys at "
              "positions >= lengths[b] are excluded exactly; padded query rows attend to the valid keys; "
              "head_dim <= 256 (the packed blocks' bound)"),
    requires=("kcc_gemm_tile_f32",),
))


def _infer(name, ins, ws, attrs):
    q = ins["q"]
    expect(len(q) == 3, name, f"q must be [batch, token, heads*head_dim], got {list(q)}")
    for role in ("k", "v"):
        expect(tuple(ins[role]) == tuple(q), name, f"{role} extent {list(ins[role])} differs from q {list(q)}")
    expect(tuple(ins["lengths"]) == (q[0],), name, f"lengths extent {list(ins['lengths'])}, expected [{q[0]}]")
    expect(isinstance(q[2], int), name, f"width {q[2]!r} must be a fixed integer")
    heads = _heads(name, attrs["heads"], q[2])
    expect(q[2] % heads == 0, name, f"width {q[2]} is not divisible by heads = {heads}")
    expect(q[2] // heads <= MAX_HEAD_DIM, name,
           f"head_dim {q[2] // heads} (width {q[2]} / {heads} heads) exceeds the kernel's {MAX_HEAD_DIM}")
    return tuple(q), "f32"


def _heads(name, spec, width: int) -> int:
    """`heads` is an int, or {"<width>": heads}: checkpoints do not record the head count, so a
    circuit shared by configs of different widths names the count for each width it supports."""
    if isinstance(spec, dict):
        expect(str(width) in spec, name, f"heads gives no count for width {width} (has {sorted(spec)})")
        spec = spec[str(width)]
    expect(isinstance(spec, int) and not isinstance(spec, bool) and spec >= 1, name,
           f"heads must be a positive integer, got {spec!r}")
    return spec


def _bind(ctx: BindContext):
    heads = _heads(ctx.op_name, ctx.attrs["heads"], int(ctx.in_shape["q"][2]))
    head_dim = int(ctx.in_shape["q"][2]) // heads
    return "kcc_attention_f32", {
        "q": ctx.in_ptr["q"], "k": ctx.in_ptr["k"], "v": ctx.in_ptr["v"], "lengths": ctx.in_ptr["lengths"],
        "n_seq": ctx.dim("q", 0), "n_tok": ctx.dim("q", 1), "heads": str(heads), "head_dim": str(head_dim),
        "scale": c_float(head_dim ** -0.5), "out": ctx.out_ptr,
    }


def _reference(ins, ws, a):
    """Per head softmax(q k^T / sqrt(D)) v in f64, keys at positions >= lengths[b] masked out;
    every query row (padded ones too) attends to the valid keys."""
    q, k, v = (ins[r].astype(np.float64) for r in ("q", "k", "v"))
    b, t, width = q.shape
    heads = _heads("attention", a["heads"], width)
    d = width // heads
    split = lambda z: z.reshape(b, t, heads, d).transpose(0, 2, 1, 3)  # noqa: E731
    scores = split(q) @ split(k).transpose(0, 1, 3, 2) * d ** -0.5
    valid = np.arange(t)[None, :] < ins["lengths"][:, None]                     # [B, T keys]
    scores = np.where(valid[:, None, None, :], scores, -np.inf)
    p = np.exp(scores - scores.max(axis=-1, keepdims=True))
    out = (p / p.sum(axis=-1, keepdims=True)) @ split(v)
    return out.transpose(0, 2, 1, 3).reshape(b, t, width)


def _cases():
    rng = np.random.default_rng(60)

    def case(name, b, t, width, heads, lengths):
        ins = {r: rng.standard_normal((b, t, width)).astype(np.float32) for r in ("q", "k", "v")}
        return Case(name, {**ins, "lengths": np.array(lengths, np.int32)}, attrs={"heads": heads})
    return [case("two_heads_padded", 2, 7, 16, 2, [7, 3]), case("keys_past_one_block", 1, 70, 24, 3, [67]),
            case("one_token", 1, 1, 64, 4, [1]), case("heads_by_width", 1, 5, 12, {"12": 4, "768": 12}, [5]),
            case("three_blocks_partial_panels", 2, 150, 120, 3, [150, 77]),      # head_dim 40: 2.5 panels
            case("head_dim_two_chunks", 1, 70, 320, 2, [70]),                    # head_dim 160 > 128 terms
            case("length_at_block_edge", 3, 130, 64, 1, [130, 64, 65])]


def _cost(v) -> int:
    """QK^T and PV (2 B T^2 W each), softmax (scale, max, subtract, exp, sum: 5 per score),
    the final 1/denominator per output element. Every key counted (lengths = T)."""
    b, t, w = v.ins["q"]
    h = v.karg("heads")
    return 4 * b * t * t * w + 5 * b * h * t * t + b * t * w


define_op(OpDef("attention", ("q", "k", "v", "lengths"), (), {"heads": None}, _infer, _bind,
                reference=_reference, cases=_cases, cost=_cost))
