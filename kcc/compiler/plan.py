"""The memory plan: one read-only weight blob and one caller-owned activation arena.

Every weight gets an aligned offset in the blob; every activation an aligned offset in the
arena, sized for the declared max of each runtime dim, so one compiled library serves every
length up to the max with no recompile. Offsets are reused between activations whose live
ranges do not overlap (first-fit, largest first), so the arena stays near the largest live set.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kcc.compiler.ir import Graph

ALIGNMENT = 64


def align_up(n: int, a: int = ALIGNMENT) -> int:
    return (n + a - 1) // a * a


@dataclass
class Buffer:
    name: str
    offset: int
    nbytes: int
    first: int = 0        # index of the producing op
    last: int = 0         # index of the last op that reads it (graph outputs: the end)

    def overlaps(self, other: "Buffer") -> bool:
        return self.offset < other.offset + other.nbytes and other.offset < self.offset + self.nbytes

    def live_with(self, other: "Buffer") -> bool:
        return self.first <= other.last and other.first <= self.last


@dataclass
class MemoryPlan:
    alignment: int
    weights: dict[str, Buffer] = field(default_factory=dict)
    weights_bytes: int = 0
    activations: dict[str, Buffer] = field(default_factory=dict)
    arena_bytes: int = 0

    def summary(self) -> str:
        live = sum(b.nbytes for b in self.activations.values())
        return (f"weights {self.weights_bytes} B in {len(self.weights)} buffers; arena {self.arena_bytes} B "
                f"for {len(self.activations)} activations ({live} B if none shared)")


def live_ranges(g: Graph) -> dict[str, tuple[int, int]]:
    ranges: dict[str, list[int]] = {}
    for i, op in enumerate(g.ops):
        ranges[op.output] = [i, i]
        for t in op.inputs.values():
            if t in ranges:
                ranges[t][1] = max(ranges[t][1], i)
    end = len(g.ops)
    for t in g.outputs:
        ranges[t][1] = end
    return {k: (v[0], v[1]) for k, v in ranges.items()}


def plan_memory(g: Graph, reuse: bool = True, alignment: int = ALIGNMENT) -> MemoryPlan:
    plan = MemoryPlan(alignment=alignment)
    offset = 0
    for name, w in g.weights.items():
        plan.weights[name] = Buffer(name, offset, w.nbytes, -1, len(g.ops))
        offset = align_up(offset + w.nbytes, alignment)
    plan.weights_bytes = offset

    placed: list[Buffer] = []
    ranges = live_ranges(g)
    order = sorted(ranges, key=lambda t: (-g.tensors[t].nbytes_max(g.dims), ranges[t][0]))
    for t in order:
        first, last = ranges[t]
        buf = Buffer(t, 0, align_up(g.tensors[t].nbytes_max(g.dims), alignment), first, last)
        conflicts = sorted((b for b in placed if not reuse or b.live_with(buf)), key=lambda b: b.offset)
        at = 0
        for b in conflicts:
            if at + buf.nbytes <= b.offset:
                break
            at = max(at, b.offset + b.nbytes)
        buf.offset = at
        placed.append(buf)
    plan.activations = {b.name: b for b in sorted(placed, key=lambda b: b.first)}
    plan.arena_bytes = max((b.offset + b.nbytes for b in placed), default=alignment)
    return plan
