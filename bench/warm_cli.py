#!/usr/bin/env python3
"""Warm `kcc say` of one sentence and `kcc.Kokoro()`: wall and CPU time (user + system, the
process and its children), medians of interleaved runs of two checkouts, so a before / after
pair shares the shared machine's moments.

Usage: python bench/warm_cli.py --before CHECKOUT --after CHECKOUT [--runs 7] [--json OUT]

kokoro: a fresh interpreter times `import kcc` and `kcc.Kokoro()` inside (perf_counter; CPU from
time.process_time plus the children it reaped: a `cc --version` counts); the whole process by
os.wait4. say: `python -m kcc.cli say TEXT -o x.wav`, whole process. One warm-up run of each
first (the artifact is in the cache, the .pyc files written, the pages in the page cache).
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

TEXT = "Hello from generated C."
# A fresh interpreter runs `before` untimed, then times `timed`: wall and CPU (with children).
TIMED = r"""
import json, resource, time
{before}
def cpu():
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime
t0, c0 = time.perf_counter(), cpu()
{timed}
t1, c1 = time.perf_counter(), cpu()
print(json.dumps({{"{name}_s": t1 - t0, "{name}_cpu_s": c1 - c0}}))
"""
KOKORO = TIMED.format(before="", timed="import kcc\nk = kcc.Kokoro()", name="kokoro")
LOAD = TIMED.format(before="import kcc.api", timed="k = kcc.Kokoro()", name="construct")


def run(root: Path, argv: list[str]) -> dict:
    """Wall, CPU (user + sys, with its children) and peak RSS of one process; its JSON line merged in."""
    t0 = time.perf_counter()
    p = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         env={**os.environ, "PYTHONPATH": str(root)}, cwd=str(root))
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    if status:
        raise SystemExit(f"{root}: {argv} failed ({status})")
    got = {"wall_s": wall, "cpu_s": ru.ru_utime + ru.ru_stime, "peak_rss_mb": ru.ru_maxrss / 1024}
    line = out.decode().strip().splitlines()[-1] if out.strip() else ""
    if line.startswith("{"):
        got.update(json.loads(line))
    return got


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", type=Path, required=True)
    ap.add_argument("--after", type=Path, required=True)
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    wav = Path(tempfile.mkdtemp()) / "x.wav"
    cases = {"kokoro": ["-c", KOKORO], "construct": ["-c", LOAD], "say": ["-m", "kcc.cli", "say", TEXT, "-o", str(wav)]}
    got: dict = {tree: {case: [] for case in cases} for tree in ("before", "after")}
    for i in range(args.runs + 1):
        for case, argv in cases.items():
            for tree in ("before", "after") if i % 2 else ("after", "before"):
                r = run(getattr(args, tree), argv)
                if i:                                   # run 0 warms
                    got[tree][case].append(r)
    summary = {tree: {case: {k: round(statistics.median(r[k] for r in rows), 3) for k in rows[0]}
                      for case, rows in cases_.items()} for tree, cases_ in got.items()}
    print(f"CPU: {cpu_label()}; load average {os.getloadavg()}; medians of {args.runs} interleaved runs")
    print(json.dumps(summary, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"cpu": cpu_label(), "runs": args.runs, "summary": summary, "raw": got},
                                        indent=1) + "\n")


if __name__ == "__main__":
    main()
