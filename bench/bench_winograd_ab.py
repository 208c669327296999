"""Whole syntheses with and without kcc.compiler.passes.winograd_convs (K = 3 convs as Winograd
F(m, 3)), interleaved in one process, each timed run gated on quiet cores (bench_short.wait_quiet),
best of --rounds, at 1 and 2 threads: the ops the pass rewrote (per kind as the direct build runs
them: stage, op, kernel, output shape) and the whole synthesis.

    python bench/bench_winograd_ab.py [--model seeded|real] [--lengths 16,64] [--rounds 5] [--isa avx512]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
import bench_short as bs  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=("seeded", "real"), default="seeded")
    ap.add_argument("--lengths", default="16,64")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--isa", default=None)
    ap.add_argument("--quiet-wait", type=float, default=20.0)
    a = ap.parse_args(argv)
    bs.QUIET["max_wait_s"] = a.quiet_wait
    from kcc.compiler import passes
    from kcc.compiler.build import BuildOptions
    opts = BuildOptions(profile=True, isa=a.isa)
    saved = passes.DEFAULT_PASSES
    passes.DEFAULT_PASSES = [p for p in saved if p is not passes.winograd_convs]   # what the driver reads
    try:
        synth = {"direct": bs.build(a.model, opts)}
    finally:
        passes.DEFAULT_PASSES = saved
    synth["winograd"] = bs.build(a.model, opts)
    cases, style = bs.inputs(a.model, [int(n) for n in a.lengths.split(",") if n], [])
    print(f"# bench_winograd_ab: model {a.model}, isa {a.isa or 'portable'}, {a.rounds} rounds, "
          f"load {' '.join(bs.load())} at the start")
    for label, ids in cases:
        ref_s = style(len(ids))
        best, env = bs.rounds(synth, ids, ref_s, a.rounds)
        wave = {v: bs.timed(synth[v], ids, ref_s, 2)[2]["waveform"].copy() for v in synth}
        kinds = bs.op_kinds(synth["direct"], env)
        rewritten = {(s, op.name) for s, c in synth["winograd"].circuits.items() for op in c.graph.ops
                     if op.type == "winograd_conv1d"}
        print(f"\n## {label}: {int(env['durations'].sum())} frames; waveform max-abs difference "
              f"{float(np.abs(wave['direct'] - wave['winograd']).max()):.2e}\n")
        print("| stage | op | kernel | output shape | calls | direct 1t | winograd 1t | direct 2t | winograd 2t | x 2t |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for key, ops in sorted(kinds.items(), key=lambda kv: -best.kind_ms(("direct", 1), kv[1])):
            if not set(ops) & rewritten:
                continue
            m = [best.kind_ms((v, t), ops) for t in (1, 2) for v in ("direct", "winograd")]
            print(f"| {' | '.join(key)} | {len(ops)} | {m[0]:.2f} | {m[1]:.2f} | {m[2]:.2f} | {m[3]:.2f} | "
                  f"x{m[2] / max(m[3], 1e-9):.2f} |")
        w = {k: best.wall[k] * 1e3 for k in best.wall}
        print(f"\nwhole synthesis, best of {a.rounds}: direct {w[('direct', 1)]:.1f} / {w[('direct', 2)]:.1f} ms, "
              f"winograd {w[('winograd', 1)]:.1f} / {w[('winograd', 2)]:.1f} ms (1 / 2 threads): "
              f"x{w[('direct', 2)] / w[('winograd', 2)]:.3f} at 2 threads")
    print(f"\nload {' '.join(bs.load())} at the end; {bs.quiet_note()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
