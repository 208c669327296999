"""x86-64 dispatch levels: name them, force one for a portable build, ask a library which it takes.

A portable build (GCC, x86-64 Linux, no -march) carries AVX-512 / AVX2 clones of its hot kernels
and fused-multiply-add twins of its GEMM tiles, picked at load time by the CPU (kcc_common.h).
One machine runs only the clones its own CPU selects, so the other paths would go untested;
forcing a level (BuildOptions(isa=...), or KCC_ISA=<level> for every portable build) compiles each
hot kernel for that one target instead of cloning it, and fixes the GEMM tile choice to it: the
library then runs exactly the code a CPU of that level takes from the portable build.

Levels (the number is KCC_ISA_LEVEL in C, and what kcc_isa_level() returns):
  baseline  0  x86-64 + SSE2: the default clones, the unfused GEMM tiles (4-row pairs)
  avx2      1  AVX2 clones with the unfused GEMM tiles: separates vector width from fusion
               when a result moves (no CPU with AVX2 and without FMA takes it by itself)
  avx2fma   2  x86-64-v3 (AVX2 + FMA ...): the AVX2 clones and the fused GEMM twins
  avx512    3  x86-64-v4 (AVX-512 F/BW/CD/DQ/VL): the AVX-512 clones, fused twins, 8-row tiles
"""
from __future__ import annotations

import ctypes
import os
import platform

LEVELS = ("baseline", "avx2", "avx2fma", "avx512")

# /proc/cpuinfo flags each level needs: GCC's x86-64-v3 / -v4 feature sets (what the clone
# resolver and __builtin_cpu_supports test); 'abm' is how Linux spells LZCNT on AMD and Intel.
_NEEDS = {
    "baseline": ("sse2",),
    "avx2": ("avx2", "bmi1", "bmi2", "f16c", "abm", "movbe", "xsave"),   # compiled for x86-64-v3: all but FMA
    "avx2fma": ("avx2", "fma", "bmi1", "bmi2", "f16c", "abm", "movbe", "xsave"),
    "avx512": ("avx2", "fma", "bmi1", "bmi2", "f16c", "abm", "movbe", "xsave",
               "avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"),
}


class IsaError(ValueError):
    """A forced dispatch level that is unknown, cannot run on this CPU, or does not apply."""


def _cpu_flags() -> set[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def is_x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


def runnable_levels() -> list[str]:
    """The levels this CPU can execute (empty off x86-64: there is nothing to force)."""
    if not is_x86_64():
        return []
    have = _cpu_flags()
    return [lv for lv in LEVELS if all(f in have for f in _NEEDS[lv])]


def dispatched_level() -> str:
    """The level an unforced portable build runs at on this CPU, as its clone resolver picks it
    (kcc_isa_level_now in kcc_common.h): x86-64-v4, else v3, else the default."""
    have = runnable_levels()
    return "avx512" if "avx512" in have else "avx2fma" if "avx2fma" in have else "baseline"


def requested(explicit: str | None, native: bool) -> str | None:
    """The level a build is forced to: explicit, else KCC_ISA for portable builds ('auto' or
    unset: none, the CPU dispatches). Native builds compile for this CPU: nothing to force."""
    if explicit is not None and native:
        raise IsaError(f"isa={explicit!r} forces a portable build's dispatch; a native build has none")
    level = explicit if explicit is not None else (None if native else os.environ.get("KCC_ISA") or None)
    if level in (None, "auto"):
        return None
    if level not in LEVELS:
        raise IsaError(f"unknown dispatch level {level!r} (KCC_ISA / BuildOptions.isa): "
                       f"one of {', '.join(LEVELS)} or 'auto'")
    if not is_x86_64():
        raise IsaError(f"dispatch level {level!r} is x86-64 only; this machine is {platform.machine()}")
    if level not in runnable_levels():
        missing = sorted(set(_NEEDS[level]) - _cpu_flags())
        raise IsaError(f"this CPU cannot execute dispatch level {level!r} (missing {', '.join(missing)})")
    return level


def level_flags(level: str | None) -> list[str]:
    return [] if level is None else [f"-DKCC_ISA_LEVEL={LEVELS.index(level)}"]


def library_level(lib: ctypes.CDLL) -> str:
    """The level a loaded kcc library runs at (its kcc_isa_level()): a LEVELS name, or 'generic'
    off x86-64 / without GCC's dispatch."""
    try:
        fn = lib.kcc_isa_level
    except AttributeError:
        return "generic"
    fn.restype, fn.argtypes = ctypes.c_int, []
    n = int(fn())
    return LEVELS[n] if 0 <= n < len(LEVELS) else "generic"
