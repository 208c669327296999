"""Terms the ops' FLOP formulas share (kcc.compiler.costs states the counting rules).

A formula gets kcc.compiler.costs' view of one op: `v.ins` / `v.out` / `v.w` (shapes as ints),
`v.attrs`, `v.karg(name)` (a kernel argument as bound), `v.n(shape)` and `v.n_out`.
"""
from __future__ import annotations

# FLOPs per element of each activation (sigmoid: exp, add, divide).
ACT_FLOPS = {"none": 0, "relu": 1, "leaky_relu": 1, "tanh": 1, "sigmoid": 3, "gelu_new": 8, "snake": 5}


def epilogue(v, per: int) -> int:
    """Bias, fused activation and fused residual: each one op per output element."""
    f = 0
    if "bias" in v.w:
        f += per
    f += ACT_FLOPS.get(v.attrs.get("act", "none"), 1) * per
    if "res" in v.ins:
        f += per
    return f


def data_movement(v) -> int:
    """Copies, gathers and masks: no arithmetic."""
    return 0


def per_output(flops: int):
    """A formula charging `flops` per output element."""
    def cost(v) -> int:
        return flops * v.n_out
    return cost
