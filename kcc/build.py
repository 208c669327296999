"""Compile generated C with the strict flag set, cached by content hash.

The cache key covers the source text, the compiler's identity and every flag, so a change to
any of them builds anew. Entries are written to a temporary name and renamed into place under
a per-key lock (concurrent kcc processes never see half a library), and each library has a
SHA-256 sidecar: an entry whose bytes no longer match is rebuilt, never loaded.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from kcc.isa import level_flags, requested
from kcc.digest import file_sha256

STRICT_FLAGS = ("-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic")


class BuildError(Exception):
    """The C compiler rejected generated code; the message carries its diagnostics."""


@dataclass(frozen=True)
class BuildOptions:
    opt: str = "-O2"
    native: bool = False          # -march=native: opt-in, the default library stays portable
    # OpenMP: kernels thread over the cores (results are identical to one thread, per kernel
    # contract); a caller can still run it on one (CompiledCircuit.set_threads).
    openmp: bool = True
    # -fsanitize=address,undefined; KCC_SANITIZE=1 turns it on for every build (the CI job runs
    # the parity suite that way, with libasan preloaded into Python).
    sanitize: bool = field(default_factory=lambda: os.environ.get("KCC_SANITIZE") == "1")
    # -DKCC_PROFILE: the entry point times every op (C11 timespec_get) into a per-library table
    # that <prefix>_op_seconds reads back. Off by default: the table is shared by all callers.
    profile: bool = False
    # Force the x86-64 dispatch level of a portable build (kcc/isa.py: baseline, avx2, avx2fma,
    # avx512): each hot kernel is compiled for that target alone, so this machine runs what a
    # CPU of that level would. None: KCC_ISA when set, else the CPU dispatches at load time.
    isa: str | None = None

    def flags(self) -> list[str]:
        f = [x if x != "-O2" else self.opt for x in STRICT_FLAGS]
        f += ["-fPIC", "-shared", "-fno-math-errno"]
        if self.native:
            f.append("-march=native")
        f += level_flags(requested(self.isa, self.native))
        if self.openmp:
            f.append("-fopenmp")
        if self.profile:
            f.append("-DKCC_PROFILE")
        if self.sanitize:
            f += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
        return f


def compiler() -> str:
    return os.environ.get("CC", "cc")


@functools.lru_cache(maxsize=8)
def compiler_identity(cc: str) -> str:
    """`cc --version`: part of every cache key (asked once per process)."""
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"C compiler '{cc}' is not usable: {exc}")


def cache_dir() -> Path:
    root = os.environ.get("KCC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kcc")
    p = Path(root)
    p.mkdir(parents=True, exist_ok=True)
    return p


@dataclass(frozen=True)
class Built:
    library: Path
    source: Path
    sha256: str              # of the library bytes on disk
    key: str
    flags: tuple[str, ...]
    cached: bool


def build_library(source: str, options: BuildOptions = BuildOptions(), name: str = "circuit") -> Built:
    cc = compiler()
    flags = options.flags()
    key = hashlib.sha256("\0".join([source, cc, compiler_identity(cc), *flags]).encode()).hexdigest()[:32]
    root = cache_dir()
    lib = root / f"{name}-{key}.so"
    src = root / f"{name}-{key}.c"
    sidecar = root / f"{name}-{key}.so.sha256"
    with open(root / f"{name}-{key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if lib.exists() and sidecar.exists() and sidecar.read_text().strip() == file_sha256(lib):
            return Built(lib, src, file_sha256(lib), key, tuple(flags), True)
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            tsrc, tlib = Path(tmp) / "unit.c", Path(tmp) / "unit.so"
            tsrc.write_text(source, encoding="utf-8")
            cmd = [cc, *flags, "-o", str(tlib), str(tsrc), "-lm"]
            proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                raise BuildError(f"{cc} failed on generated circuit '{name}' ({' '.join(flags)}):\n"
                                 f"{proc.stderr[-4000:]}")
            digest = file_sha256(tlib)
            shutil.move(str(tsrc), src)
            os.replace(tlib, lib)
            tmp_side = sidecar.with_suffix(".tmp")
            tmp_side.write_text(digest + "\n")
            os.replace(tmp_side, sidecar)
        return Built(lib, src, digest, key, tuple(flags), False)
