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

CODE = ("import sys,time;t=time.perf_counter();from kcc.speech.g2p.g2p import G2P;g=G2P('en-us');"
        "g(sys.argv[1]);print(time.perf_counter()-t)")
TEXTS = {"numbers": "Dr. Smith read 3/4 of the report on 12/25/2024 at 3:30 p.m.",
         "prose": "The old lighthouse keeper climbed the stairs every evening."}


def once(checkout: Path, text: str) -> float:
    out = subprocess.run([sys.executable, "-c", CODE, text], cwd=checkout, env={"PYTHONPATH": str(checkout),
                         "HOME": str(Path.home()), "PATH": "/usr/bin:/bin"}, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True, type=Path)
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--text", choices=sorted(TEXTS), default="numbers")
    args = ap.parse_args()
    text = TEXTS[args.text]
    once(ROOT, text), once(args.before, text)           # warm the page cache and the lexicon cache
    after, before = [], []
    for _ in range(args.runs):
        before.append(once(args.before, text))
        after.append(once(ROOT, text))
    b, a = statistics.median(before), statistics.median(after)
    print(f"{cpu_name()}, commit {short_commit()}: English G2P import + first sentence ({args.text}), median of "
          f"{args.runs} fresh processes: before {b * 1000:.0f} ms (min {min(before) * 1000:.0f}), after "
          f"{a * 1000:.0f} ms (min {min(after) * 1000:.0f}); after/before {a / b:.2f}")


if __name__ == "__main__":
    main()
