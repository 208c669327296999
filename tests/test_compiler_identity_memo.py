"""known_compiler_identity: a warm load runs no `cc --version`; a changed compiler binary or a
tampered memo runs it again (kcc.compiler.build)."""
from __future__ import annotations

import json
import os

import pytest

from kcc.compiler.build import BuildError, compiler_available, compiler_identity, known_compiler_identity, toolchain_identity


@pytest.fixture
def fake_cc(tmp_path, monkeypatch):
    """A 'compiler' that prints its version and counts how often it was asked."""
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    calls = tmp_path / "calls"
    cc = tmp_path / "fakecc"
    cc.write_text(f"#!/bin/sh\necho x >> {calls}\necho 'fakecc 1.0'\n")
    cc.chmod(0o755)
    monkeypatch.setenv("CC", str(cc))
    compiler_identity.cache_clear()
    yield cc, calls
    compiler_identity.cache_clear()


def _fresh_process():
    """compiler_identity asks once per process: forget that, as a new process would."""
    compiler_identity.cache_clear()


def _calls(calls) -> int:
    return len(calls.read_text().splitlines()) if calls.exists() else 0


def test_the_identity_is_asked_once_then_remembered(fake_cc):
    cc, calls = fake_cc
    assert known_compiler_identity(str(cc)) == "fakecc 1.0\n"
    _fresh_process()
    assert known_compiler_identity(str(cc)) == "fakecc 1.0\n"
    _fresh_process()
    assert compiler_available() and toolchain_identity().startswith("fakecc 1.0\n")
    assert _calls(calls) == 1


def test_a_changed_compiler_binary_is_asked_again(fake_cc):
    cc, calls = fake_cc
    known_compiler_identity(str(cc))
    _fresh_process()
    cc.write_text(cc.read_text().replace("1.0", "2.0"))      # an upgrade: other bytes, size, mtime
    assert known_compiler_identity(str(cc)) == "fakecc 2.0\n"
    assert _calls(calls) == 2


@pytest.mark.parametrize("tamper", [
    lambda r: {**r, "value": "planted 9.9\n"},               # the identity edited, signature kept
    lambda r: {**r, "sig": "0" * 64},                         # a signature not made with the user's key
    lambda r: {k: v for k, v in r.items() if k != "sig"},     # unsigned
])
def test_a_tampered_memo_is_not_believed(fake_cc, tamper):
    cc, calls = fake_cc
    known_compiler_identity(str(cc))
    memo = next((fake_cc[0].parent / "cache" / "compiler-identity").iterdir())
    memo.write_text(json.dumps(tamper(json.loads(memo.read_text()))))
    _fresh_process()
    assert known_compiler_identity(str(cc)) == "fakecc 1.0\n"
    assert _calls(calls) == 2


def test_a_compiler_not_on_path_is_the_named_error(tmp_path, monkeypatch):
    _fresh_process()
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(BuildError, match="no usable C compiler 'kcc-no-such-cc'"):
        known_compiler_identity("kcc-no-such-cc")
    assert not os.path.exists(tmp_path / "cache" / "compiler-identity")


def test_a_cache_kcc_refuses_only_costs_the_memo(fake_cc, tmp_path, monkeypatch):
    """A cache directory others can write (CacheError) holds no memo: the identity is asked each
    time, and the refusal is left to the artifact load that names it."""
    cc, calls = fake_cc
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    monkeypatch.setenv("KCC_CACHE_DIR", str(shared))
    assert known_compiler_identity(str(cc)) == "fakecc 1.0\n"
    _fresh_process()
    assert known_compiler_identity(str(cc)) == "fakecc 1.0\n"
    assert _calls(calls) == 2 and list(shared.iterdir()) == []
