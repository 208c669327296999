"""Per-sequence ops: length masks, style broadcast, style-conditioned LayerNorm, finite checks.

- `sequence_mask`: x [B, T, C], lengths [B] i32 -> x with rows t >= lengths[b] zeroed
  (upstream's masked_fill_ with text_mask).
- `concat_style`: x [B, T, C], style [B, S], lengths -> [B, T, C+S]: the style vector
  broadcast over time and appended to every row, padded rows zeroed (DurationEncoder's
  cat + masked_fill). Both share one kernel; the style is checked finite.
- `check_finite`: a copy of x that refuses NaN/inf (guards a style input before arithmetic);
  `squeeze` is the same checked copy dropping a trailing unit axis ([B, T, 1] -> [B, T]).
- `ada_layer_norm`: AdaLayerNorm: LN over channels without affine, then (1+gamma)*x + beta,
  where `mod` [B, 2C] = [gamma | beta] is fc(style), computed by a `linear` op before it.
"""
from __future__ import annotations

import numpy as np

from kcc.kernels.registry import F32, I64, IN_F32, IN_I32, OUT_F32, Contract, Kernel, register
from kcc.ops.core import BindContext, Case, OpDef, c_float, define_op, expect
from kcc.ops.cost_terms import data_movement, per_output
from kcc.ops.norm import layer_norm_reference

register(Kernel(
    name="kcc_rows_concat_mask_f32",
    source="rows_concat_mask_f32.c",
    args=(("x", IN_F32), ("n_chan", I64), ("tail", IN_F32), ("n_tail", I64), ("lengths", IN_I32),
          ("n_seq", I64), ("n_tok", I64), ("out", OUT_F32)),
    contract=Contract(accumulation="none (copies and zeros)", tolerance=0.0,
                      notes="lengths checked in [1, T], tail checked finite, before the first write"),
))
register(Kernel(
    name="kcc_check_finite_copy_f32",
    source="check_finite_copy_f32.c",
    args=(("x", IN_F32), ("n", I64), ("out", OUT_F32)),
    contract=Contract(accumulation="none (copy)", tolerance=0.0, notes="NaN/inf -> KCC_EBADINPUT, nothing written"),
))
register(Kernel(
    name="kcc_ada_layer_norm_f32",
    source="ada_layer_norm_f32.c",
    args=(("x", IN_F32), ("mod", IN_F32), ("n_seq", I64), ("n_tok", I64), ("n_chan", I64),
          ("eps", F32), ("out", OUT_F32)),
    contract=Contract(accumulation="mean/variance two-pass in f64; normalised value rounded once to f32; "
                                   "(1+gamma)*xn+beta in f32, one rounding per op as torch",
                      tolerance=2e-5),
))


def _seq_checks(name, x, lengths):
    expect(len(x) == 3, name, f"x must be [batch, time, channel], got {list(x)}")
    expect(tuple(lengths) == (x[0],), name, f"lengths extent {list(lengths)} is not [{x[0]}]")


# -- sequence_mask / concat_style ------------------------------------------------------------

def _mask_infer(name, ins, ws, attrs):
    _seq_checks(name, ins["x"], ins["lengths"])
    return tuple(ins["x"]), "f32"


def _concat_infer(name, ins, ws, attrs):
    x, s = ins["x"], ins["style"]
    _seq_checks(name, x, ins["lengths"])
    expect(len(s) == 2 and s[0] == x[0] and isinstance(s[1], int), name,
           f"style must be [{x[0]}, S] with a fixed S, got {list(s)}")
    expect(isinstance(x[2], int), name, f"x channels must be fixed, got {x[2]!r}")
    return (x[0], x[1], x[2] + s[1]), "f32"


def _rows_bind(ctx: BindContext, tail: str | None):
    return "kcc_rows_concat_mask_f32", {
        "x": ctx.in_ptr["x"], "n_chan": ctx.dim("x", 2),
        "tail": ctx.in_ptr[tail] if tail else "NULL", "n_tail": ctx.dim(tail, 1) if tail else "0",
        "lengths": ctx.in_ptr["lengths"], "n_seq": ctx.dim("x", 0), "n_tok": ctx.dim("x", 1),
        "out": ctx.out_ptr,
    }


def _rows_reference(ins, ws, a):
    x = ins["x"]
    if "style" in ins:
        x = np.concatenate([x, np.broadcast_to(ins["style"][:, None, :], (*x.shape[:2], ins["style"].shape[1]))], -1)
    valid = np.arange(x.shape[1])[None, :] < ins["lengths"][:, None]
    return np.where(valid[..., None], x, 0.0).astype(np.float32)


