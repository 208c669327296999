"""What the product compiles (kcc.compiler.build.release_options): -O3, portable or native.

- -O3 gives the bits of -O2 (no FP contraction or reassociation in ISO C mode), so the suite,
  which builds at -O2 for compile time, checks what ships: the hot ops' cases, bit for bit.
- A native build (-march=native) keeps the GEMM tile's schedule: the panel rows it multiplies
  stay in registers, one load feeding every row's FMA. GCC's znver3 tuning (what -march=native
  picks on a Zen 3, and GCC 12 on a Zen 4) folds the tile's panel loads into each FMA as a memory
  operand: 12 loads per 8 FMAs, load-port bound (55 vs 74 GFLOP/s on one Zen 3 core,
  bench/results/native_tuning.md). Native builds therefore tune generically; the tile is compiled
  as such a build would be on a Zen 3 (-march=znver3 for -march=native, so any x86-64 host checks
  it) and its assembly read.
"""
from __future__ import annotations

import platform
import re
import subprocess

import numpy as np
import pytest

from kcc.compiler.build import RELEASE_OPT, BuildOptions, compiler, release_options
from kcc.compiler.one_op import compile_op, run_cases
from kcc.kernels.registry import C_DIR as KERNEL_DIR
from kcc.ops import OPS

X86_64 = platform.machine() in ("x86_64", "AMD64")
# The kernels -O3 compiles differently enough to matter (the conv algorithms, the AdaIN rows, the
# GEMM, the signal ops): each op's cases at -O2 and at RELEASE_OPT.
HOT_OPS = ("dft_conv1d", "winograd_conv1d", "adain", "adain_conv1d", "conv1d", "conv_transpose1d", "linear",
           "harmonic_source", "stft", "istft", "bilstm", "attention")


def test_release_options_are_the_o3_build():
    assert RELEASE_OPT == "-O3"
    assert release_options().flags() == BuildOptions(opt="-O3").flags()
    assert "-march=native" in release_options(native=True).flags()


@pytest.mark.parametrize("op", HOT_OPS)
def test_release_build_gives_the_bits_of_the_test_build(op):
    cases = OPS[op].cases()
    o2 = run_cases(compile_op(op, cases, BuildOptions()), cases)
    o3 = run_cases(compile_op(op, cases, release_options()), cases)
    for case, a, b in zip(cases, o2, o3):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert np.array_equal(a, b, equal_nan=True), f"{op} {case.name}: -O2 and {RELEASE_OPT} differ"


PROBE = """#include "kcc_common.h"
#include "gemm_tile_f32.c"
void probe(const float *a, const float *b, float *c, long mr, long nr);
void probe(const float *a, const float *b, float *c, long mr, long nr)
{
    kcc_gemm_tile_f32(a, 64, mr, b, 64 * KCC_GEMM_NR, 64, c, 32, nr, 1);
}
"""
# An FMA reading memory other than a broadcast scalar ({1toN}: the A element, fine): a panel load.
PANEL_OPERAND = re.compile(r"^\s*vfmadd\w+ps\s+[-\w]*\([^)]*\),", re.M)


def tile_fmas(tmp_path, extra: list[str]) -> tuple[int, int]:
    """(FMAs, FMAs with a panel operand from memory) in the AVX2 half-panel tile of a native build
    for a Zen 3, with `extra` flags appended."""
    src = tmp_path / "probe.c"
    src.write_text(PROBE)
    flags = [("-march=znver3" if f == "-march=native" else f) for f in BuildOptions(native=True, opt="-O3").flags()
             if f not in ("-shared", "-fPIC", "-fopenmp")]
    asm = tmp_path / "probe.s"
    got = subprocess.run([compiler(), *flags, *extra, f"-I{KERNEL_DIR}", "-S", "-o", str(asm), str(src)],
                         capture_output=True, text=True)
    if got.returncode != 0 and "znver3" in got.stderr:
        pytest.skip(f"{compiler()} does not know -march=znver3")
    assert got.returncode == 0, got.stderr
    text = asm.read_text()
    start = text.index("kcc_gemm_tile4h_")
    body = text[start:text.index(".size", start)]
    fmas = re.findall(r"^\s*vfmadd\w+ps\s+.*$", body, re.M)
    return len(fmas), len([f for f in fmas if PANEL_OPERAND.match(f) and "1to" not in f])


@pytest.mark.skipif(not X86_64, reason="x86-64 tuning")
def test_native_build_keeps_the_panel_rows_in_registers(tmp_path):
    fmas, from_memory = tile_fmas(tmp_path, [])
    assert fmas >= 8                        # 4 rows x 2 half-panels a k step
    assert from_memory == 0


@pytest.mark.skipif(not X86_64, reason="x86-64 tuning")
def test_the_check_sees_the_znver3_schedule(tmp_path):
    """The control: with GCC's znver3 tuning the same tile reads every panel operand from memory."""
    fmas, from_memory = tile_fmas(tmp_path, ["-mtune=znver3"])
    assert fmas >= 8 and from_memory == fmas
