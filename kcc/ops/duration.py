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

import numpy as np

from kcc.kernels.registry import I64, IN_F32, IN_I32, OUT_F32, OUT_I32, Contract, Kernel, register
from kcc.ops.core import BindContext, Case, OpDef, define_op, expect
from kcc.ops.cost_terms import data_movement

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


def _dur_reference(ins, ws, a):
    """The kernel's roundings: each sigmoid to f32, the K terms summed in order in f64 and
    rounded once, / speed in f32, half to even, at least 1; 0 past lengths[b]."""
    sig = (1.0 / (1.0 + np.exp(-ins["logits"].astype(np.float64)))).astype(np.float32)
    total = np.cumsum(sig.astype(np.float64), axis=-1)[..., -1].astype(np.float32)
    dur = np.maximum(np.rint(total / ins["speed"][:, None]), 1).astype(np.int32)
    return np.where(np.arange(dur.shape[1])[None, :] < ins["lengths"][:, None], dur, 0).astype(np.int32)


def _dur_cases():
    rng = np.random.default_rng(100)

    def case(name, b, t, k, speed, lengths):
        return Case(name, {"logits": (3 * rng.standard_normal((b, t, k))).astype(np.float32),
                           "speed": np.array(speed, np.float32), "lengths": np.array(lengths, np.int32)})
    return [case("kokoro_bins", 2, 7, 50, [1.0, 0.8], [7, 4]), case("fast_one_token", 1, 1, 3, [5.0], [1]),
            case("slow_odd", 1, 9, 5, [0.25], [9])]


def _dur_cost(v) -> int:
    b, t, k = v.ins["logits"]
    return 4 * b * t * k + b * t                               # sigmoid 3 + sum 1, / speed


define_op(OpDef("durations", ("logits", "speed", "lengths"), (), {}, _dur_infer, _dur_bind,
                reference=_dur_reference, cases=_dur_cases, cost=_dur_cost))


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


def _expand_reference(ins, ws, a):
    return np.stack([np.repeat(x, d, axis=0) for x, d in zip(ins["x"], ins["durations"])])


def _expand_cases():
    rng = np.random.default_rng(101)

    def case(name, frames_dim, c, durations):
        d = np.array(durations, np.int32)
        return Case(name, {"x": rng.standard_normal((*d.shape, c)).astype(np.float32), "durations": d},
                    attrs={"frames": frames_dim}, dims={frames_dim: int(d[0].sum())})
    return [case("zeros_and_padding", "F", 5, [[2, 0, 3, 1], [1, 1, 1, 3]]), case("one_token", "G", 130, [[7]])]


define_op(OpDef("expand_by_durations", ("x", "durations"), (), {"frames": None}, _expand_infer, _expand_bind,
                reference=_expand_reference, cases=_expand_cases, cost=data_movement))
