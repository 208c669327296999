"""The kernel registry: each C primitive, its exact signature and its numerical contract.

Kernels are model-name free: they know rows, channels and sequences, never 'ALBERT' or
'decoder'. Lowering picks a kernel by name from here; the emitter checks every call against
the signature recorded here before it writes a line of C.

The op families (kcc/ops, loaded by kcc.ops.load()) register their kernels here; this module
imports nothing from them, so the layering is one way. Constants that Python must agree with
(panel widths, stack-array bounds) are read from the C's `#define`s by `c_constant`, never copied.
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

C_DIR = Path(__file__).with_name("c")
COMMON_HEADER = C_DIR / "kcc_common.h"

# Argument kinds: what the emitter may pass for each.
IN_F32, IN_I32, OUT_F32, OUT_I32 = "in_f32", "in_i32", "out_f32", "out_i32"
WEIGHT, I64, F32 = "weight", "i64", "f32"
C_TYPES = {IN_F32: "const float *", IN_I32: "const int32_t *", OUT_F32: "float *", OUT_I32: "int32_t *",
           WEIGHT: "const float *", I64: "int64_t", F32: "float"}


@dataclass(frozen=True)
class Contract:
    """What a caller may rely on numerically."""
    accumulation: str          # e.g. "f64 statistics, f32 elementwise"
    tolerance: float           # max-abs error budget vs an FP32 reference at unit-scale inputs
    notes: str = ""


@dataclass(frozen=True)
class Kernel:
    name: str
    source: str                               # file under kcc/kernels/c
    args: tuple[tuple[str, str], ...]         # (name, kind) in C parameter order
    contract: Contract
    requires: tuple[str, ...] = field(default=())  # other kernels this one calls

    @property
    def path(self) -> Path:
        return C_DIR / self.source

    def c_source(self) -> str:
        return self.path.read_text(encoding="utf-8")


KERNELS: dict[str, Kernel] = {}


class RegistryError(ValueError):
    """A kernel registration the emitter could not use: a name taken, a source file missing, an
    argument of a kind C_TYPES lacks. Nothing is registered."""


def register(kernel: Kernel) -> Kernel:
    if kernel.name in KERNELS:
        raise RegistryError(f"kernel '{kernel.name}' registered twice")
    if not kernel.path.is_file():
        raise RegistryError(f"kernel '{kernel.name}': source {kernel.path} does not exist")
    for arg, kind in kernel.args:
        if kind not in C_TYPES:
            raise RegistryError(f"kernel '{kernel.name}': argument '{arg}' has unknown kind '{kind}'")
    KERNELS[kernel.name] = kernel
    return kernel


def with_requires(names) -> list[str]:
    """The kernels to paste for `names`, in order: each one's `requires` before it, every source
    file once (one file may hold several registered kernels)."""
    used: list[str] = []

    def need(kname: str) -> None:
        for dep in get_kernel(kname).requires:
            need(dep)
        if all(get_kernel(u).source != get_kernel(kname).source for u in used):
            used.append(kname)

    for n in names:
        need(n)
    return used


def get_kernel(name: str) -> Kernel:
    if name not in KERNELS:
        raise KeyError(f"no kernel named '{name}' in the registry (kcc.ops.load() fills it); "
                       f"known: {', '.join(sorted(KERNELS))}")
    return KERNELS[name]


_DEFINE = re.compile(r"^\s*#\s*define\s+([A-Z][A-Z0-9_]*)\s+(-?\d+)(?:\.0f?)?\b(?!\.)", re.MULTILINE)


@functools.cache
def c_defines(source: str) -> dict[str, int]:
    """The integer `#define NAME <literal>` constants of kcc/kernels/c/<source> (function-like
    macros, expressions and floating-point values other than whole ones are left out; so is a
    name defined to different values under different #if branches, which has no one value)."""
    seen: dict[str, set[int]] = {}
    for m in _DEFINE.finditer((C_DIR / source).read_text(encoding="utf-8")):
        seen.setdefault(m.group(1), set()).add(int(m.group(2)))
    return {name: values.pop() for name, values in seen.items() if len(values) == 1}


def c_constant(source: str, name: str) -> int:
    """One integer constant of a C source: the single place Python learns a kernel's bound."""
    defines = c_defines(source)
    if name not in defines:
        raise KeyError(f"{source} defines no integer constant {name}; it has {sorted(defines)}")
    return defines[name]
