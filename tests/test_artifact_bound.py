"""The cache keeps at most MAX_CACHED_ARTIFACTS_PER_MODEL compiled artifacts per model: the least
recently used goes (not the oldest), one a process has loaded stays, nothing that is not kcc's
own artifact of that model is touched, and a loader that races an eviction builds again."""
from __future__ import annotations

import gc
import io
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from kcc.cache_trust import sign
from kcc.compiler import artifact, artifact_eviction
from kcc.compiler.build import BuildOptions
from kcc.model import model_store
from kcc.model.pipeline import Synthesizer

STAGES = ["kokoro_phoneme_encoder"]
BOUND = artifact_eviction.MAX_CACHED_ARTIFACTS_PER_MODEL


@pytest.fixture()
def cache(own_cache):
    return own_cache


def _load(ckpt, max_frames, log=None):
    return model_store.load_model(ckpt, max_frames=max_frames, stages=STAGES, log=log)


def _dir(model_id, max_frames):
    return artifact.artifact_dir(model_id, BuildOptions(), max_frames, STAGES)


def _artifacts(cache) -> set[str]:
    """The artifact directories in the cache (not the lock files, not temporaries)."""
    return {p.name for p in (cache / "models").iterdir() if not p.name.startswith(".")}


def _model_id(ckpt) -> str:
    synth = _load(ckpt, 100)
    model_id = synth.model_id
    del synth
    gc.collect()
    return model_id


def _encoded(synth) -> dict:
    tokens = np.array([[0, 50, 83, 54, 156, 57, 135, 0]], np.int32)
    env = {"input_ids": tokens, "token_type_ids": np.zeros_like(tokens),
           "lengths": np.array([tokens.shape[1]], np.int32)}
    synth.run(env)
    return env


def test_the_least_recently_used_artifact_goes_not_the_oldest(cache, small_ckpt_path):
    assert BOUND == 3
    model_id = _model_id(small_ckpt_path)               # max_frames 100
    _load(small_ckpt_path, 120)
    _load(small_ckpt_path, 140)
    _load(small_ckpt_path, 100)                          # the oldest, used again: now the most recent
    log = io.StringIO()
    _load(small_ckpt_path, 160, log)
    assert _artifacts(cache) == {_dir(model_id, n).name for n in (100, 140, 160)}
    assert _dir(model_id, 120).name in log.getvalue() and "MB freed" in log.getvalue()
    assert log.getvalue().count("removed the least recently used") == 1
    assert not any(p.name.startswith(".kcc-tmp.") for p in (cache / "models").iterdir())   # deleted, not parked


def test_an_evicted_artifact_is_built_again_and_speaks(cache, small_ckpt_path):
    model_id = _model_id(small_ckpt_path)
    for n in (120, 140, 160):
        _load(small_ckpt_path, n)
    assert not _dir(model_id, 100).exists()
    log = io.StringIO()
    again = _load(small_ckpt_path, 100, log)
    assert "compiling" in log.getvalue() and _dir(model_id, 120).name in log.getvalue()
    assert _artifacts(cache) == {_dir(model_id, n).name for n in (100, 140, 160)}
    direct = Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES)
    a, b = _encoded(again), _encoded(direct)
    assert a.keys() == b.keys() and len(a) > 3
    for key in a:
        assert np.array_equal(a[key], b[key]), key


def test_the_artifact_just_saved_is_kept_even_past_a_bound_of_one(cache, small_ckpt_path, monkeypatch):
    monkeypatch.setattr(artifact_eviction, "MAX_CACHED_ARTIFACTS_PER_MODEL", 1)
    model_id = _model_id(small_ckpt_path)
    _load(small_ckpt_path, 120)
    assert _artifacts(cache) == {_dir(model_id, 120).name}
    _load(small_ckpt_path, 140)
    assert _artifacts(cache) == {_dir(model_id, 140).name}


def test_an_artifact_a_synthesizer_maps_is_passed_over_until_it_is_released(cache, small_ckpt_path):
    held = _load(small_ckpt_path, 100)                   # the least recently used from here on
    model_id = held.model_id
    for n in (120, 140, 160):
        _load(small_ckpt_path, n)
    # the bound still holds: the next oldest went in its place
    assert _artifacts(cache) == {_dir(model_id, n).name for n in (100, 140, 160)}
    assert _encoded(held)["input_ids"].shape == (1, 8)  # still speaks
    del held
    gc.collect()
    _load(small_ckpt_path, 180)
    assert _artifacts(cache) == {_dir(model_id, n).name for n in (140, 160, 180)}


