"""Compile generated C with the strict flag set, cached by content hash.

The cache key covers the source text, the compiler's identity and every flag, so a change to
any of them builds anew. Entries are written to a temporary name and renamed into place under
a per-key lock (concurrent kcc processes never see half a library), and each library has a
sidecar holding an HMAC of its SHA-256 under the user's key (kcc.cache_trust): an entry whose
bytes no longer match, or whose sidecar kcc did not sign, is rebuilt, never loaded.
"""
from __future__ import annotations

import ctypes
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from kcc.cache_trust import sign, verify
from kcc.compiler import prebuilt
from kcc.compiler.isa import level_flags, requested
from kcc.compiler.precision import check as check_precision
from kcc.compiler.precision import from_env as precision_from_env
from kcc.compiler.stamp_memo import remembered
from kcc.compiler.threads import set_wait_policy
from kcc.files import cache_dir, file_sha256, sweep_temporaries, temp_dir

STRICT_FLAGS = ("-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-pedantic")


class BuildError(Exception):
    """The C compiler rejected generated code; the message carries its diagnostics."""


# What the product compiles (kcc say / serve / batch / compile): -O3. On a Zen 3 the portable -O2
# build ran 10-15% behind -O3 (the DFT / Winograd convs and AdaIN rows; same GEMM), -O3 matches
# -march=native (bench/results/native_tuning.md); it doubles a model's one-time compile. -O2 and -O3
# give the same bits (no FP contraction or reassociation in ISO C mode; tests/test_release_build.py),
# so the test suite builds at -O2, the BuildOptions default, and checks what ships.
RELEASE_OPT = "-O3"


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
    # Force the x86-64 dispatch level of a portable build (kcc/compiler/isa.py: baseline, avx2, avx2fma,
    # avx512): each hot kernel is compiled for that target alone, so this machine runs what a
    # CPU of that level would. None: KCC_ISA when set, else the CPU dispatches at load time.
    isa: str | None = None
    # Compute precision (kcc/compiler/precision.py): fp32, the X-Ray path; bf16 opt-in (its GEMM-path
    # convs in bf16 with f32 sums). Default: KCC_PRECISION when set, else fp32.
    precision: str = field(default_factory=precision_from_env)

    def flags(self) -> list[str]:
        check_precision(self.precision)     # an unknown or unimplemented precision builds nothing
        f = [x if x != "-O2" else self.opt for x in STRICT_FLAGS]
        f += ["-fPIC", "-shared", "-fno-math-errno"]
        if self.native:
            # The CPU's instruction set with the schedule the kernels are tuned under (the portable
            # build's): GCC's znver3 tuning folds the GEMM tile's panel loads into every FMA as a
            # memory operand (12 loads per 8 FMAs, load-port bound: 55 vs 74 GFLOP/s on one Zen 3
            # core; the whole synthesis 2876 vs 2279 ms at 64 ids, bench/results/native_tuning.md).
            f += ["-march=native", "-mtune=generic"]
        f += level_flags(requested(self.isa, self.native))
        if self.openmp:
            f.append("-fopenmp")
        if self.profile:
            f.append("-DKCC_PROFILE")
        if self.sanitize:
            f += ["-fsanitize=address,undefined", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
        return f


def release_options(native: bool = False, **kw) -> BuildOptions:
    """The build the product runs: RELEASE_OPT, portable unless native (-march=native)."""
    return BuildOptions(opt=RELEASE_OPT, native=native, **kw)


def compiler() -> str:
    return os.environ.get("CC", "cc")


@functools.lru_cache(maxsize=8)
def compiler_identity(cc: str) -> str:
    """`cc --version`: part of every cache key (asked once per process)."""
    try:
        return subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise BuildError(f"no usable C compiler '{cc}' ({exc}): these build options need one (install gcc or "
                         "set CC); an installed wheel's prebuilt libraries cover the default build only")


def compiler_available() -> bool:
    """Whether CC (else cc) runs: without one only prebuilt libraries load."""
    try:
        known_compiler_identity(compiler())
    except BuildError:
        return False
    return True


def compiler_stamp(cc: str) -> dict | None:
    """What names the compiler binary without running it: where `cc` resolves on PATH (links
    followed, so switching /etc/alternatives changes it) and that file's inode, size, mtime and
    ctime (an upgrade replaces or rewrites it). None where `cc` is not found."""
    found = shutil.which(cc)
    if found is None:
        return None
    real = os.path.realpath(found)
    try:
        st = os.stat(real)
    except OSError:
        return None
    return {"cc": cc, "found": found, "real": real, "dev": st.st_dev, "ino": st.st_ino, "size": st.st_size,
            "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}


def known_compiler_identity(cc: str) -> str:
    """compiler_identity(cc), remembered in the cache by compiler_stamp so that a warm load (an
    artifact key, check_buildable) spawns no `cc --version` (a fork + exec of the driver, 2-40 ms
    on a loaded 2-core machine). Safe: the identity only picks which artifact directory to look
    in; what is loaded from it must still carry a manifest signed with the user's key and
    libraries matching its digests (kcc.compiler.artifact.load). The memo is signed as well, so
    a cache writer cannot steer keys with it. A compiler changed behind an unchanged binary (a
    wrapper such as ccache in front of an upgraded gcc) keeps the old key: the artifact it built
    keeps loading, as it would have with the wrapper's own --version."""
    stamp = compiler_stamp(cc)
    if stamp is None:
        return compiler_identity(cc)            # not on PATH: the BuildError naming it
    return remembered("compiler-identity", f"{cc}\0{stamp['found']}", stamp, lambda: compiler_identity(cc))


def toolchain_identity() -> str:
    """What makes this process's libraries, for artifact keys: the C compiler's identity ('no C
    compiler' where there is none: prebuilt libraries only) and the prebuilt table's digest."""
    try:
        cc = known_compiler_identity(compiler())
    except BuildError:
        cc = "no C compiler"
    return f"{cc}\0prebuilt {prebuilt.identity()}"


def compile_to(cc: str, flags: list[str], source: Path, out: Path, name: str) -> None:
    """The one compile command (the build cache's, and the wheel's prebuilt libraries')."""
    proc = subprocess.run([cc, *flags, "-o", str(out), str(source), "-lm"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise BuildError(f"{cc} failed on generated circuit '{name}' ({' '.join(flags)}):\n{proc.stderr[-4000:]}")


@dataclass(frozen=True)
class Built:
    library: Path
    source: Path
    sha256: str              # of the library bytes on disk
    key: str
    flags: tuple[str, ...]
    cached: bool


def _loads(lib: Path) -> bool:
    """dlopen succeeds (a library can match its sidecar and still not load: copied from a
    machine with another libc or libgomp, or a cache restored from elsewhere)."""
    set_wait_policy()                    # before libgomp is loaded with it
    try:
        ctypes.CDLL(str(lib))
        return True
    except OSError:
        return False


def _check_entry_paths(paths: list[Path]) -> None:
    for p in paths:
        if os.path.lexists(p) and not (p.is_file() and not p.is_symlink()):
            raise BuildError(f"build cache entry {p} is not a regular file (a directory or a link?); "
                             "remove it and run again")


def _signed(lib: Path, digest: str) -> bytes:
    return f"{lib.name}\0{digest}".encode()


def _cached(lib: Path, sidecar: Path, check_load: bool) -> str | None:
    """The library's SHA-256 if the entry is whole, kcc signed it and it loads, else None
    (rebuild it). The signature is checked before dlopen (which runs the library's
    constructors). A sanitizer build loads only with its runtime preloaded, so its load is not
    tried here."""
    try:
        digest = file_sha256(lib)
        if not verify(_signed(lib, digest), "build-library", sidecar.read_text()):
            return None
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    return digest if not check_load or _loads(lib) else None


def build_library(source: str, options: BuildOptions = BuildOptions(), name: str = "circuit") -> Built:
    """Compile `source` or reuse its cached library. A read-only cache still serves the
    entries it holds (unlocked: nothing can change them); one it lacks is a BuildError naming
    KCC_CACHE_DIR. Temporary files are unique per build, so racing processes never share one."""
    flags = options.flags()
    found = _prebuilt(source, flags)
    if found is not None:
        return found
    cc = compiler()
    key = hashlib.sha256("\0".join([source, cc, compiler_identity(cc), *flags]).encode()).hexdigest()[:32]
    try:
        root = cache_dir()
    except OSError as exc:
        raise BuildError(f"the build cache cannot be created ({exc}); set KCC_CACHE_DIR to a writable "
                         "directory") from None
    lib = root / f"{name}-{key}.so"
    src = root / f"{name}-{key}.c"
    sidecar = root / f"{name}-{key}.so.sig"
    lock_path = root / f"{name}-{key}.lock"
    _check_entry_paths([lib, src, sidecar, lock_path])
    try:
        lock = open(lock_path, "a")
    except OSError as exc:
        digest = _cached(lib, sidecar, not options.sanitize)
        if digest is not None:
            return Built(lib, src, digest, key, tuple(flags), True)
        raise BuildError(f"the build cache {root} is not writable ({exc.strerror}) and holds no usable "
                         f"'{name}' library; set KCC_CACHE_DIR to a writable directory") from None
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        digest = _cached(lib, sidecar, not options.sanitize)
        if digest is not None:
            return Built(lib, src, digest, key, tuple(flags), True)
        try:
            sweep_temporaries(root)
            with temp_dir(root, f"{name}-{key}") as tmp:
                tsrc, tlib, tside = Path(tmp) / "unit.c", Path(tmp) / "unit.so", Path(tmp) / "unit.sig"
                tsrc.write_text(source, encoding="utf-8")
                compile_to(cc, flags, tsrc, tlib, name)
                digest = file_sha256(tlib)
                tside.write_text(sign(_signed(lib, digest), "build-library") + "\n")
                os.replace(tsrc, src)
                os.replace(tlib, lib)
                os.replace(tside, sidecar)
        except OSError as exc:
            raise BuildError(f"cannot write '{name}' into the build cache {root}: {exc}") from None
        return Built(lib, src, digest, key, tuple(flags), False)


def _prebuilt(source: str, flags: list[str]) -> Built | None:
    """This install's prebuilt library for `source` and `flags` (kcc.compiler.prebuilt), when it
    has one that loads here (one needing a libgomp this machine lacks compiles instead). Its
    source is not shipped: callers hold the text (compile_graph passes it on)."""
    try:
        found = prebuilt.find(source, flags)
    except prebuilt.PrebuiltError as exc:
        raise BuildError(str(exc)) from None
    if found is None or not _loads(found.path):
        return None
    return Built(found.path, found.path.with_suffix(".c"), found.sha256, found.key, tuple(flags), True)
