"""compiler_digest (part of every artifact key) is recomputed only when a compiler source's stamp
changed: a warm load reads none of them; an edit gives the new digest (kcc.compiler.artifact)."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from kcc.compiler import artifact


@pytest.fixture
def tree(tmp_path, monkeypatch):
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    pkg = tmp_path / "kcc"
    (pkg / "compiler").mkdir(parents=True)
    (pkg / "compiler" / "a.py").write_text("A = 1\n")
    (pkg / "ops").mkdir()
    (pkg / "ops" / "b.py").write_text("B = 2\n")
    monkeypatch.setattr(artifact, "_PKG", pkg)
    reads = []
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: reads.append(self.name) or real(self))
    artifact.compiler_digest.cache_clear()
    yield pkg, reads
    artifact.compiler_digest.cache_clear()


def _expected(pkg: Path) -> str:
    h = hashlib.sha256(f"artifact {artifact.ARTIFACT_VERSION}".encode())
    for rel in ("compiler/a.py", "ops/b.py"):
        h.update(rel.encode())
        h.update((pkg / rel).read_bytes())
    return h.hexdigest()


def test_a_warm_load_reads_no_source(tree):
    pkg, reads = tree
    first = artifact.compiler_digest()
    assert first == _expected(pkg) and sorted(reads[:2]) == ["a.py", "b.py"]
    reads.clear()
    artifact.compiler_digest.cache_clear()                 # a new process
    assert artifact.compiler_digest() == first and reads == []


def test_an_edited_source_gives_the_new_digest(tree):
    pkg, _reads = tree
    first = artifact.compiler_digest()
    (pkg / "ops" / "b.py").write_text("B = 3\n")
    artifact.compiler_digest.cache_clear()
    assert artifact.compiler_digest() == _expected(pkg) != first


def test_a_planted_digest_is_not_believed(tree):
    pkg, _reads = tree
    artifact.compiler_digest()
    memo = next((pkg.parent / "cache" / "compiler-digest").iterdir())
    memo.write_text(json.dumps({**json.loads(memo.read_text()), "value": "0" * 64}))
    artifact.compiler_digest.cache_clear()
    assert artifact.compiler_digest() == _expected(pkg)
