"""Semantic ops, one module per family. `load()` imports the families in FAMILIES, in that
order (later ones build on earlier ones' kernels), which fills OPS and the kernel registry;
importing this package calls it, so `from kcc.ops import OPS` sees every op."""
from __future__ import annotations

import importlib

from kcc.ops.core import OPS, BindContext, Case, LoweringError, OpDef, c_float, define_op, expect  # noqa: F401

FAMILIES = ("embedding", "dense", "norm", "elementwise", "conv", "adain", "fused", "dft_conv", "winograd_conv", "conv_int8",
            "attention", "recurrence", "style", "duration", "signal")


def load() -> dict[str, OpDef]:
    """Every op family registered (idempotent: a module is imported once); returns OPS."""
    for family in FAMILIES:
        importlib.import_module(f"kcc.ops.{family}")
    return OPS


load()
