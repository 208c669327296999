"""Attention: multi-head scaled dot-product attention with a per-sequence key length.

q, k and v come from three `linear` ops (separate [B, T, H*D] tensors): fusing them into one
N = 3*H*D GEMM would need a concatenated weight, which the checkpoint does not hold, and each
768-wide GEMM already runs at full tile efficiency, so three linears cost nothing extra.
"""
from __future__ import annotations

from kcc.kernels.registry import F32, I64, IN_F32, IN_I32, OUT_F32, Contract, Kernel, register
from kcc.ops.core import BindContext, OpDef, c_float, define_op, expect

MAX_HEAD_DIM = 256    # KCC_ATTN_MAX_D in attention_f32.c

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


define_op(OpDef("attention", ("q", "k", "v", "lengths"), (), {"heads": None}, _infer, _bind))