def _rows_cases(style: bool):
    def cases():
        rng = np.random.default_rng(80 + style)
        out = []
        for name, (b, t, c, lengths) in {"ragged": (3, 6, 5, [6, 1, 4]), "full_one_row": (1, 1, 3, [1]),
                                         "wide": (2, 9, 130, [2, 9])}.items():
            ins = {"x": rng.standard_normal((b, t, c)).astype(np.float32), "lengths": np.array(lengths, np.int32)}
            if style:
                ins["style"] = rng.standard_normal((b, 7)).astype(np.float32)
            out.append(Case(name, ins))
        return out
    return cases


define_op(OpDef("sequence_mask", ("x", "lengths"), (), {}, _mask_infer, lambda ctx: _rows_bind(ctx, None),
                reference=_rows_reference, cases=_rows_cases(False), cost=data_movement))
define_op(OpDef("concat_style", ("x", "style", "lengths"), (), {}, _concat_infer,
                lambda ctx: _rows_bind(ctx, "style"), reference=_rows_reference, cases=_rows_cases(True),
                cost=data_movement))


# -- check_finite ----------------------------------------------------------------------------

def _finite_infer(name, ins, ws, attrs):
    return tuple(ins["x"]), "f32"


def _finite_bind(ctx: BindContext):
    n = "*".join(ctx.dim("x", a) for a in range(len(ctx.in_shape["x"])))
    return "kcc_check_finite_copy_f32", {"x": ctx.in_ptr["x"], "n": n, "out": ctx.out_ptr}


def _copy_cases(shapes):
    def cases():
        rng = np.random.default_rng(82)
        return [Case("x".join(map(str, sh)), {"x": (1e30 * rng.standard_normal(sh)).astype(np.float32)})
                for sh in shapes]
    return cases


define_op(OpDef("check_finite", ("x",), (), {}, _finite_infer, _finite_bind,
                reference=lambda i, w, a: i["x"].copy(), cases=_copy_cases([(2, 7, 5), (1, 1)]), cost=data_movement))


def _squeeze_infer(name, ins, ws, attrs):
    x = ins["x"]
    expect(len(x) >= 2 and x[-1] == 1, name, f"squeeze drops a trailing axis of extent 1, got {list(x)}")
    return tuple(x[:-1]), "f32"


# [B, T, 1] -> [B, T] (a one-channel conv output as a per-frame signal); the same checked copy.
define_op(OpDef("squeeze", ("x",), (), {}, _squeeze_infer, _finite_bind,
                reference=lambda i, w, a: i["x"][..., 0].copy(), cases=_copy_cases([(2, 7, 1), (1, 1, 1, 1)]),
                cost=data_movement))


# -- ada_layer_norm --------------------------------------------------------------------------

def _ada_infer(name, ins, ws, attrs):
    x, mod = ins["x"], ins["mod"]
    expect(len(x) == 3, name, f"x must be [batch, time, channel], got {list(x)}")
    expect(isinstance(x[2], int), name, f"x channels must be fixed, got {x[2]!r}")
    expect(tuple(mod) == (x[0], 2 * x[2]), name,
           f"mod must be [batch, 2*channels] = [{x[0]}, {2 * x[2]}] (gamma then beta), got {list(mod)}")
    expect(float(attrs["eps"]) > 0, name, f"eps must be positive, got {attrs['eps']}")
    return tuple(x), "f32"


def _ada_bind(ctx: BindContext):
    return "kcc_ada_layer_norm_f32", {
        "x": ctx.in_ptr["x"], "mod": ctx.in_ptr["mod"], "n_seq": ctx.dim("x", 0), "n_tok": ctx.dim("x", 1),
        "n_chan": ctx.dim("x", 2), "eps": c_float(ctx.attrs["eps"]), "out": ctx.out_ptr,
    }


def _ada_reference(ins, ws, a):
    c = ins["x"].shape[2]
    mod = ins["mod"].astype(np.float64)[:, None, :]
    return (1.0 + mod[..., :c]) * layer_norm_reference(ins["x"], None, None, a["eps"]) + mod[..., c:]


def _ada_cases():
    rng = np.random.default_rng(83)
    return [Case(f"{b}x{t}x{c}", {"x": (2 * rng.standard_normal((b, t, c)) - 1).astype(np.float32),
                                  "mod": (0.3 * rng.standard_normal((b, 2 * c))).astype(np.float32)})
            for b, t, c in ((2, 7, 5), (1, 3, 640), (1, 1, 1))]


define_op(OpDef("ada_layer_norm", ("x", "mod"), (), {"eps": 1e-5}, _ada_infer, _ada_bind,
                reference=_ada_reference, cases=_ada_cases, cost=per_output(10)))
