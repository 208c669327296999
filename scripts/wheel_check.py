#!/usr/bin/env python3
"""Build kcc's wheel and sdist, install the wheel into a clean venv and speak with it, with no C
compiler on PATH (the prebuilt stage libraries) and, for comparison, with one.

  python scripts/wheel_check.py [--deps index|shared] [--no-isolation] [--out bench/results/wheel_first_say.md]

The venv holds the wheel only, never this checkout: `kcc say` runs from a temporary directory
with PATH set to the venv's bin/ (no cc, no gcc, CC unset), KCC_CACHE_DIR a fresh directory that
holds only the already-fetched real weights (a link to the warm cache's real/), and the check
asserts in the child that no compiler is found and that kcc was imported from the venv.

--deps index (what CI runs): pip installs the wheel and its pinned dependencies from the package
index into the venv. --deps shared (the test suite, offline and fast): the wheel is installed
with --no-deps and the venv reads the dependencies from the running venv's site-packages through
a path line (not a site dir: that directory's .pth files, e.g. an editable kcc, are not run).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import wave
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))    # at the end: an importer's own sys.path.pop(0) (tests/test_wheel.py) stays right

from bench.machine import cpu_name, short_commit  # noqa: E402  (the CPU named as every bench result names it)

TEXT = "Hello from generated C."

# Run inside the venv before speaking: the compiler must be absent and kcc must be the wheel's.
_PROBE = """
import json, os, shutil, sys, kcc
print(json.dumps({"cc": [shutil.which(c) for c in ("cc", "gcc", os.environ.get("CC", "cc"))],
                  "kcc": kcc.__file__, "prefix": sys.prefix}))
"""


class WheelCheckError(Exception):
    """The wheel did not build, install or speak; the message carries the failing command's output."""


@dataclass
class Dist:
    wheel: Path
    sdist: Path


@dataclass
class Spoken:
    seconds: float          # process start to exit, the WAV written
    wav: Path
    duration: float         # of the audio
    rms: float
    log: str


