"""English G2P start-up: `import` + G2P('en-us') + the first phonemize of a sentence, in fresh
processes, alternating two checkouts (the one this file is in and --before), median of --runs.

    PYTHONPATH=. python bench/g2p_startup.py --before /path/to/older/checkout [--runs 9]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import cpu_name, short_commit  # noqa: E402

CODE = ("import time;t=time.perf_counter();from kcc.speech.g2p.g2p import G2P;g=G2P('en-us');"
        "g('Dr. Smith read 3/4 of the report on 12/25/2024 at 3:30 p.m.');print(time.perf_counter()-t)")


def once(checkout: Path) -> float:
    out = subprocess.run([sys.executable, "-c", CODE], cwd=checkout, env={"PYTHONPATH": str(checkout),
                         "HOME": str(Path.home()), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=9)
    args = ap.parse_args()
    once(ROOT), once(args.before)                       # warm the page cache and the lexicon cache
    after, before = [], []
    for _ in range(args.runs):
        before.append(once(args.before))
        after.append(once(ROOT))
    b, a = statistics.median(before), statistics.median(after)
    print(f"{cpu_name()}, commit {short_commit()}: English G2P import + first sentence, median of {args.runs} "
          f"fresh processes: before {b * 1000:.0f} ms (min {min(before) * 1000:.0f}), after {a * 1000:.0f} ms "
          f"(min {min(after) * 1000:.0f}); after/before {a / b:.2f}")


if __name__ == "__main__":
    main()
