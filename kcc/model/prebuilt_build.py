"""Compile the default model's stage libraries for a wheel (kcc/prebuilt/<machine>/), from its
structure alone.

setup.py runs this when it builds a wheel, without network and without the weights: the real
import's checkpoint is rebuilt with zero values (onnx_kokoro.skeleton(): the same tensors, shapes
and int8 provenance), each stage is lowered and emitted as a first `kcc say` would with nothing
set (default_options(), DEFAULT_MAX_FRAMES, every stage), and that C is compiled for
  x86_64   with the host's C compiler (CC, else cc), on an x86-64 host,
  aarch64  with the cross compiler (KCC_CROSS_CC, else aarch64-linux-gnu-gcc) where installed,
           or the host's compiler on an aarch64 host,
with the same flags: the C is the same text on both (x86 code only inside its dispatch guards).
An install finds a library by its source and flags (kcc.compiler.prebuilt), so C that the real
weights made different from the skeleton's would compile rather than load another's library.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from kcc.circuits import load_circuit
from kcc.compiler import prebuilt
from kcc.compiler.build import BuildOptions, compile_to, compiler, compiler_identity, release_options
from kcc.compiler.driver import generated_source
from kcc.model.pipeline import BACK, DEFAULT_MAX_FRAMES, FRONT, stage_dims
from kcc.weights.importers.onnx_kokoro import skeleton

CROSS_CC = os.environ.get("KCC_CROSS_CC", "aarch64-linux-gnu-gcc")


def default_options() -> BuildOptions:
    """`kcc say`'s build with no option or KCC_* variable set: release_options(), fp32, portable
    with the CPU's run-time dispatch (KCC_ISA / KCC_PRECISION / KCC_SANITIZE of the building shell
    do not leak into it)."""
    return release_options(isa="auto", precision="fp32", sanitize=False)


def targets() -> dict[str, str]:
    """machine -> the compiler that builds its libraries here."""
    host = prebuilt.machine()
    found = {host: compiler()}
    if host in ("x86_64", "amd64") and shutil.which(CROSS_CC):
        found["aarch64"] = CROSS_CC
    return found


def stage_sources(options: BuildOptions, max_frames: int = DEFAULT_MAX_FRAMES, log=sys.stderr) -> dict[str, str]:
    """stage -> its generated C for the real model's structure."""
    ckpt = skeleton()
    sources = {}
    for name in FRONT + BACK:
        if log is not None:
            print(f"kcc prebuilt: emitting {name}", file=log, flush=True)
        doc = load_circuit(name)
        sources[name] = generated_source(doc, ckpt, options, dims=stage_dims(doc, max_frames))
    return sources


def build(out: Path, log=sys.stderr) -> dict[str, Path]:
    """Write out/<machine>/ for every target; machine -> its directory."""
    options = default_options()
    flags = options.flags()
    sources = stage_sources(options, log=log)
    compilers = targets()
    made = {}
    with tempfile.TemporaryDirectory(prefix="kcc-prebuilt-") as tmp:
        jobs = []
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            for machine, cc in compilers.items():
                for stage, source in sources.items():
                    src = Path(tmp) / f"{machine}-{stage}.c"
                    src.write_text(source, encoding="utf-8")
                    lib = src.with_suffix(".so")
                    jobs.append((machine, stage, lib, pool.submit(compile_to, cc, flags, src, lib, stage)))
            for *_, job in jobs:
                job.result()
        for machine, cc in compilers.items():
            libs = [(stage, sources[stage], lib) for m, stage, lib, _ in jobs if m == machine]
            identity = compiler_identity(cc).splitlines()[0]
            made[machine] = prebuilt.write(out, machine, identity, flags, libs)
            if log is not None:
                print(f"kcc prebuilt: {len(libs)} stage libraries for {machine} ({identity}) in {made[machine]}",
                      file=log, flush=True)
    return made
