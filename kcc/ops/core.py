"""The op-definition mechanism: OpDef, BindContext, Case and the OPS table that families fill.

An op is one definition: its `infer` gives the output extent from input and weight shapes (and
rejects mismatches by name); its `bind` maps the op onto one registered kernel, argument by
argument, as C expressions (the emitter checks that mapping against the kernel's recorded
signature); its `reference` computes the same output in numpy, its `cases` are the small seeded
problems tests/test_ops.py runs the compiled op on against that reference (at the bound
kernel's Contract.tolerance), and its `cost` is the FLOP formula kcc.compiler.costs reads.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from kcc.ir import Shape


class LoweringError(Exception):
    """An op cannot be lowered as declared; the message names the op and the problem."""


@dataclass
class BindContext:
    """What `bind` may ask about the op being lowered; all answers are C expressions."""
    op_name: str
    in_ptr: dict[str, str]
    in_shape: dict[str, Shape]
    w_ptr: dict[str, str]
    w_shape: dict[str, tuple[int, ...]]
    out_ptr: str
    attrs: dict
    out_shape: Shape = ()          # the output's inferred extent (as infer returned it)

    @staticmethod
    def extent(e) -> str:
        return str(e)

    @staticmethod
    def numel(shape) -> str:
        """int64_t C expression for the element count of `shape` (ints and dim expressions)."""
        return "*".join(f"(int64_t)({e})" for e in shape) or "1"

    def rows(self, role: str) -> str:
        """Product of every extent but the last: the row count of a [..., C] tensor."""
        return self.numel(self.in_shape[role][:-1])

    def dim(self, role: str, axis: int) -> str:
        return f"(int64_t)({self.extent(self.in_shape[role][axis])})"


@dataclass(frozen=True)
class OpDef:
    name: str
    inputs: tuple[str, ...]
    weights: tuple[str, ...]
    attrs: dict                     # name -> default (None: required)
    infer: Callable[[str, dict, dict, dict], tuple[Shape, str]]
    bind: Callable[[BindContext], tuple[str, dict[str, str]]]
    # role -> (tag, fn): lowering stores fn(weight) in the blob under '<weight>.<tag>' and binds
    # that instead, so a kernel can read a layout made for it (fn gets the op's attrs too; the
    # tag may name attrs, '{n}', when the layout depends on them). Ops a pass makes are packed
    # the same way after the passes (kcc.compiler.lower.pack_weights).
    pack: dict = None
    # (inputs, weights, attrs) -> the output as a numpy array: arrays as a circuit feeds them
    # (weights in the checkpoint's layout, before any pack), attrs with the defaults filled in.
    reference: Callable[[dict, dict, dict], np.ndarray] | None = None
    # () -> [Case]: small seeded problems for the op harness (odd sizes, tails, edge attrs).
    cases: Callable[[], list["Case"]] | None = None
    # kcc.compiler.costs' view of one op -> nominal FLOPs (see that module for the counting rules).
    cost: Callable | None = None
    # Int8 weight storage (kcc.weights.quantised): `int8_twin` names the op lowering uses instead
    # when every weight in the twin's `int8_roles` is int8 * per-row scale in the checkpoint; the
    # twin's pack fn for those roles gets that Quantised (q, scale), not the FP32 array.
    int8_twin: str = ""
    int8_roles: tuple[str, ...] = ()
    # output -> the form the harness compares, applied to kernel and reference alike, for an output
    # with a representation choice the reference cannot predict (the stft's phase at the -pi/pi cut).
    compare_as: Callable[[np.ndarray], np.ndarray] | None = None


@dataclass(frozen=True)
class Case:
    """One harness problem: arrays for the op's inputs and weights (checkpoint layout), its attrs
    (defaults filled in by the harness), and values for runtime dims no input carries."""
    name: str
    inputs: dict[str, np.ndarray]
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    attrs: dict = field(default_factory=dict)
    dims: dict[str, int] = field(default_factory=dict)


def with_defaults(defn: OpDef, attrs: dict) -> dict:
    """The op's attrs as lowering sees them: its defaults, overridden by `attrs`."""
    return {**defn.attrs, **attrs}


OPS: dict[str, OpDef] = {}


def define_op(defn: OpDef) -> OpDef:
    if defn.name in OPS:
        raise ValueError(f"op '{defn.name}' defined twice")
    OPS[defn.name] = defn
    return defn


def expect(cond: bool, op_name: str, msg: str) -> None:
    if not cond:
        raise LoweringError(f"op {op_name}: {msg}")


def c_float(x) -> str:
    return f"{float(x)!r}f"


