"""Without a C compiler (CC pointing nowhere, or no cc on PATH) what needs one is refused before any
work, naming the prebuilt options that do work; the first load's summary says truly whether it
compiled or packed for prebuilt libraries (kcc.model.model_store.check_buildable, done_line)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kcc.compiler import prebuilt
from kcc.compiler.build import BuildError, release_options
from kcc.compiler.precision import with_precision
from kcc.model import model_store
from kcc.model.model_store import CompilerNeeded, check_buildable, done_line, needs_compiler
from kcc.model.pipeline import BACK, DEFAULT_MAX_FRAMES, FRONT

ROOT = Path(__file__).resolve().parents[1]
STAGES = FRONT + BACK


@pytest.fixture
def prebuilt_install(tmp_path, monkeypatch):
    """A prebuilt table for the default build's flags (its libraries are never loaded here)."""
    root = tmp_path / "prebuilt"
    (root / prebuilt.machine()).mkdir(parents=True)
    doc = {"table_version": prebuilt.TABLE_VERSION, "machine": prebuilt.machine(), "compiler": "test",
           "flags": release_options().flags(), "libraries": {}}
    (root / prebuilt.machine() / prebuilt.TABLE).write_text(json.dumps(doc))
    monkeypatch.setattr(prebuilt, "ROOT", root)
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path / "cache"))
    prebuilt._table.cache_clear()
    yield root
    prebuilt._table.cache_clear()


@pytest.fixture
def no_compiler(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/kcc-no-cc")


def _no_work(*a, **k):
    raise AssertionError("the model was fetched or read before the refusal")


@pytest.mark.parametrize("checkpoint, options, max_frames, named", [
    (None, with_precision(release_options(), "int8"), DEFAULT_MAX_FRAMES, "--precision int8"),
    (None, with_precision(release_options(), "bf16"), DEFAULT_MAX_FRAMES, "--precision bf16"),
    (None, release_options(native=True), DEFAULT_MAX_FRAMES, "--native"),
    (None, release_options(), 4096, "--max-frames 4096"),
    ("/some/kokoro-v1_0.pth", release_options(), DEFAULT_MAX_FRAMES, "a checkpoint file"),
])
def test_options_needing_a_compiler_are_refused_before_any_work(prebuilt_install, no_compiler, monkeypatch,
                                                                checkpoint, options, max_frames, named):
    monkeypatch.setattr(model_store, "_source", _no_work)
    monkeypatch.setattr(model_store, "for_this_cpu", lambda o, log: o)   # bf16 stays bf16 on any CPU
    with pytest.raises(CompilerNeeded) as got:
        model_store.load_model(checkpoint, options, max_frames=max_frames, log=None)
    message = str(got.value)
    assert message.startswith(named) and "'/nonexistent/kcc-no-cc' does not run here" in message
    assert "--precision fp32, no --native, the default --max-frames" in message and "Install gcc" in message
    assert isinstance(got.value, BuildError)             # the CLI's table of known errors: exit 2, no traceback


def test_the_default_build_passes_the_check_without_a_compiler(prebuilt_install, no_compiler):
    assert needs_compiler(None, release_options(), DEFAULT_MAX_FRAMES, STAGES) == []
    check_buildable(None, release_options(), DEFAULT_MAX_FRAMES, STAGES)          # no raise


def test_a_checkout_without_prebuilt_libraries_needs_a_compiler_for_everything(tmp_path, no_compiler, monkeypatch):
    monkeypatch.setattr(prebuilt, "ROOT", tmp_path / "none")
    prebuilt._table.cache_clear()
    try:
        with pytest.raises(CompilerNeeded, match="^the model: .*this install has no prebuilt stage libraries"):
            check_buildable(None, release_options(), DEFAULT_MAX_FRAMES, STAGES)
    finally:
        prebuilt._table.cache_clear()


def test_with_a_compiler_nothing_is_refused(prebuilt_install):
    check_buildable(None, with_precision(release_options(), "int8"), DEFAULT_MAX_FRAMES, STAGES)   # cc runs


def test_kcc_say_with_no_cc_on_path_refuses_int8_at_once(tmp_path):
    """The command line, PATH without any compiler and CC unset: exit 2 with the message, and no
    stage was prepared (no progress line)."""
    env = {k: v for k, v in os.environ.items() if k != "CC"}
    env.update(PATH=str(tmp_path), PYTHONPATH=str(ROOT), KCC_CACHE_DIR=str(tmp_path / "cache"))
    got = subprocess.run([sys.executable, "-m", "kcc.cli", "say", "--precision", "int8", "Hello.",
                          "-o", str(tmp_path / "x.wav")], capture_output=True, text=True, env=env, timeout=120)
    assert got.returncode == 2, got.stderr
    assert "--precision int8: that needs a C compiler and 'cc' does not run here" in got.stderr
    assert "no prebuilt stage libraries" in got.stderr       # a checkout
    assert "[1/" not in got.stderr and "Traceback" not in got.stderr
    assert not (tmp_path / "x.wav").exists()


def test_the_summary_says_what_the_first_load_did():
    assert done_line("packing", 9.4) == "kcc: packed the weights for the prebuilt stage libraries in 9 s (nothing compiled)"
    assert done_line("compiling", 24.2) == "kcc: compiled in 24 s"
