"""What the loopback fuzzers of kcc's servers share (fuzz_clients.py: `kcc serve`'s connections;
fuzz_wyoming.py: `kcc wyoming`'s events): the finding they raise, and their command line, which
fuzzes a running server (--port) or one served in-process with the test doubles (--self-serve)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]


class Finding(AssertionError):
    """The server broke an invariant the fuzzer checks."""


def test_doubles_on_path() -> None:
    """The checkout and tests/ first on sys.path: the in-process servers and their fakes are the
    tests' own (test_server.serving, test_wyoming.wyoming_server)."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def main(doc: str, *, seconds: float, against_port: Callable[[argparse.Namespace], dict],
         self_serve: Callable[[argparse.Namespace], dict],
         options: Callable[[argparse.ArgumentParser], None] = lambda ap: None) -> None:
    """Parse the fuzzer's command line (--host --port --self-serve --seconds --seed, and its own
    `options`), fuzz, and print the tally."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int)
    ap.add_argument("--self-serve", action="store_true", help="serve in-process with the test doubles")
    ap.add_argument("--seconds", type=float, default=seconds)
    ap.add_argument("--seed", type=int, default=0)
    options(ap)
    a = ap.parse_args()
    if a.self_serve:
        print(self_serve(a))
    elif a.port:
        print(against_port(a))
    else:
        ap.error("give --port or --self-serve")
