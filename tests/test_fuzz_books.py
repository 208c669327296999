"""A short run of fuzz/fuzz_books.py on each book surface (the bounded run is scripts/fuzz.sh):
every case read or refused by name, its work linear in its size."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import fuzz_books  # noqa: E402


@pytest.mark.parametrize("surface, n", [("html", 40), ("xhtml", 40), ("markdown", 40), ("epub", 15), ("pdf", 30)])
def test_a_short_fuzz_run_finds_nothing(surface, n):
    counts = fuzz_books.run(surface, n, seed=11, log=lambda *_: None)
    assert sum(counts.values()) == n and counts.get("read", 0) > n // 2, counts
