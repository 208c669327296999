"""Graph passes that run after lowering, in order. Each takes and returns a Graph."""
from __future__ import annotations

from kcc.ir import Graph


def drop_dead_ops(g: Graph) -> Graph:
    """Remove ops whose outputs reach neither a graph output nor a checkpoint."""
    needed = set(g.outputs) | {c.tensor for c in g.checkpoints}
    keep = []
    for op in reversed(g.ops):
        if op.output in needed:
            keep.append(op)
            needed.update(op.inputs.values())
    g.ops = list(reversed(keep))
    live = {op.output for op in g.ops} | set(g.inputs)
    g.tensors = {k: v for k, v in g.tensors.items() if k in live}
    return g


DEFAULT_PASSES = [drop_dead_ops]
