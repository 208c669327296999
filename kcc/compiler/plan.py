"""The memory plan: one read-only weight blob and one caller-owned activation arena.

Every weight gets an aligned offset in the blob; every activation an aligned offset in the
arena, sized for the declared max of each runtime dim, so one compiled library serves every
length up to the max with no recompile. Offsets are reused between activations whose live
ranges do not overlap (first-fit, largest first), so the arena stays near the largest live set.

The generated C places the activations again at run time with the actual dims (`offsets_at`
is the same greedy, in the same order, which the C follows): at a short length slots sized
for the max would keep small buffers far apart and fault in pages across the whole arena.
Where that run-time placement would end past the planned arena (first-fit can in principle
grow when sizes shrink), the C keeps the planned offsets, which are valid at every length.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from kcc.ir import DTYPE_BYTES, Graph

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


def placement_order(g: Graph) -> list[str]:
    """The activations in the order the greedy places them: largest planned size first, then
    the earlier producer. Both placements (planned and run time) use this one order."""
    ranges = live_ranges(g)
    return sorted(ranges, key=lambda t: (-g.tensors[t].nbytes_max(g.dims), ranges[t][0]))


def first_fit(bufs: list[Buffer], reuse: bool = True) -> int:
    """Sets each buffer's offset, in list order, to the lowest one that shares no byte with an
    earlier buffer live at the same time (every earlier buffer when not `reuse`); returns the
    end of the highest. Sizes must already be aligned."""
    placed: list[Buffer] = []
    for buf in bufs:
        conflicts = sorted((b for b in placed if not reuse or b.live_with(buf)), key=lambda b: b.offset)
        at = 0
        for b in conflicts:
            if at + buf.nbytes <= b.offset:
                break
            at = max(at, b.offset + b.nbytes)
        buf.offset = at
        placed.append(buf)
    return max((b.offset + b.nbytes for b in placed), default=0)


def plan_memory(g: Graph, reuse: bool = True, alignment: int = ALIGNMENT) -> MemoryPlan:
    plan = MemoryPlan(alignment=alignment)
    offset = 0
    for name, w in g.weights.items():
        plan.weights[name] = Buffer(name, offset, w.nbytes, -1, len(g.ops))
        offset = align_up(offset + w.nbytes, alignment)
    plan.weights_bytes = offset

    ranges = live_ranges(g)
    placed = [Buffer(t, 0, align_up(g.tensors[t].nbytes_max(g.dims), alignment), *ranges[t])
              for t in placement_order(g)]
    plan.arena_bytes = first_fit(placed, reuse) or alignment
    plan.activations = {b.name: b for b in sorted(placed, key=lambda b: b.first)}
    return plan


def offsets_at(g: Graph, plan: MemoryPlan, dims: dict[str, int]) -> dict[str, int]:
    """The activation offsets the generated C uses at these dims: the planned greedy redone with
    the actual sizes, or the planned offsets where that would end past the planned arena."""
    ranges = live_ranges(g)
    bufs = [Buffer(t, 0, align_up(g.tensors[t].numel(dims) * DTYPE_BYTES[g.tensors[t].dtype], plan.alignment),
                   *ranges[t]) for t in placement_order(g)]
    if first_fit(bufs) > plan.arena_bytes:
        return {name: b.offset for name, b in plan.activations.items()}
    return {b.name: b.offset for b in bufs}
