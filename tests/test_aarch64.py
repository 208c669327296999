"""The generated C on aarch64 (scripts/aarch64_parity.py): cross-compiled with Debian's
gcc-aarch64-linux-gnu under the strict flags, run under qemu-user, X-Rayed against the same
pinned captures as on x86-64. Skipped, with the reason, where the cross tools are absent."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
try:
    import aarch64_parity as ap
finally:
    sys.path.pop(0)

pytestmark = pytest.mark.tools("aarch64-linux-gnu-gcc", "qemu-aarch64")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return ap.parity_reports(tmp_path_factory.mktemp("aarch64"))


@pytest.mark.parametrize("name, checkpoints", [("phoneme_encoder", 27), ("generator", 12), ("istft", 1)])
def test_aarch64_build_holds_the_gate(reports, name, checkpoints):
    """Every checkpoint at its gate (the circuit's documented one, else FP32); the generator
    teacher-forced at the STFT as on x86 (tests/test_generator.py), its waveform included."""
    from kcc.compiler.xray import render
    report = reports[name]
    assert len(report.results) == checkpoints
    for r in report.results:
        assert r.status in ("PASS", "INJECTED"), render(report)
    assert [r.name for r in report.results if r.status == "INJECTED"] == (
        ["kokoro.generator.har"] if name == "generator" else [])


def _run_aarch64(tmp_path, body: str, *defines: str) -> subprocess.CompletedProcess:
    from kcc.compiler.emit import COMMON_HEADER
    src = tmp_path / "t.c"
    src.write_text(COMMON_HEADER.read_text() + "#include <stdio.h>\n" + body)
    exe = tmp_path / "t"
    build = subprocess.run([ap.CROSS_CC, *ap.CROSS_FLAGS, *defines, "-o", str(exe), str(src), "-lm"],
                           capture_output=True, text=True)
    if build.returncode != 0:
        return build
    return subprocess.run([ap.QEMU, "-L", ap.SYSROOT, str(exe)], capture_output=True, text=True)


def test_aarch64_has_no_x86_dispatch(tmp_path):
    """kcc_isa_level() says 'generic' (-1) there, and a forced x86 level stops the compile."""
    ok = _run_aarch64(tmp_path, 'int main(void) { printf("%d\\n", kcc_isa_level()); return 0; }\n')
    assert ok.returncode == 0 and ok.stdout.strip() == "-1", ok.stderr
    forced = _run_aarch64(tmp_path, "int main(void) { return kcc_isa_level(); }\n", "-DKCC_ISA_LEVEL=2")
    assert forced.returncode != 0 and "forces a portable x86-64" in forced.stderr


def test_neon_vectorises_the_gemm_tile(tmp_path):
    """GCC's -O2 vectorises the GEMM micro-kernel for NEON (16-byte vectors) from the same source."""
    from kcc.kernels.registry import get_kernel
    from kcc.compiler.emit import COMMON_HEADER
    src = tmp_path / "gemm.c"
    src.write_text(COMMON_HEADER.read_text() + get_kernel("kcc_gemm_tile_f32").c_source()
                   + "void t(const float *a, const float *b, float *c) { kcc_gemm_packed_f32(a, 64, 8, b, 64, 32, c, 32, 1); }\n")
    proc = subprocess.run([ap.CROSS_CC, *ap.CROSS_FLAGS, "-c", "-fopt-info-vec-optimized", str(src), "-o",
                           str(tmp_path / "gemm.o")], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    tiles = 1 + src.read_text().splitlines().index("KCC_GEMM_TILES(_f32, KCC_MADD)")   # the tiles' expansion line
    assert f"gemm.c:{tiles}:1: optimized: loop vectorized using 16 byte vectors" in proc.stderr, proc.stderr
