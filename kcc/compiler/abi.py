"""The generated libraries' entry points, described once.

The emitter writes these prototypes into every stage's C, the runtime derives its ctypes
signatures from them, and `kcc export` declares the same function-pointer type in its runner:
change a parameter here and all three follow (tests/test_plan_and_emit.py checks the emitted C).
"""
from __future__ import annotations

import ctypes
import re

ABI_VERSION = 4


def symbol_prefix(circuit_name: str) -> str:
    """The prefix of a circuit's exported C symbols: kcc_<name>, non-[a-z0-9_] as '_'."""
    return "kcc_" + re.sub(r"[^0-9a-z_]", "_", circuit_name.lower())

_P = ctypes.POINTER
# <prefix>_run(...): (name, C type, ctypes type)
RUN_PARAMS = (
    ("weights", "const void *", ctypes.c_void_p),
    ("weights_bytes", "size_t", ctypes.c_size_t),
    ("arena", "void *", ctypes.c_void_p),
    ("arena_bytes", "size_t", ctypes.c_size_t),
    ("dims", "const int64_t *", _P(ctypes.c_int64)),
    ("inputs", "const void *const *", _P(ctypes.c_void_p)),
    ("outputs", "void *const *", _P(ctypes.c_void_p)),
    ("checkpoints", "void *const *", _P(ctypes.c_void_p)),       # NULL, or where each checkpoint goes
    ("inject", "const void *const *", _P(ctypes.c_void_p)),      # NULL, or replacements (teacher forcing)
    ("err", "char *", ctypes.c_char_p),
    ("err_len", "size_t", ctypes.c_size_t),
)
# The small functions beside it: name -> (C return type, C parameters, ctypes restype, argtypes)
HELPERS = {
    "abi_version": ("int", "void", ctypes.c_int, []),
    "arena_bytes": ("size_t", "void", ctypes.c_size_t, []),
    "weights_bytes": ("size_t", "void", ctypes.c_size_t, []),
    "set_threads": ("int", "int n", ctypes.c_int, [ctypes.c_int]),
    "op_seconds": ("size_t", "double *out, size_t n", ctypes.c_size_t, [ctypes.c_void_p, ctypes.c_size_t]),
    # the activation offsets the run uses at these dims, in kcc.compiler.plan.placement_order
    "place": ("size_t", "const int64_t *dims, size_t *offsets, size_t n", ctypes.c_size_t,
              [_P(ctypes.c_int64), ctypes.c_void_p, ctypes.c_size_t]),
    # fn(bytes, n) after the last op reading each weight of >= WEIGHT_DONE_MIN_BYTES (NULL: never)
    "set_weight_done": ("void", "void (*fn)(const void *, size_t)", None, [ctypes.c_void_p]),
}
# A weight smaller than this is not handed back one by one: it holds at most one whole page.
WEIGHT_DONE_MIN_BYTES = 8192
WEIGHT_DONE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t)


def _decl(ctype: str, name: str = "") -> str:
    return f"{ctype}{name}" if ctype.endswith("*") else f"{ctype} {name}".rstrip()


def run_prototype(prefix: str) -> str:
    """'int <prefix>_run(const void *weights, size_t weights_bytes, ...)' without the ';'."""
    return f"int {prefix}_run(" + ", ".join(_decl(c, n) for n, c, _ in RUN_PARAMS) + ")"


def run_fn_typedef(name: str = "kcc_run_fn") -> str:
    return f"typedef int (*{name})(" + ", ".join(_decl(c) for _, c, _ in RUN_PARAMS) + ");"


def bind(lib, prefix: str) -> dict:
    """The library's entry points as ctypes functions with their signatures set."""
    fns = {}
    run = getattr(lib, f"{prefix}_run")
    run.restype, run.argtypes = ctypes.c_int, [t for _, _, t in RUN_PARAMS]
    fns["run"] = run
    for name, (_, _, restype, argtypes) in HELPERS.items():
        f = getattr(lib, f"{prefix}_{name}")
        f.restype, f.argtypes = restype, argtypes
        fns[name] = f
    return fns
