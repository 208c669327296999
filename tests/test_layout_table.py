"""The importer's shipped target layout (kcc/data/kokoro_layout.json) is upstream's, exactly."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_shipped_layout_equals_what_upstream_builds():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch (the oracle) is not installed: pip install -e .[dev]")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from make_layout_table import upstream_layout
    finally:
        sys.path.pop(0)
    from kcc.weights.importers.onnx_kokoro import target_layout
    shipped = target_layout()
    upstream = {k: tuple(v) for k, v in upstream_layout("full").items()}
    assert list(shipped) == list(upstream)          # same keys, same order (the file's order)
    assert shipped == upstream
    assert len(shipped) == 688
