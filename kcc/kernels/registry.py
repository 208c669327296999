"""The kernel registry: each C primitive, its exact signature and its numerical contract.

Kernels are model-name free: they know rows, channels and sequences, never 'ALBERT' or
'decoder'. Lowering picks a kernel by name from here; the emitter checks every call against
the signature recorded here before it writes a line of C.
"""
from __future__ import annotations

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


def register(kernel: Kernel) -> Kernel:
    if kernel.name in KERNELS:
        raise ValueError(f"kernel '{kernel.name}' registered twice")
    if not kernel.path.is_file():
        raise ValueError(f"kernel '{kernel.name}': source {kernel.path} does not exist")
    for arg, kind in kernel.args:
        if kind not in C_TYPES:
            raise ValueError(f"kernel '{kernel.name}': argument '{arg}' has unknown kind '{kind}'")
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
    import kcc.ops  # noqa: F401  (op families register their kernels on import)
    if name not in KERNELS:
        raise KeyError(f"no kernel named '{name}' in the registry; known: {', '.join(sorted(KERNELS))}")
    return KERNELS[name]
