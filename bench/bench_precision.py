"""fp32 against a reduced compute precision, interleaved in one process: the speed ratio on a shared machine.

Both Synthesizers (the seeded full-config checkpoint, oracle.checkpoints.test_checkpoint('full', 0), the
portable build, --isa forcing a dispatch level) stay loaded; each round runs every length on each
precision in turn (the order alternating by round), and a ratio is taken within a round, so a noisy
neighbour slows both alike. Prints per-length medians and ratios, and per-stage medians (what
bench/results/precision.md explains the ratio with). bench/bench_synth.py --precision gives the
sequential runs with peak RSS; bench/precision_gate.py the listening gate.

    python bench/bench_precision.py [--precision bf16] [--isa avx512] [--lengths 16,64,160] [--rounds 5]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision", default="bf16")
    ap.add_argument("--isa", default=None)
    ap.add_argument("--lengths", default="16,64,160")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json")
    a = ap.parse_args(argv)
    from kcc.compiler.build import BuildOptions
    from kcc.compiler.isa import library_level
    from kcc.model.pipeline import Synthesizer
    from oracle.checkpoints import test_checkpoint
    lengths = [int(n) for n in a.lengths.split(",")]
    rng = np.random.default_rng(0)
    ids = {n: [int(i) for i in rng.integers(1, 178, n)] for n in lengths}   # seeded, uniform over the vocab
    ref_s = (rng.standard_normal((1, 256)) * 0.1).astype(np.float32)
    ckpt = test_checkpoint("full", 0)
    synth = {}
    for p in ("fp32", a.precision):
        synth[p] = Synthesizer(ckpt, BuildOptions(isa=a.isa, precision=p), max_frames=2000)
        synth[p].set_threads(a.threads)
        synth[p].synthesize(ids[lengths[0]], ref_s)                           # warm-up
    level = {p: ",".join(sorted({library_level(c.lib) for c in s.circuits.values()})) for p, s in synth.items()}
    ms = {p: {n: [] for n in lengths} for p in synth}
    stages = {p: {n: [] for n in lengths} for p in synth}
    for r in range(a.rounds):
        for n in lengths:
            for p in (list(synth) if r % 2 == 0 else list(synth)[::-1]):
                t0 = time.perf_counter()
                out = synth[p].synthesize(ids[n], ref_s)
                ms[p][n].append((time.perf_counter() - t0) * 1e3)
                stages[p][n].append(out.seconds)
    print(f"levels {level}, {a.threads} threads, {a.rounds} rounds, load {Path('/proc/loadavg').read_text().split()[:3]}")
    result = {"precision": a.precision, "isa": a.isa, "levels": level, "lengths": {}}
    for n in lengths:
        q = [x / y for x, y in zip(ms["fp32"][n], ms[a.precision][n])]
        per = {p: {st: statistics.median(s[st] for s in stages[p][n]) * 1e3 for st in stages[p][n][0]} for p in synth}
        result["lengths"][n] = {"fp32_ms": statistics.median(ms["fp32"][n]),
                                f"{a.precision}_ms": statistics.median(ms[a.precision][n]),
                                "speedup_median": statistics.median(q), "speedup_min": min(q), "speedup_max": max(q),
                                "stages_ms": per}
        print(f"{n} ids: fp32 {statistics.median(ms['fp32'][n]):.0f} ms, {a.precision} "
              f"{statistics.median(ms[a.precision][n]):.0f} ms, speed-up x{statistics.median(q):.2f} "
              f"({min(q):.2f} - {max(q):.2f})")
        for st in per["fp32"]:
            print(f"    {st:28s} {per['fp32'][st]:7.1f} ms  {per[a.precision][st]:7.1f} ms  "
                  f"x{per['fp32'][st] / max(per[a.precision][st], 1e-9):.2f}")
    if a.json:
        Path(a.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