def _run(cmd: list[str], what: str, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if proc.returncode != 0:
        raise WheelCheckError(f"{what} failed ({proc.returncode}): {' '.join(map(str, cmd))}\n"
                              f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def build(out: Path, isolation: bool = True) -> Dist:
    """`python -m build`: the sdist, then the wheel built from it (its prebuilt libraries compiled)."""
    cmd = [sys.executable, "-m", "build", "-o", str(out), str(ROOT)]
    _run(cmd if isolation else [*cmd, "--no-isolation"], "python -m build")
    wheels, sdists = sorted(out.glob("kcc-*.whl")), sorted(out.glob("kcc-*.tar.gz"))
    if len(wheels) != 1 or len(sdists) != 1:
        raise WheelCheckError(f"{out}: expected one wheel and one sdist, found {wheels + sdists}")
    return Dist(wheels[0], sdists[0])


def prebuilt_machines(wheel: Path) -> dict[str, dict]:
    """machine -> its prebuilt table, as the wheel carries them."""
    with zipfile.ZipFile(wheel) as z:
        return {Path(n).parent.name: json.loads(z.read(n)) for n in z.namelist()
                if n.startswith("kcc/prebuilt/") and n.endswith("/table.json")}


def _outside() -> dict[str, str]:
    """This environment without what would put a checkout on the child's sys.path (pip would
    take a checkout's kcc.egg-info for kcc installed)."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}


def make_venv(where: Path, wheel: Path, deps: str) -> Path:
    """A venv at `where` holding the wheel; returns its python."""
    _run([sys.executable, "-m", "venv", str(where)], "venv", env=_outside(), cwd=where.parent)
    py = where / "bin" / "python"
    pip = [str(py), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if deps == "index":
        _run([*pip, str(wheel)], "pip install (dependencies from the index)", env=_outside(), cwd=where.parent)
    elif deps == "shared":
        _run([*pip, "--no-deps", str(wheel)], "pip install --no-deps", env=_outside(), cwd=where.parent)
        site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                         "venv site", env=_outside(), cwd=where.parent).stdout.strip())
        ours = [p for p in sys.path if p.endswith("site-packages")]
        (site / "zz_shared_dependencies.pth").write_text("\n".join(ours) + "\n")
    else:
        raise ValueError(f"deps must be 'index' or 'shared', not {deps!r}")
    return py


def warm_real_weights() -> Path:
    """The warm cache's real/ (the fetched weights), fetched now if absent."""
    from kcc.weights import real_model
    files = real_model.fetch(log=sys.stderr)
    return Path(files["onnx"]).parent


def seed_cache(cache: Path, real: Path) -> None:
    """A fresh cache holding only the fetched weights and voices: `real`'s files hard-linked (copied
    across file systems) into real directories of its own, since kcc refuses a cache directory that
    is a symbolic link (kcc.cache_trust)."""
    for src_dir, dst_dir in ((real, cache / "real"), (real / "voices", cache / "real" / "voices")):
        if not src_dir.is_dir():
            continue
        dst_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        for f in src_dir.iterdir():
            if not f.is_file() or f.name.startswith(".") or f.suffix == ".pth":
                continue
            try:
                os.link(f, dst_dir / f.name)
            except OSError:
                shutil.copy2(f, dst_dir / f.name)


def clean_env(venv: Path, cache: Path, compiler: bool) -> dict[str, str]:
    env = {k: v for k, v in _outside().items() if not k.startswith("KCC_") and k != "CC"}
    path = [str(venv / "bin")]
    if compiler:
        path.append(str(Path(shutil.which(os.environ.get("CC", "cc")) or "/usr/bin/cc").parent))
    env.update(PATH=os.pathsep.join(path), KCC_CACHE_DIR=str(cache), HOME=str(cache.parent))
    return env


def speak(venv: Path, real: Path, work: Path, compiler: bool, prebuilt: bool = True, text: str = TEXT) -> Spoken:
    """First `kcc say` of a fresh cache holding only the real weights (prebuilt=False: with
    KCC_PREBUILT=0, compiling as a checkout does)."""
    tag = ("cc" if compiler else "nocc") + ("" if prebuilt else "-compiled")
    cache = work / f"cache-{tag}"
    cache.mkdir(mode=0o700, parents=True)
    seed_cache(cache, real)
    env = clean_env(venv, cache, compiler)
    if not prebuilt:
        env["KCC_PREBUILT"] = "0"
    probe = json.loads(_run([str(venv / "bin" / "python"), "-c", _PROBE], "probe", env=env, cwd=work).stdout)
    if not compiler and any(probe["cc"]):
        raise WheelCheckError(f"a C compiler is still on PATH: {probe['cc']}")
    if compiler and not probe["cc"][0]:
        raise WheelCheckError("no C compiler found for the with-compiler run")
    if not Path(probe["kcc"]).resolve().is_relative_to(venv.resolve()):
        raise WheelCheckError(f"kcc was imported from {probe['kcc']}, not from the venv {venv}")
    wav = work / f"{tag}.wav"
    t0 = time.perf_counter()
    proc = _run([str(venv / "bin" / "kcc"), "say", text, "-o", str(wav)], "kcc say", env=env, cwd=work)
    seconds = time.perf_counter() - t0
    with wave.open(str(wav)) as w:
        audio = np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16).astype(np.float64) / 32768
        duration = w.getnframes() / w.getframerate()
    return Spoken(seconds, wav, duration, float(np.sqrt(np.mean(audio ** 2))) if audio.size else 0.0,
                  proc.stderr)


def report(dist: Dist, deps: str, install_s: float, runs: dict[str, Spoken]) -> str:
    commit = short_commit() or "unknown"
    tables = prebuilt_machines(dist.wheel)
    lines = ["# The wheel: size, and the first `kcc say` after installing it", "",
             f"CPU: {cpu_name()} ({os.cpu_count()} cores); commit {commit}; scripts/wheel_check.py --deps {deps}.", "",
             "First `kcc say \"" + TEXT + "\"` from a fresh cache holding only the already-fetched real",
             "weights: process start to the WAV written.", "",
             "| run | seconds | audio s | what it did |", "|---|---:|---:|---|"]
    for name, s in runs.items():
        did = "packed the weights for the prebuilt libraries" if "prebuilt stage libraries" in s.log else "compiled"
        lines.append(f"| {name} | {s.seconds:.1f} | {s.duration:.2f} | {did} |")
    lines += ["", "| file | bytes |", "|---|---:|",
              f"| {dist.wheel.name} | {dist.wheel.stat().st_size:,} |",
              f"| {dist.sdist.name} | {dist.sdist.stat().st_size:,} |", "",
              f"Installing the wheel into a clean venv ({deps}): {install_s:.1f} s.",
              "Prebuilt machines in the wheel: "
              + ", ".join(f"{m} ({len(t['libraries'])} libraries)" for m, t in tables.items()) + "."]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deps", choices=("index", "shared"), default="index")
    ap.add_argument("--no-isolation", action="store_true", help="build with this venv's setuptools and numpy")
    ap.add_argument("--with-compiler", action="store_true",
                    help="also time a first say with a compiler on PATH: with the prebuilt libraries, and compiling")
    ap.add_argument("--out", type=Path, help="write the markdown report here (bench/results/...)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kcc-wheel-") as tmp:
        work = Path(tmp)
        t0 = time.perf_counter()
        dist = build(work / "dist", isolation=not args.no_isolation)
        print(f"built {dist.wheel.name} ({dist.wheel.stat().st_size:,} B) and {dist.sdist.name} "
              f"({dist.sdist.stat().st_size:,} B) in {time.perf_counter() - t0:.0f} s", flush=True)
        real = warm_real_weights()
        t0 = time.perf_counter()
        venv = work / "venv"
        make_venv(venv, dist.wheel, args.deps)
        install_s = time.perf_counter() - t0
        runs = {"no C compiler on PATH": speak(venv, real, work, compiler=False)}
        if args.with_compiler:
            runs["a C compiler on PATH"] = speak(venv, real, work, compiler=True)
            runs["a C compiler on PATH, KCC_PREBUILT=0"] = speak(venv, real, work, compiler=True,
                                                                 prebuilt=False)
        for name, s in runs.items():
            if s.duration < 0.5 or s.rms < 0.01:
                raise WheelCheckError(f"{name}: {s.wav} is not speech ({s.duration:.2f} s, rms {s.rms:.4f})\n{s.log}")
        text = report(dist, args.deps, install_s, runs)
        print(text)
        if args.out:
            args.out.write_text(text, encoding="utf-8")
    return 0


if __name__ == "__main__":
    try:
        raise SystemExit(main())
    except WheelCheckError as exc:
        print(f"wheel check: FAIL: {exc}", file=sys.stderr)
        raise SystemExit(1)
