"""What the seeded fuzzers share (fuzz_text.py, fuzz_inputs.py, fuzz_wyoming.py): case after case
from one seed until n cases or a time budget are done, the -n / --seed / --seconds command line,
and the exit status of a run (1, with the finding on stderr)."""
from __future__ import annotations

import argparse
import sys
import time
from typing import Callable, Iterator


def cases(n: int, seconds: float | None = None) -> Iterator[int]:
    """0, 1, ... n - 1, ending early once `seconds` have passed (None: no time bound)."""
    t_end = None if seconds is None else time.monotonic() + seconds
    for i in range(n):
        if t_end is not None and time.monotonic() > t_end:
            return
        yield i


def parser(doc: str, n: int, seconds_help: str = "stop after this long") -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("-n", type=int, default=n)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--seconds", type=float, help=seconds_help)
    return ap


def exit_status(name: str, run: Callable[[], object]) -> int:
    """0 when `run` finds nothing; 1 when it raises AssertionError (a finding), printed on stderr."""
    try:
        run()
    except AssertionError as exc:
        print(f"{name}: FINDING: {exc}", file=sys.stderr)
        return 1
    return 0
