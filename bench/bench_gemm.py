"""GEMM throughput (kcc_linear_f32, n^3, packed panels) per x86-64 dispatch level, 1 and N threads.

Usage: python bench/bench_gemm.py [--n 1024] [--threads 1,2] [--levels baseline,avx2,avx2fma,avx512]

Each level is a portable -O2 build forced to it (BuildOptions(isa=...), kcc/compiler/isa.py), plus the
-O3 -march=native build; the levels are interleaved, best of --rounds per level (a neighbour on a
shared machine slows a run, never speeds it). Prints GFLOP/s and the level each library ran.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kcc.compiler.build import BuildOptions  # noqa: E402
from kcc.compiler.isa import runnable_levels  # noqa: E402
from kcc.compiler.report import measure_roofline  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1024)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--levels", default=",".join(runnable_levels()))
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    builds = {lv: BuildOptions(openmp=True, isa=lv) for lv in a.levels.split(",") if lv}
    builds["native"] = BuildOptions(opt="-O3", native=True, openmp=True)
    best: dict = {}
    for _ in range(a.rounds):
        for th in (int(t) for t in a.threads.split(",")):
            for name, opts in builds.items():
                r = measure_roofline(th, triad_floats=1 << 10, gemm_n=a.n, reps=3, options=opts)
                key = (name, th)
                if key not in best or r.peak > best[key].peak:
                    best[key] = r
    print(f"| build | threads | GFLOP/s (kcc_linear_f32 {a.n}^3, best of {a.rounds}) | how |")
    print("|---|---|---|---|")
    for (name, th), r in best.items():
        print(f"| {name} | {th} | {r.peak / 1e9:.1f} | {r.how} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
