"""`kcc --help` and every subcommand's --help: wall and CPU time (fresh interpreter, median of N) and the
modules each loads (all of sys.modules, kcc's own, and the heavy ones a help must not load).

tests/test_cli_conventions.py holds the module sets (no timed asserts there); this measures
the time. Usage:

    python bench/help_startup.py [--root CHECKOUT] [--runs 5] [--all]

--root: the checkout whose kcc is measured (default: this one), so a before / after pair is
two runs of this script; --all: every subcommand, not only `kcc --help`.
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

# Runs kcc's dispatcher as the console script does, then prints what it loaded.
PROBE = ("import sys\nfrom kcc import cli\ntry:\n    cli.main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
         "import json\nprint(json.dumps(sorted(sys.modules)), file=sys.stderr)")
HEAVY = ("numpy", "av", "onnx", "ray", "lxml", "pypdf", "torch", "misaki", "uvicorn")


def subcommands(root: Path) -> list[str]:
    """The subcommands `kcc --help` lists (its usage line's {a,b,...})."""
    out = subprocess.run([sys.executable, "-c", PROBE, "--help"], capture_output=True, text=True,
                         env={"PYTHONPATH": str(root)}, cwd=str(root), check=True).stdout
    return out[out.index("{") + 1:out.index("}")].split(",")


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished children: on a shared machine far steadier
    than wall time, which waits for the other users' processes too."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def measure(root: Path, argv: list[str], runs: int) -> dict:
    """Run in root (a `-c` script puts the current directory first on sys.path)."""
    times, cpu, mods = [], [], []
    for _ in range(runs + 1):                       # the first run warms the page cache and .pyc files
        c0, t0 = _children_cpu(), time.perf_counter()
        p = subprocess.run([sys.executable, "-c", PROBE, *argv], capture_output=True, text=True,
                           env={"PYTHONPATH": str(root)}, cwd=str(root))
        times.append(time.perf_counter() - t0)
        cpu.append(_children_cpu() - c0)
        mods = json.loads(p.stderr.strip().splitlines()[-1])
    times, cpu = times[1:], cpu[1:]
    return {"argv": " ".join(argv), "median_s": statistics.median(times), "min_s": min(times),
            "cpu_s": statistics.median(cpu),
            "modules": len(mods), "kcc_modules": sum(m == "kcc" or m.startswith("kcc.") for m in mods),
            "heavy": [m for m in HEAVY if m in mods],
            "compiler_or_g2p": [m for m in mods if m.startswith(("kcc.compiler", "kcc.speech.g2p."))]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--all", action="store_true")
    args = ap.parse_args()
    t, c = [], []
    for _ in range(args.runs + 1):
        c0, t0 = _children_cpu(), time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        t.append(time.perf_counter() - t0)
        c.append(_children_cpu() - c0)
    print(f"root {args.root}; python -c pass: median {statistics.median(t[1:]):.3f} s wall, "
          f"{statistics.median(c[1:]):.3f} s CPU")
    print(f"{'argv':<24} {'median s':>8} {'min s':>6} {'cpu s':>6} {'modules':>7} {'kcc':>4}  heavy / compiler+g2p")
    cases = [["--help"]] + ([[c, "--help"] for c in subcommands(args.root)] if args.all else [])
    for argv in cases:
        r = measure(args.root, argv, args.runs)
        print(f"{r['argv']:<24} {r['median_s']:8.3f} {r['min_s']:6.3f} {r['cpu_s']:6.3f} {r['modules']:7d} "
              f"{r['kcc_modules']:4d}  {' '.join(r['heavy']) or '-'} / {len(r['compiler_or_g2p'])}")


if __name__ == "__main__":
    main()
