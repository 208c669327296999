"""Parity of the generated C on aarch64: cross-compiled with Debian's gcc-aarch64-linux-gnu, run
under qemu-user, compared with the same pinned captures as on x86-64.

Each circuit is compiled here as usual (its C source is the same text on every architecture);
`QemuCircuit` keeps that circuit's graph, plan and weights but replaces the ctypes call with
scripts/aarch64_harness.c, cross-compiled with the circuit's C (strict flags, -Werror: an x86
attribute or intrinsic outside its guard would stop the build), which reads inputs, weights and
injected checkpoints from files and writes outputs and checkpoints back. Everything above the
call (dims, shapes, X-Ray, teacher forcing) is kcc's own code, so the comparison is the one the
x86 tests make. Speed under qemu means nothing: not measured.

Usage: python scripts/aarch64_parity.py   (prints each circuit's X-Ray; exit 1 on a FAIL)
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kcc.compiler.build import STRICT_FLAGS, Built  # noqa: E402
from kcc.compiler.abi import symbol_prefix  # noqa: E402
from kcc.compiler.runtime import CompiledCircuit  # noqa: E402

HARNESS = Path(__file__).resolve().with_name("aarch64_harness.c")
CROSS_CC = os.environ.get("KCC_CROSS_CC", "aarch64-linux-gnu-gcc")
QEMU = os.environ.get("KCC_QEMU", "qemu-aarch64")
SYSROOT = os.environ.get("KCC_CROSS_SYSROOT", "/usr/aarch64-linux-gnu")
# The library path's numeric flags (kcc export uses the same); -O2 vectorises for NEON.
CROSS_FLAGS = [*STRICT_FLAGS, "-fno-math-errno"]


class CrossError(Exception):
    """The cross toolchain or qemu is missing, refused the code, or the harness failed."""


def missing_tools() -> list[str]:
    return [t for t in (CROSS_CC, QEMU) if shutil.which(t) is None]


def cross_compile(source: str, prefix: str, out: Path, extra: tuple[str, ...] = ()) -> Path:
    src = out.with_suffix(".c")
    src.write_text(source, encoding="utf-8")
    cmd = [CROSS_CC, *CROSS_FLAGS, *extra, f"-DKCC_ENTRY={prefix}_run", "-o", str(out), str(src), str(HARNESS), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CrossError(f"{CROSS_CC} refused {prefix}:\n{proc.stderr[-4000:]}")
    return out


def link_library(library: Path, prefix: str, out: Path) -> Path:
    """The harness linked against an aarch64 stage library compiled elsewhere (a wheel's prebuilt
    one), found at run time beside it."""
    cmd = [CROSS_CC, *CROSS_FLAGS, f"-DKCC_ENTRY={prefix}_run", "-o", str(out), str(HARNESS), str(library),
           f"-Wl,-rpath,{Path(library).parent}", "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise CrossError(f"{CROSS_CC} could not link the harness against {library}:\n{proc.stderr[-4000:]}")
    return out


class QemuCircuit(CompiledCircuit):
    """A compiled circuit whose calls run the aarch64 build of its C under qemu-user (`program`:
    a harness already linked, e.g. by link_library; else its C is cross-compiled here)."""

    def __init__(self, compiled: CompiledCircuit, workdir: Path, program: Path | None = None):
        self.__dict__.update(compiled.__dict__)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        prefix = symbol_prefix(self.graph.name)
        self.program = program or cross_compile(self.source, prefix, self.workdir / f"{prefix}.aarch64")
        digest = hashlib.sha256(self.program.read_bytes()).hexdigest()
        self.built = Built(self.program, self.program.with_suffix(".c"), digest, digest[:32],
                           (CROSS_CC, *CROSS_FLAGS), False)
        self.library_path = str(self.program)

    def set_threads(self, n: int) -> int:
        return 1

    def call(self, inputs, dims, outputs, arena, weights=None, arena_bytes=None, checkpoints=None, inject=None):
        weights = self.weights if weights is None else weights
        with tempfile.TemporaryDirectory(dir=self.workdir) as tmp:
            d = Path(tmp)
            np.ascontiguousarray(weights).tofile(d / "weights.bin")
            spec = [weights.nbytes, arena.nbytes if arena_bytes is None else arena_bytes, len(dims), *dims]
            spec += [len(inputs), *(a.nbytes for a in inputs)]
            for i, a in enumerate(inputs):
                np.ascontiguousarray(a).tofile(d / f"in{i}.bin")
            spec += [len(outputs), *(a.nbytes for a in outputs)]
            cks = checkpoints or []
            spec.append(len(cks))
            for k, c in enumerate(cks):
                inj = None if inject is None else inject[k]
                spec += [0 if c is None else c.nbytes, 0 if inj is None else inj.nbytes]
                if inj is not None:
                    np.ascontiguousarray(inj).tofile(d / f"inject{k}.bin")
            (d / "spec.txt").write_text(" ".join(str(int(v)) for v in spec) + "\n")
            proc = subprocess.run([QEMU, "-L", SYSROOT, str(self.program), str(d)], capture_output=True, text=True)
            if proc.returncode != 0 or not proc.stdout.startswith("status "):
                raise CrossError(f"{self.program.name} under {QEMU}: rc {proc.returncode}\n{proc.stderr[-2000:]}")
            status, _, message = proc.stdout.strip()[len("status "):].partition(" ")
            if int(status) == 0:
                for i, a in enumerate(outputs):
                    a[...] = np.fromfile(d / f"out{i}.bin", dtype=a.dtype).reshape(a.shape)
                for k, c in enumerate(cks):
                    if c is not None:
                        c[...] = np.fromfile(d / f"ck{k}.bin", dtype=c.dtype).reshape(c.shape)
            return int(status), message


def parity_reports(workdir: Path):
    """X-Ray reports of the aarch64 build: phoneme encoder, generator (resblocks, conv_post and
    the iSTFT's waveform, teacher-forced at the STFT as on x86), and the polar iSTFT alone."""
    from kcc.weights.checkpoint import load_checkpoint
    from kcc.compiler.driver import compile_circuit
    from kcc.compiler.xray import compare, load_pinned, xray_compiled
    from oracle.checkpoints import test_checkpoint
    ckpt = load_checkpoint(test_checkpoint("small", 0))
    reports = {}
    enc = QemuCircuit(compile_circuit("kokoro_phoneme_encoder", ckpt), workdir)
    reports["phoneme_encoder"] = xray_compiled(enc, load_pinned("phoneme_encoder", "small"))
    gen = QemuCircuit(compile_circuit("kokoro_generator", ckpt), workdir)
    reports["generator"] = xray_compiled(gen, load_pinned("generator", "small"), inject=["kokoro.generator.har"])
    sig = load_pinned("signal_ops", "small")
    istft = QemuCircuit(compile_circuit(istft_circuit(), ckpt), workdir)
    got = istft.run({"x": sig.inputs["istft_polar_in"]}, with_checkpoints=True).checkpoints
    reports["istft"] = compare("t_istft_polar", {"y": sig.checkpoints["signal.istft_polar"]}, got, ["y"],
                               {"backend": "kcc", "arch": "aarch64"}, sig.meta)
    return reports


def istft_circuit() -> dict:
    """One polar iSTFT (n_fft 20, hop 5): the op tests/test_signal_ops.py checks on x86."""
    return {"schema": "kcc.circuit/1", "name": "t_istft_polar", "dims": {"T": {"min": 2, "max": 4096}},
            "inputs": [{"name": "x", "dtype": "f32", "shape": [1, "T", 22]}], "weights": {}, "outputs": ["y"],
            "blocks": [{"name": "b", "ops": [{"op": "istft", "in": {"x": "x"},
                                              "attrs": {"n_fft": 20, "hop": 5, "spec": "polar"}, "out": "y"}],
                        "checkpoints": [{"name": "y", "tensor": "y", "layout": "flat", "dtype": "f32", "axes": []}]}]}


def main() -> int:
    from kcc.compiler.xray import render
    if missing_tools():
        print(f"aarch64 parity: NOT_TESTED ({', '.join(missing_tools())} not installed: "
              "apt-get install gcc-aarch64-linux-gnu qemu-user)")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        reports = parity_reports(Path(tmp))
    failed = False
    for name, report in reports.items():
        print(render(report))
        bad = [r.name for r in report.results if r.status not in ("PASS", "INJECTED")]
        failed |= bool(bad)
        print(f"aarch64 {name}: {'FAIL ' + ', '.join(bad) if bad else 'PASS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
