"""Elementwise and data-movement ops over time-major tensors.

- `add`: a + b (+ c + d), then `* scale`, `/ divisor`, optional act "leaky_relu" (slope), each
  an f32 step in torch's order: AdainResBlk1d's `(res + sc) * rsqrt(2)` is scale 0.7071067811865476,
  the generator's `(xs1 + xs2 + xs3) / 3` is divisor 3.
- `leaky_relu`: x, slope (the same kernel with one input).
- `concat`: a, b (c, d) along the last (channel) axis; leading extents must agree.
- `upsample_nearest`: time x factor (UpSample1d: factor 2). x [B, T, C] or [B, T].
- `reflection_pad`: time reflection padding, attrs left / right (generator: left 1, right 0).

Extents that are different strings for the same length ('F' and '(((2*F)-1)/2+1)', from a
stride-2 conv) are accepted as equal when they agree at every sampled dim value (1..512 for
one dim), and the plainer string is kept.
"""
from __future__ import annotations

import itertools
import re

import numpy as np

from kcc.ir import extent_value
from kcc.kernels.registry import F32, I64, IN_F32, OUT_F32, Contract, Kernel, register
from kcc.ops.core import BindContext, Case, OpDef, c_float, define_op, expect
from kcc.ops.cost_terms import data_movement

register(Kernel(
    name="kcc_eltwise_sum_f32", source="eltwise_sum_f32.c",
    args=(("a", IN_F32), ("b", IN_F32), ("c", IN_F32), ("d", IN_F32), ("n_in", I64), ("n", I64),
          ("mul", F32), ("div", F32), ("neg_slope", F32), ("out", OUT_F32)),
    contract=Contract(accumulation="f32 steps in torch's order (sum left to right, *mul, /div, leaky)",
                      tolerance=0.0, notes="bit-exact with torch for the same f32 operations"),
))
register(Kernel(
    name="kcc_concat_last_f32", source="concat_last_f32.c",
    args=(("a", IN_F32), ("c_a", I64), ("b", IN_F32), ("c_b", I64), ("c", IN_F32), ("c_c", I64),
          ("d", IN_F32), ("c_d", I64), ("rows", I64), ("out", OUT_F32)),
    contract=Contract(accumulation="copies only", tolerance=0.0),
))
register(Kernel(
    name="kcc_time_gather_f32", source="time_gather_f32.c",
    args=(("x", IN_F32), ("n_batch", I64), ("t_in", I64), ("n_chan", I64), ("factor", I64),
          ("pad_left", I64), ("pad_right", I64), ("out", OUT_F32)),
    contract=Contract(accumulation="copies only", tolerance=0.0,
                      notes="rejects pads not shorter than the upsampled length (KCC_EDIMS)"),
))

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def same_extent(a, b) -> bool:
    """True when extents a and b have the same value at every sampled dim assignment."""
    if a == b:
        return True
    names = sorted(set(_IDENT.findall(str(a))) | set(_IDENT.findall(str(b))))
    if not names:
        return extent_value(a, {}) == extent_value(b, {})
    values = range(1, 513) if len(names) == 1 else range(1, 25)
    for combo in itertools.islice(itertools.product(values, repeat=len(names)), 20000):
        dims = dict(zip(names, combo))
        if extent_value(a, dims) != extent_value(b, dims):
            return False
    return True


def _plainest(extents):
    return min(extents, key=lambda e: (not isinstance(e, int), len(str(e))))


def _agree(name, shapes: dict, axes: slice, what: str) -> tuple:
    """The common extent of `axes` over all shapes (rejecting mismatches), plainest spelling."""
    roles = list(shapes)
    first = shapes[roles[0]]
    out = []
    for i, _ in enumerate(first[axes]):
        col = [shapes[r][axes][i] for r in roles]
        for r, e in zip(roles, col):
            expect(same_extent(e, col[0]), name,
                   f"{what}: input '{r}' extent {list(shapes[r])} differs from '{roles[0]}' {list(first)}")
        out.append(_plainest(col))
    return tuple(out)


def paren_extent(e) -> str:
    """An extent safe to multiply: a dim name or an already bracketed expression stays as is."""
    e = str(e)
    return e if _IDENT.fullmatch(e) or (e.startswith("(") and e.endswith(")")) else f"({e})"


# -- add / leaky_relu ------------------------------------------------------------------------

