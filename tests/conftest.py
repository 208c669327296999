"""Shared fixtures: seeded upstream-layout checkpoints (built once, cached) and compiled circuits;
how many xdist workers `-n auto` starts."""
from __future__ import annotations

import pytest

from dev_tools import require as require_tools
from kcc.compiler.threads import available_cores, available_memory
from kcc.weights.checkpoint import load_checkpoint

MAX_WORKERS = 4                # past this the listening files (minutes each, on one worker) set the time
WORKER_PEAK_BYTES = 6 << 30    # one worker's peak resident set (measured 5.4-6.0 GB: the real model + torch)


def pytest_runtest_setup(item):
    for mark in item.iter_markers("tools"):
        require_tools(*mark.args)


def pytest_xdist_auto_num_workers(config):
    """`-n auto` (pyproject addopts): a worker per core, at most MAX_WORKERS, and no more than the
    available memory holds at WORKER_PEAK_BYTES each (one worker, in-process, when it holds none)."""
    memory = available_memory()
    fits = MAX_WORKERS if memory is None else memory // WORKER_PEAK_BYTES
    n = min(available_cores(), MAX_WORKERS, fits)
    return n if n > 1 else 0


@pytest.fixture()
def own_cache(tmp_path, monkeypatch):
    """A fresh kcc cache (tmp_path / "cache") and its own signing key (kcc.cache_trust keeps the key
    under XDG_CONFIG_HOME, outside the cache), for this test alone."""
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "cache"


@pytest.fixture(scope="session")
def small_ckpt_path():
    from oracle.checkpoints import test_checkpoint
    return test_checkpoint("small", 0)


@pytest.fixture(scope="session")
def full_ckpt_path():
    from oracle.checkpoints import test_checkpoint
    return test_checkpoint("full", 0)


@pytest.fixture(scope="session")
def small_ckpt(small_ckpt_path):
    return load_checkpoint(small_ckpt_path)


@pytest.fixture(scope="session")
def full_ckpt(full_ckpt_path):
    return load_checkpoint(full_ckpt_path)


@pytest.fixture(scope="session")
def ckpt(request):
    """Parametrise a test with indirect=["ckpt"] and params 'small' / 'full'."""
    return request.getfixturevalue(f"{request.param}_ckpt")
