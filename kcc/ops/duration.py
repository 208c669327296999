"""Duration ops: integer token durations from the duration head, and alignment expansion.

- `durations`: logits [B, T, K], speed [B] f32, lengths [B] i32 -> [B, T] i32:
  round_half_even(sum_k sigmoid(logits) / speed), clamped to >= 1 (upstream forward_with_tokens),
  0 for padded tokens. Speed must be finite with 0 < speed <= 5 (else KCC_EBADINPUT, nothing
  written).
- `expand_by_durations`: x [B, T, C], durations [B, T] i32 -> [B, F, C], frame f copying the
  token whose cumulative-duration interval holds f: upstream's `x^T @ pred_aln_trg` with a
  one-hot alignment, without the dense [T, F] matrix. F (attr `frames`, a runtime dim) is not
  known until durations exist, so circuits run in two phases: the duration circuit returns
  durations, the caller passes F = sum(durations) to the consuming circuit, and the kernel
  checks that every sequence's durations sum to exactly F (else KCC_EBADINPUT).
"""
from __future__ import annotations

from kcc.kernels.registry import I64, IN_F32, IN_I32, OUT_F32, OUT_I32, Contract, Kernel, register
from kcc.ops.core import BindContext, OpDef, define_op, expect

register(Kernel(
    name="kcc_durations_from_logits_f32",
    source="durations_from_logits_f32.c",
    args=(("logits", IN_F32), ("speed", IN_F32), ("lengths", IN_I32), ("n_seq", I64), ("n_tok", I64),
          ("n_bins", I64), ("dur", OUT_I32)),
    contract=Contract(accumulation="sigmoid in f64 rounded to f32, the K terms summed in f64 and rounded "
                                   "once to f32, / speed in f32, rint (half to even)",
                      tolerance=0.0,
                      notes="integer output: equal to torch unless torch's f32 sum lands within a few ulp "
                            "of a .5 boundary; speed, lengths and every quotient checked before writing"),
))
register(Kernel(
    name="kcc_expand_by_durations_f32",
    source="expand_by_durations_f32.c",
    args=(("x", IN_F32), ("dur", IN_I32), ("n_seq", I64), ("n_tok", I64), ("n_chan", I64),
          ("n_frames", I64), ("out", OUT_F32)),
    contract=Contract(accumulation="none (row copies)", tolerance=0.0,
                      notes="durations >= 0 and sum == n_frames per sequence, checked before the first write"),
))


def _dur_infer(name, ins, ws, attrs):
    lg = ins["logits"]
    expect(len(lg) == 3, name, f"logits must be [batch, token, bins], got {list(lg)}")
    for role in ("speed", "lengths"):
        expect(tuple(ins[role]) == (lg[0],), name, f"{role} extent {list(ins[role])} is not [{lg[0]}]")
    return (lg[0], lg[1]), "i32"


def _dur_bind(ctx: BindContext):
    return "kcc_durations_from_logits_f32", {
        "logits": ctx.in_ptr["logits"], "speed": ctx.in_ptr["speed"], "lengths": ctx.in_ptr["lengths"],
        "n_seq": ctx.dim("logits", 0), "n_tok": ctx.dim("logits", 1), "n_bins": ctx.dim("logits", 2),
        "dur": ctx.out_ptr,
    }


define_op(OpDef("durations", ("logits", "speed", "lengths"), (), {}, _dur_infer, _dur_bind))


def _expand_infer(name, ins, ws, attrs):
    x, d = ins["x"], ins["durations"]
    expect(len(x) == 3, name, f"x must be [batch, token, channel], got {list(x)}")
    expect(tuple(d) == tuple(x[:2]), name, f"durations extent {list(d)} differs from x's [batch, token] {list(x[:2])}")
    frames = attrs["frames"]
    expect(isinstance(frames, str) and frames.isidentifier(), name,
           f"attr frames must name the runtime dim of the expanded axis, got {frames!r}")
    return (x[0], frames, x[2]), "f32"


def _expand_bind(ctx: BindContext):
    return "kcc_expand_by_durations_f32", {
        "x": ctx.in_ptr["x"], "dur": ctx.in_ptr["durations"], "n_seq": ctx.dim("x", 0),
        "n_tok": ctx.dim("x", 1), "n_chan": ctx.dim("x", 2), "n_frames": f"(int64_t)({ctx.attrs['frames']})",
        "out": ctx.out_ptr,
    }


define_op(OpDef("expand_by_durations", ("x", "durations"), (), {"frames": None}, _expand_infer, _expand_bind))
