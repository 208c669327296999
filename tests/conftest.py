"""Shared fixtures: seeded upstream-layout checkpoints (built once, cached) and compiled circuits."""
from __future__ import annotations

import pytest

from kcc.weights.checkpoint import load_checkpoint


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
