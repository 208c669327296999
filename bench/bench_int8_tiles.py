"""int8 GEMM tiles against the f32 GEMM, one thread: G multiply-adds/s per dispatch path this CPU runs.

Usage: python bench/bench_int8_tiles.py [--n 1024] [--rounds 5]

kcc_gemm_u8s8_s32 (the int8 tiles of kcc/kernels/c/gemm_tile_s8.c as a whole GEMM: u8 x s8, exact
s32 sums) at each forced dispatch level this CPU can execute, the path it took named
(kcc_s8_path: ISO C, avx2, avx-vnni, avx512-vnni), against kcc_linear_f32 at the same level
(measure_roofline's GEMM, n^3); portable -O3 builds, interleaved, best of --rounds.
"""
from __future__ import annotations

import argparse
import ctypes
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kcc.compiler.build import build_library, release_options  # noqa: E402
from kcc.compiler.isa import runnable_levels  # noqa: E402
from kcc.compiler.report import measure_roofline  # noqa: E402
from kcc.kernels.registry import COMMON_HEADER, get_kernel, with_requires  # noqa: E402
from kcc.ops.conv_int8 import s8_panels  # noqa: E402

PATHS = {0: "ISO C", 1: "avx2 (vpmaddwd)", 2: "avx-vnni (vpdpbusd ymm)", 3: "avx512-vnni (vpdpbusd zmm)"}


def int8_gemm(level: str):
    src = ["#include <stddef.h>", "#include <stdint.h>", "#include <string.h>",
           '#pragma GCC diagnostic ignored "-Wunused-function"', COMMON_HEADER.read_text()]
    src += [get_kernel(k).c_source() for k in with_requires(["kcc_gemm_u8s8_s32"])]
    src.append("""
int b_gemm(const int32_t *a, int64_t rows, int64_t kq, const float *b, int64_t n, int32_t *c)
{
#ifdef _OPENMP
    omp_set_num_threads(1);
#endif
    return kcc_gemm_u8s8_s32(a, rows, kq, b, n, c);
}
int b_path(void) { return kcc_s8_path(); }
""")
    lib = ctypes.CDLL(str(build_library("\n".join(src), release_options(isa=level), name="bench_gemm_s8").library))
    lib.b_gemm.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                           ctypes.c_void_p]
    return lib


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args(argv)
    n = a.n
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (n, n), dtype=np.uint8)
    w = rng.integers(-127, 128, (n, n), dtype=np.int8)
    b = np.ascontiguousarray(s8_panels(w.reshape(n, n // 16, 16).transpose(1, 0, 2)))
    c = np.empty((n, n), np.int32)
    levels = [lv for lv in runnable_levels() if lv != "avx2"]      # avx2 runs avx2fma's int8 tiles
    libs = {lv: int8_gemm(lv) for lv in levels}
    best = {lv: float("inf") for lv in levels}
    f32 = {lv: 0.0 for lv in levels}
    for _ in range(a.rounds):
        for lv, lib in libs.items():
            t0 = time.perf_counter()
            assert lib.b_gemm(x.ctypes.data, n, n // 4, b.ctypes.data, n, c.ctypes.data) == 0
            best[lv] = min(best[lv], time.perf_counter() - t0)
            r = measure_roofline(1, triad_floats=1 << 10, gemm_n=n, reps=1, options=release_options(isa=lv))
            f32[lv] = max(f32[lv], r.peak / 2)
    assert np.array_equal(c.astype(np.int64), x.astype(np.int64) @ w.astype(np.int64))
    print(f"| level | int8 tiles | int8 G multiply-adds/s | f32 G multiply-adds/s | int8 / f32 |  ({n}^3, 1 thread, "
          f"best of {a.rounds})")
    print("|---|---|---|---|---|")
    for lv, lib in libs.items():
        i8 = n ** 3 / best[lv] / 1e9
        print(f"| {lv} | {PATHS[lib.b_path()]} | {i8:.1f} | {f32[lv] / 1e9:.1f} | x{i8 / (f32[lv] / 1e9):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