def _add_infer(name, ins, ws, attrs):
    ranks = {len(s) for s in ins.values()}
    expect(len(ranks) == 1, name, f"inputs have different ranks: {[list(s) for s in ins.values()]}")
    expect(float(attrs["divisor"]) != 0.0, name, "divisor must be nonzero")
    expect(attrs["act"] in ("none", "leaky_relu"), name, f"act {attrs['act']!r} is not 'none' or 'leaky_relu'")
    return _agree(name, ins, slice(None), "elementwise operands"), "f32"


def _sum_bind(ctx: BindContext, roles, mul, div, slope):
    present = [r for r in roles if r in ctx.in_ptr]
    ptr = [ctx.in_ptr[r] for r in present] + [ctx.in_ptr[present[0]]] * (4 - len(present))
    return "kcc_eltwise_sum_f32", {
        "a": ptr[0], "b": ptr[1], "c": ptr[2], "d": ptr[3], "n_in": str(len(present)),
        "n": ctx.numel(ctx.out_shape), "mul": c_float(mul), "div": c_float(div), "neg_slope": c_float(slope),
        "out": ctx.out_ptr}


def _add_bind(ctx: BindContext):
    a = ctx.attrs
    return _sum_bind(ctx, ("a", "b", "c", "d"), a["scale"], a["divisor"],
                     a["slope"] if a["act"] == "leaky_relu" else 1.0)


def _leaky_infer(name, ins, ws, attrs):
    return tuple(ins["x"]), "f32"


def _leaky_bind(ctx: BindContext):
    return _sum_bind(ctx, ("x",), 1.0, 1.0, ctx.attrs["slope"])


def _leaky(y: np.ndarray, slope) -> np.ndarray:
    return np.where(y >= 0, y, y * np.float32(slope)).astype(np.float32)


def _add_ref(ins, ws, a):
    """The kernel's f32 steps in the same order, so the reference is bit-exact."""
    y = ins["a"]
    for r in ("b", "c", "d"):
        if r in ins:
            y = y + ins[r]
    y = y * np.float32(a["scale"]) / np.float32(a["divisor"])
    return _leaky(y, a["slope"]) if a["act"] == "leaky_relu" else y


def _add_cost(v) -> int:
    extra = sum(1 for r in ("b", "c", "d") if r in v.ins)
    extra += (v.attrs["scale"] != 1.0) + (v.attrs["divisor"] != 1.0) + (v.attrs["act"] != "none")
    return extra * v.n_out


def _randn(rng, *shape) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _add_cases():
    rng = np.random.default_rng(10)
    x = lambda *s: _randn(rng, *s)  # noqa: E731
    return [Case("two_operands", {"a": x(2, 7, 5), "b": x(2, 7, 5)}),
            Case("resblock_rsqrt2", {"a": x(1, 33, 16), "b": x(1, 33, 16)}, attrs={"scale": 0.7071067811865476}),
            Case("three_over_3", {"a": x(2, 9, 3), "b": x(2, 9, 3), "c": x(2, 9, 3)}, attrs={"divisor": 3.0}),
            Case("four_leaky_tail", {r: x(1, 1037) for r in "abcd"}, attrs={"act": "leaky_relu", "slope": 0.2})]


def _leaky_cases():
    rng = np.random.default_rng(11)
    return [Case("rank3_odd", {"x": _randn(rng, 2, 7, 5)}, attrs={"slope": 0.2}),
            Case("long_tail", {"x": _randn(rng, 1, 2051)})]


define_op(OpDef("add", ("a", "b", "c?", "d?"), (), {"scale": 1.0, "divisor": 1.0, "act": "none", "slope": 0.01},
                _add_infer, _add_bind, reference=_add_ref, cases=_add_cases, cost=_add_cost))
define_op(OpDef("leaky_relu", ("x",), (), {"slope": 0.01}, _leaky_infer, _leaky_bind,
                reference=lambda i, w, a: _leaky(i["x"], a["slope"]), cases=_leaky_cases, cost=lambda v: v.n_out))


# -- concat ----------------------------------------------------------------------------------

