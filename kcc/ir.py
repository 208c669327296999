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


@dataclass
class Tensor:
    name: str
    dtype: str
    shape: Shape
    kind: str                      # 'input' | 'activation'

    def numel_max(self, dims: dict[str, tuple[int, int]]) -> int:
        n = 1
        for e in self.shape:
            n *= dims[e][1] if isinstance(e, str) else e
        return n

    def nbytes_max(self, dims) -> int:
        return self.numel_max(dims) * DTYPE_BYTES[self.dtype]


@dataclass
class WeightRef:
    name: str                      # circuit-local name
    ref: str                       # checkpoint tensor (or module, for fold='weight_norm')
    fold: str
    shape: tuple[int, ...]
    sha256: str = ""


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
