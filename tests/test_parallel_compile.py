"""A first run compiles the stages side by side (kcc.model.pipeline.Synthesizer): the same
libraries and weights as one at a time, every stage announced once, a stage's failure raised as
itself, and no more compiles at once than the cores allow."""
from __future__ import annotations

import threading

import pytest

from kcc.compiler import driver
from kcc.compiler.build import BuildError
from kcc.model import pipeline
from kcc.model.pipeline import Synthesizer

STAGES = ["kokoro_phoneme_encoder", "kokoro_text_encoder", "kokoro_duration"]


def _cores(monkeypatch, n: int, memory: int | None = 64 << 30) -> None:
    monkeypatch.setattr(pipeline, "available_cores", lambda: n)          # what the pipeline sizes by
    monkeypatch.setattr(pipeline, "available_memory", lambda: memory)


def _watch(monkeypatch, before=None):
    """Wrap compile_circuit: returns the list of stage counts in flight seen at each start."""
    real, lock, live, seen = driver.compile_circuit, threading.Lock(), [0], []

    def watched(doc, *a, **k):
        with lock:
            live[0] += 1
            seen.append(live[0])
        try:
            if before is not None:
                before(doc["name"])
            return real(doc, *a, **k)
        finally:
            with lock:
                live[0] -= 1
    monkeypatch.setattr(driver, "compile_circuit", watched)
    return seen


def test_side_by_side_gives_what_one_at_a_time_gives(small_ckpt_path, monkeypatch, tmp_path):
    _cores(monkeypatch, 1)
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path / "serial"))
    serial = Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES)
    _cores(monkeypatch, 2)
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path / "parallel"))     # compiled again, not found
    both = threading.Barrier(2, timeout=20)      # fails unless two stages are in flight at once
    seen = _watch(monkeypatch, before=lambda name: both.wait() if name != STAGES[0] else None)
    calls = []
    parallel = Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES,
                           progress=lambda i, n, name: calls.append((i, n, name)))
    assert max(seen) == 2
    assert list(parallel.circuits) == STAGES                     # stage order, whatever finished first
    for name in STAGES:
        a, b = serial.circuits[name], parallel.circuits[name]
        assert not b.built.cached, name
        assert a.built.key == b.built.key, name                   # the same C source and flags
        assert a.built.sha256 == b.built.sha256, name             # and the same library, byte for byte
        assert a.weights_sha256 == b.weights_sha256, name
    assert sorted(i for i, _, _ in calls) == list(range(len(STAGES)))
    assert {n for _, n, _ in calls} == {len(STAGES)}
    assert sorted(name for _, _, name in calls) == sorted(STAGES)


def test_one_core_compiles_one_stage_at_a_time(small_ckpt_path, monkeypatch):
    _cores(monkeypatch, 1)
    seen = _watch(monkeypatch)
    Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES)
    assert seen == [1] * len(STAGES)


def test_no_more_workers_than_the_cap(small_ckpt_path, monkeypatch):
    _cores(monkeypatch, 64)
    monkeypatch.setattr(pipeline, "MAX_COMPILE_WORKERS", 2)
    seen = _watch(monkeypatch)
    Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES)
    assert len(seen) == len(STAGES) and max(seen) <= 2


def test_a_failing_stage_raises_its_own_error(small_ckpt_path, monkeypatch):
    _cores(monkeypatch, 2)

    def refuse(name):
        if name == "kokoro_text_encoder":
            raise BuildError(f"cc failed on generated circuit '{name}'")
    _watch(monkeypatch, before=refuse)
    with pytest.raises(BuildError, match="kokoro_text_encoder"):
        Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES)


def test_little_memory_compiles_one_stage_at_a_time(small_ckpt_path, monkeypatch):
    _cores(monkeypatch, 2, 1 << 30)
    seen = _watch(monkeypatch)
    Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES)
    assert seen == [1] * len(STAGES)


def test_unknown_memory_is_not_a_reason_to_wait(small_ckpt_path, monkeypatch):
    _cores(monkeypatch, 2, None)
    both = threading.Barrier(2, timeout=20)      # fails unless two stages are in flight at once
    seen = _watch(monkeypatch, before=lambda name: both.wait() if name != STAGES[0] else None)
    Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES)
    assert len(seen) == len(STAGES) and max(seen) == 2


def test_available_memory_reads_meminfo_and_the_cgroup_limit(tmp_path):
    from kcc.compiler.threads import available_memory
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24000000 kB\nMemAvailable:    8000000 kB\n")
    cg = tmp_path / "cg"
    cg.mkdir()
    assert available_memory(meminfo, cg) == 8000000 * 1024                      # no cgroup files
    (cg / "memory.max").write_text("max\n")
    assert available_memory(meminfo, cg) == 8000000 * 1024
    (cg / "memory.max").write_text(f"{2 << 30}\n")
    (cg / "memory.current").write_text(f"{1 << 30}\n")
    assert available_memory(meminfo, cg) == 1 << 30                              # the cgroup leaves less
    assert available_memory(tmp_path / "none", tmp_path / "none") is None