def test_an_artifact_another_process_has_loaded_is_not_evicted(cache, small_ckpt_path):
    model_id = _model_id(small_ckpt_path)
    code = ("import sys; from kcc.model import model_store; "
            f"s = model_store.load_model({str(small_ckpt_path)!r}, max_frames=100, stages={STAGES!r}, log=None); "
            "print('loaded', flush=True); sys.stdin.read()")
    other = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    try:
        assert other.stdout.readline() == "loaded\n"
        for n in (120, 140, 160):
            _load(small_ckpt_path, n)
        assert _artifacts(cache) == {_dir(model_id, n).name for n in (100, 140, 160)}
    finally:
        other.communicate("", timeout=60)
    assert other.returncode == 0
    _load(small_ckpt_path, 180)                          # released with its process
    assert _artifacts(cache) == {_dir(model_id, n).name for n in (140, 160, 180)}


def _resigned_copy(src, dst, **changes):
    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    m.update(changes)
    text = json.dumps(m)
    (dst / "manifest.json").write_text(text)
    (dst / "manifest.sig").write_text(sign(text.encode(), "artifact-manifest"))
    return dst


def _unsigned_copy(src, dst, **changes):
    """An artifact as a kcc before signed manifests left it: manifest.json, no manifest.sig."""
    shutil.copytree(src, dst)
    m = json.loads((dst / "manifest.json").read_text())
    m.update(changes)
    (dst / "manifest.json").write_text(json.dumps(m))
    (dst / "manifest.sig").unlink()
    return dst


def _age(path, seconds_ago):
    t = os.stat(path, follow_symlinks=False).st_mtime - seconds_ago
    os.utime(path, (t, t), follow_symlinks=False)


def test_only_kcc_own_artifacts_of_the_model_are_evicted(cache, small_ckpt_path, tmp_path):
    model_id = _model_id(small_ckpt_path)
    models, first = cache / "models", _dir(model_id, 100)
    stem = first.name[:-24]
    outside = shutil.copytree(first, tmp_path / "outside-artifact")
    left_alone = {
        # a link with an artifact's name, to a whole artifact, and one to a directory of the user's
        "link": (models / f"{stem}{'1' * 24}", lambda p: p.symlink_to(outside, target_is_directory=True)),
        "link to the user's": (models / f"{stem}{'2' * 24}", lambda p: p.symlink_to(tmp_path)),
        # files with an artifact's name
        "file": (models / f"{stem}{'3' * 24}", lambda p: p.write_text("mine")),
        # directories with an artifact's name that kcc did not sign for this model
        "unsigned": (models / f"{stem}{'4' * 24}",
                     lambda p: (shutil.copytree(first, p), (p / "manifest.sig").write_text("0" * 64))),
        "manifest a FIFO": (models / f"{stem}{'b' * 24}",
                            lambda p: (shutil.copytree(first, p), (p / "manifest.json").unlink(),
                                       os.mkfifo(p / "manifest.json"))),
        "signature a link": (models / f"{stem}{'c' * 24}",
                             lambda p: (shutil.copytree(first, p), (p / "manifest.sig").unlink(),
                                        (p / "manifest.sig").symlink_to(first / "manifest.sig"))),
        "no manifest": (models / f"{stem}{'5' * 24}", lambda p: (p.mkdir(), (p / "weights.bin").write_bytes(b"1"))),
        "another model's": (models / f"{stem}{'6' * 24}",
                            lambda p: _resigned_copy(first, p, model_id="file-someone-else")),
        "group-writable": (models / f"{stem}{'7' * 24}",
                           lambda p: (shutil.copytree(first, p), os.chmod(p, 0o770))),
        # directories of kcc's artifacts under names artifact_dir does not give this model
        "short key": (models / f"{stem}{'8' * 23}", lambda p: shutil.copytree(first, p)),
        "upper-case key": (models / f"{stem}{'A' * 24}", lambda p: shutil.copytree(first, p)),
        "other stem": (models / f"file-0123456789abcdef01234567-{'9' * 24}", lambda p: shutil.copytree(first, p)),
        "user's notes": (models / "notes.txt", lambda p: p.write_text("mine")),
        # unsigned but claiming a signed-era version: an edit, not a pre-signing kcc's artifact
        "unsigned v2": (models / f"{stem}{'d' * 24}", lambda p: _unsigned_copy(first, p, artifact_version=2)),
        "unsigned, version not a number": (models / f"{stem}{'e' * 24}",
                                           lambda p: _unsigned_copy(first, p, artifact_version="1")),
        "unsigned, not JSON": (models / f"{stem}{'f' * 24}",
                               lambda p: (shutil.copytree(first, p), (p / "manifest.sig").unlink(),
                                          (p / "manifest.json").write_text("{not json"))),
        "unsigned v1 of another model": (models / f"{stem}{'0' * 24}",
                                         lambda p: _unsigned_copy(first, p, artifact_version=1, model_id="file-x")),
    }
    for path, make in left_alone.values():
        make(path)
        _age(path, 10_000)                               # older than any real artifact: first in line
    # an older kcc's artifact of this model is kcc's own: the first to go
    old_version = _resigned_copy(first, models / f"{stem}{'a' * 24}", artifact_version=1)
    _age(old_version, 5_000)
    # ... and so is one from before signed manifests (version 1, no manifest.sig): never loaded again
    pre_signing = _unsigned_copy(first, models / f"{stem}{'9' * 24}", artifact_version=1)
    _age(pre_signing, 6_000)
    before = {name: sorted(os.listdir(path)) if path.is_dir() else None for name, (path, _) in left_alone.items()}

    _load(small_ckpt_path, 120)
    _load(small_ckpt_path, 140)
    for name, (path, _) in left_alone.items():
        assert os.path.lexists(path), name
        assert (sorted(os.listdir(path)) if path.is_dir() else None) == before[name], name
    assert (models / f"{stem}{'1' * 24}").is_symlink() and sorted(os.listdir(outside)) == sorted(os.listdir(first))
    assert (models / f"{stem}{'3' * 24}").read_text() == "mine"
    assert not old_version.exists() and not pre_signing.exists()
    assert all(_dir(model_id, n).is_dir() for n in (100, 120, 140))