def _concat_infer(name, ins, ws, attrs):
    ranks = {len(s) for s in ins.values()}
    expect(len(ranks) == 1 and min(ranks) >= 2, name, f"inputs must share a rank >= 2: {[list(s) for s in ins.values()]}")
    for r, s in ins.items():
        expect(isinstance(s[-1], int), name, f"input '{r}' channel extent {s[-1]!r} must be fixed")
    lead = _agree(name, ins, slice(0, -1), "leading extents")
    return (*lead, sum(s[-1] for s in ins.values())), "f32"


def _concat_bind(ctx: BindContext):
    args = {"rows": ctx.numel(ctx.out_shape[:-1]), "out": ctx.out_ptr}
    for r in ("a", "b", "c", "d"):
        have = r in ctx.in_ptr
        args[r] = ctx.in_ptr[r if have else "a"]
        args[f"c_{r}"] = str(ctx.in_shape[r][-1]) if have else "0"
    return "kcc_concat_last_f32", args


def _concat_cases():
    rng = np.random.default_rng(12)
    return [Case("two", {"a": _randn(rng, 2, 5, 3), "b": _randn(rng, 2, 5, 17)}),
            Case("four_rank2", {r: _randn(rng, 3, 1 + i) for i, r in enumerate("abcd")})]


define_op(OpDef("concat", ("a", "b", "c?", "d?"), (), {}, _concat_infer, _concat_bind,
                reference=lambda i, w, a: np.concatenate([i[r] for r in "abcd" if r in i], axis=-1),
                cases=_concat_cases, cost=data_movement))


# -- upsample_nearest / reflection_pad --------------------------------------------------------

def _time_shape(name, x, factor, left, right):
    expect(len(x) in (2, 3), name, f"x must be [B, T, C] or [B, T], got {list(x)}")
    for key, v, lo in (("factor", factor, 1), ("left", left, 0), ("right", right, 0)):
        expect(isinstance(v, int) and v >= lo, name, f"attr {key} must be an integer >= {lo}, got {v!r}")
    t = x[1]
    if isinstance(t, int):
        t_out = t * factor + left + right
        expect(left < t * factor and right < t * factor, name, f"pads ({left}, {right}) need a time extent above {t}")
    else:
        tm = t if factor == 1 else f"{factor}*{paren_extent(t)}"
        t_out = f"({tm}+{left + right})" if left + right else f"({tm})"
    return (x[0], t_out, *x[2:]), "f32"


def _time_bind(ctx: BindContext, factor, left, right):
    x = ctx.in_shape["x"]
    return "kcc_time_gather_f32", {
        "x": ctx.in_ptr["x"], "n_batch": ctx.dim("x", 0), "t_in": ctx.dim("x", 1),
        "n_chan": ctx.dim("x", 2) if len(x) == 3 else "1", "factor": str(factor),
        "pad_left": str(left), "pad_right": str(right), "out": ctx.out_ptr}


def _reflect(x, left, right):
    return np.pad(x, [(0, 0), (left, right)] + [(0, 0)] * (x.ndim - 2), mode="reflect")


def _time_cases(attrs: list[dict]):
    def cases():
        rng = np.random.default_rng(13)
        shapes = [(2, 7, 3), (1, 5), (1, 4, 33)]
        return [Case(f"{'x'.join(map(str, s))}_{'_'.join(f'{k}{v}' for k, v in a.items())}", {"x": _randn(rng, *s)},
                     attrs=a) for s, a in zip(shapes, attrs)]
    return cases


define_op(OpDef("upsample_nearest", ("x",), (), {"factor": 2},
                lambda n, i, w, a: _time_shape(n, i["x"], a["factor"], 0, 0),
                lambda ctx: _time_bind(ctx, ctx.attrs["factor"], 0, 0),
                reference=lambda i, w, a: np.repeat(i["x"], a["factor"], axis=1),
                cases=_time_cases([{"factor": 2}, {"factor": 3}, {"factor": 1}]), cost=data_movement))
define_op(OpDef("reflection_pad", ("x",), (), {"left": 1, "right": 0},
                lambda n, i, w, a: _time_shape(n, i["x"], 1, a["left"], a["right"]),
                lambda ctx: _time_bind(ctx, 1, ctx.attrs["left"], ctx.attrs["right"]),
                reference=lambda i, w, a: _reflect(i["x"], a["left"], a["right"]),
                cases=_time_cases([{"left": 1, "right": 0}, {"left": 2, "right": 4}, {"left": 3, "right": 3}]),
                cost=data_movement))
