"""Which model a checkpoint path names (kcc.model.model_store._source): an ONNX export is keyed by
its bytes as one, a .pth by its own; the ONNX reader is imported only for such a path."""
from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from kcc.model import model_store

ROOT = Path(__file__).resolve().parent.parent


def test_an_onnx_path_is_keyed_as_an_export_by_its_bytes(tmp_path, monkeypatch):
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "model.onnx"
    path.write_bytes(b"not read here: keyed by its SHA-256")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    model_id, label, _make = model_store._source(path, None)
    assert model_id.startswith(f"onnx-{digest[:24]}-import") and label == "ONNX export model.onnx"


def test_a_pth_path_is_keyed_as_a_checkpoint_file(tmp_path, monkeypatch):
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "model.pth"
    path.write_bytes(b"a checkpoint's bytes")
    model_id, label, _make = model_store._source(path, None)
    assert model_id == f"file-{hashlib.sha256(path.read_bytes()).hexdigest()[:24]}" and label == "checkpoint model.pth"


def test_loading_a_model_module_does_not_import_the_onnx_reader():
    code = "import sys, kcc.model.model_store, kcc.api; print('kcc.weights.onnx_file' in sys.modules, 'asyncio' in sys.modules)"
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["False", "False"]
