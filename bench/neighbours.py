#!/usr/bin/env python3
"""Warm `kcc say` of one sentence beside busy neighbours: quiet, with 1 and with 2 busy loops.

Every process of a user's machine competes for the cores; kcc's kernels meet at an OpenMP
barrier after every op, so a thread the OS has descheduled holds the others there (and a
spinning waiter takes the very core the late thread needs). For each neighbour case (0, 1, 2
`python -c "while True: pass"` loops) this runs each configuration as a fresh `kcc say TEXT -o
x.wav` process, all configurations interleaved round by round (so a shared machine's drift hits
all alike), and reports the median and range of the wall times.

Configurations (environment and flags of the kcc say process):
  default        kcc's own choice (no variable set)
  gomp-default   OMP_WAIT_POLICY="" (empty: libgomp's own default, spin ~0.3 M rounds then sleep;
                 what kcc did before it set a policy)
  threads1       --threads 1
  passive        OMP_WAIT_POLICY=passive
  active         OMP_WAIT_POLICY=active

Usage: python bench/neighbours.py [--rounds 5] [--configs default,threads1,...] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.machine import cpu_label  # noqa: E402

TEXT = "The quick brown fox jumps over the lazy dog near the river bank."
CONFIGS = {
    "default": ({}, []),
    "gomp-default": ({"OMP_WAIT_POLICY": ""}, []),
    "threads1": ({}, ["--threads", "1"]),
    "passive": ({"OMP_WAIT_POLICY": "passive"}, []),
    "active": ({"OMP_WAIT_POLICY": "active"}, []),
}


def say_seconds(config: str, out: Path, text: str) -> float:
    env_add, flags = CONFIGS[config]
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS", "GOMP_SPINCOUNT")}
    env.update(env_add, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "kcc.cli", "say", text, "-o", str(out), *flags], env=env, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--configs", default="default,gomp-default,threads1,passive,active")
    ap.add_argument("--neighbours", default="0,1,2")
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--json")
    a = ap.parse_args()
    configs = a.configs.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "x.wav"
        say_seconds("default", out, a.text)                 # the artifact and pages warm
        results = {}
        for n in (int(x) for x in a.neighbours.split(",")):
            loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
            try:
                times = {c: [] for c in configs}
                for _ in range(a.rounds):
                    for c in configs:
                        times[c].append(say_seconds(c, out, a.text))
            finally:
                for p in loops:
                    p.kill()
                    p.wait()
            results[n] = times
    doc = {"cpu": cpu_label(), "text": a.text, "rounds": a.rounds, "load_before": os.getloadavg(), "results": results}
    print(f"warm `kcc say` of one sentence ({len(a.text)} chars), wall seconds, median [min-max] of {a.rounds} "
          f"interleaved runs; {doc['cpu']}")
    print("| busy neighbours | " + " | ".join(configs) + " |")
    print("| --- |" + " --- |" * len(configs))
    for n, times in results.items():
        cells = [f"{statistics.median(t):.2f} [{min(t):.2f}-{max(t):.2f}]" for t in times.values()]
        print(f"| {n} | " + " | ".join(cells) + " |")
    if a.json:
        Path(a.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