def _rename_away(path):
    os.rename(path, path.parent / f".kcc-tmp.{os.getpid()}.{path.name}.race.part")


def test_a_loader_that_loses_the_race_to_an_evictor_builds_again(cache, small_ckpt_path, monkeypatch):
    """The evictor renames the victim after the loader opened it but before its shared lock: the
    loader sees the name no longer leads to what it locked, and compiles."""
    model_id = _model_id(small_ckpt_path)
    victim, real_flock, raced = _dir(model_id, 100), artifact_eviction.fcntl.flock, []

    def evictor_first(fd, op):
        if op == artifact_eviction.fcntl.LOCK_SH and not raced:
            raced.append(artifact_eviction._evict(victim))    # the evictor's own lock, rename and delete
        return real_flock(fd, op)
    monkeypatch.setattr(artifact_eviction.fcntl, "flock", evictor_first)
    log = io.StringIO()
    synth = _load(small_ckpt_path, 100, log)
    assert raced[0] > 0                                   # the evictor did remove it
    assert "compiling" in log.getvalue() and "rebuilding" not in log.getvalue()
    assert victim.is_dir() and _encoded(synth)["input_ids"].shape == (1, 8)


def test_a_directory_removed_while_it_loads_is_built_again(cache, small_ckpt_path, monkeypatch):
    """Removed by something that does not take the lock (a damaged artifact's remover, an older
    kcc, the user) between the loader's lock and its reads: a rebuild, not a CacheError."""
    model_id = _model_id(small_ckpt_path)
    victim, real_load, raced = _dir(model_id, 100), artifact.load, []

    def removed_first(path, verify=False):
        if path == victim and not raced:
            raced.append(_rename_away(path))
        return real_load(path, verify=verify)
    monkeypatch.setattr(artifact, "load", removed_first)
    log = io.StringIO()
    synth = _load(small_ckpt_path, 100, log)
    assert "compiling" in log.getvalue() and "rebuilding" not in log.getvalue()
    assert victim.is_dir() and _encoded(synth)["input_ids"].shape == (1, 8)


def test_an_evictor_passes_over_a_victim_already_gone(cache, small_ckpt_path):
    model_id = _model_id(small_ckpt_path)
    victim = _dir(model_id, 100)
    _rename_away(victim)
    assert artifact_eviction._evict(victim) is None
    for n in (120, 140, 160):                            # the listing no longer shows it: no error either
        _load(small_ckpt_path, n)
    assert _artifacts(cache) == {_dir(model_id, n).name for n in (120, 140, 160)}


@pytest.mark.parametrize("kind, why", [("link to an artifact", "symbolic link"), ("link to nothing", "symbolic link"),
                                       ("file", "not a directory")])
def test_something_else_where_the_artifact_goes_is_still_refused(cache, small_ckpt_path, tmp_path, kind, why):
    """Eviction's lock opens no link: a link or file planted at the artifact's own path is the
    CacheError it always was, not a silent rebuild beside it."""
    from kcc.cache_trust import CacheError
    model_id = _model_id(small_ckpt_path)
    where = _dir(model_id, 100)
    moved = tmp_path / "moved"
    os.rename(where, moved)
    contents = sorted(os.listdir(moved))
    if kind == "file":
        where.write_text("mine")
    else:
        where.symlink_to(moved if kind == "link to an artifact" else tmp_path / "nothing")
    with pytest.raises(CacheError, match=why):
        _load(small_ckpt_path, 100)
    assert sorted(os.listdir(moved)) == contents and len(contents) >= 4
    assert (where.read_text() == "mine") if kind == "file" else where.is_symlink()
