"""The IR: a flat, ordered list of ops over named tensors with symbolic extents.

Extents are ints or names of runtime dims ('B', 'T'); a tensor's planned size uses each dim's
declared max, its live size the value passed at run time. Lowering builds this from a circuit;
passes rewrite it; the planner and emitter only read it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

Extent = int | str
Shape = tuple[Extent, ...]

DTYPE_BYTES = {"f32": 4, "i32": 4}

_EXTENT_CHARS = set("0123456789+-*/() _")


def extent_value(e: Extent, dims: dict[str, int]) -> int:
    """Value of an extent: an int, a dim name, or an integer expression over dim names such as
    '((T+2-3)/2+1)'. '/' is C's integer division; every extent kcc makes is positive, so
    Python's floor division agrees with it. The same string is pasted into the C."""
    if isinstance(e, int):
        return e
    if e in dims:
        return int(dims[e])
    names = sorted(dims, key=len, reverse=True)
    rest = e
    for n in names:
        rest = rest.replace(n, " ")
    if set(rest) - _EXTENT_CHARS:
        raise ValueError(f"extent {e!r} is not an integer expression over dims {sorted(dims)}")
    return int(eval(e.replace("/", "//"), {"__builtins__": {}}, dict(dims)))  # noqa: S307 (checked above)


def max_dims(dims: dict[str, tuple[int, int]]) -> dict[str, int]:
    return {k: v[1] for k, v in dims.items()}


@dataclass
class Tensor:
    name: str
    dtype: str
    shape: Shape
    kind: str                      # 'input' | 'activation'

    def numel(self, values: dict[str, int]) -> int:
        n = 1
        for e in self.shape:
            n *= extent_value(e, values)
        return n

    def numel_max(self, dims: dict[str, tuple[int, int]]) -> int:
        """Planned element count: every dim at its max (extents grow with their dims)."""
        return self.numel(max_dims(dims))

    def nbytes_max(self, dims) -> int:
        return self.numel_max(dims) * DTYPE_BYTES[self.dtype]


@dataclass
class WeightRef:
    name: str                      # circuit-local name (packed copies: '<name>.<pack tag>')
    ref: str                       # checkpoint tensor (or module, for fold='weight_norm')
    fold: str
    shape: tuple[int, ...]         # of the array in the blob (after any packing)
    sha256: str = ""
    pack: str = ""                 # the OpDef pack tag that produced this layout, '' if none

    @property
    def nbytes(self) -> int:
        n = 4                      # weights are FP32
        for e in self.shape:
            n *= e
        return n


@dataclass
class Op:
    name: str                      # unique, e.g. 'albert.3.attn'
    type: str                      # semantic op, a key of kcc.ops.OPS
    inputs: dict[str, str]         # role -> tensor
    weights: dict[str, str]        # role -> weight name
    attrs: dict
    output: str


@dataclass
class Checkpoint:
    name: str
    tensor: str
    layout: str
    axes: list[str]
    gate: dict = field(default_factory=dict)   # per-checkpoint tolerance override, with 'why'


@dataclass
class Graph:
    name: str
    dims: dict[str, tuple[int, int]]          # name -> (min, max), in ABI order
    inputs: list[str]
    outputs: list[str]
    tensors: dict[str, Tensor] = field(default_factory=dict)
    weights: dict[str, WeightRef] = field(default_factory=dict)
    ops: list[Op] = field(default_factory=list)
    checkpoints: list[Checkpoint] = field(default_factory=list)

    def producer(self, tensor: str) -> Op | None:
        return next((op for op in self.ops if op.output == tensor), None)
