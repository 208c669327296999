"""One module per capture family; each registers its functions with @capture(name)."""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

CAPTURES: dict[str, Callable] = {}


def capture(name: str):
    def deco(fn):
        if name in CAPTURES:
            raise ValueError(f"capture '{name}' registered twice")
        CAPTURES[name] = fn
        return fn
    return deco


def load_all() -> dict[str, Callable]:
    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")
    return CAPTURES
