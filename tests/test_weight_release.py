"""Releasing weight pages once used (Synthesizer.release_weights_after_use): each weight's pages
leave the process's resident set after the last op reading it (a hook the generated C calls), the
whole blob after each stage; the page cache keeps them, and the next synthesis faults them back
in with the same bits. Weights that are not a
read-only file mapping are refused by name: dropping their pages would lose them."""
from __future__ import annotations

import mmap

import numpy as np
import pytest

from kcc.compiler import runtime
from kcc.compiler.abi import WEIGHT_DONE_FN, WEIGHT_DONE_MIN_BYTES
from kcc.compiler.emit import weights_done_after
from kcc.compiler.runtime import WeightReleaseError, release_pages
from kcc.model import model_store
from kcc.model.pipeline import Synthesizer

from test_model_store import STAGES, _front, _style, cache  # noqa: F401  (the artifact cache fixture, the same front stages)


@pytest.fixture()
def mapped(cache, small_ckpt_path):
    return model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES, log=None)


def resident_kb(synth: Synthesizer) -> int:
    """This process's resident kB in the mappings that hold `synth`'s weights: by address, not by
    file name, so another model mapped in the same process (a test before this one in the same
    worker) is not counted."""
    blobs = [(c.weights.ctypes.data, c.weights.ctypes.data + c.weights.nbytes) for c in synth.circuits.values()]
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not line.startswith(("Rss", "Pss")):
                start, end = (int(x, 16) for x in head[0].split("-"))
                inside = any(start < hi and lo < end for lo, hi in blobs)
            elif inside and head[0] == "Rss:":
                total += int(head[1])
    return total


def test_released_weights_leave_the_resident_set_and_come_back_bit_for_bit(mapped):
    kept = _front(mapped, _style())
    assert resident_kb(mapped) > 0
    mapped.release_weights_after_use()
    first, second = _front(mapped, _style()), _front(mapped, _style())      # the second faults them back in
    assert resident_kb(mapped) <= 4 * len(STAGES)  # at most a partial page each
    for key in ("durations", "d", "t_en", "d_en"):
        if key in kept:
            assert np.array_equal(kept[key], first[key]) and np.array_equal(kept[key], second[key]), key
    mapped.release_weights_after_use(False)
    _front(mapped, _style())
    assert resident_kb(mapped) > 0


def test_a_stage_releases_its_whole_pages_only(mapped):
    _front(mapped, _style())
    c = mapped.circuits[STAGES[0]]
    before = resident_kb(mapped)
    got = c.release_weights()
    assert 0 < got <= c.weights.nbytes and got % mmap.PAGESIZE == 0
    assert c.weights.nbytes - got < 2 * mmap.PAGESIZE
    assert 0 < before - resident_kb(mapped) <= got // 1024


def test_a_model_compiled_in_memory_is_refused(small_ckpt_path):
    synth = Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES[:1])
    with pytest.raises(WeightReleaseError, match="not a read-only file mapping"):
        synth.release_weights_after_use()
    assert synth.release_weights is False
    synth.release_weights_after_use(False)          # turning it off is always allowed


@pytest.mark.parametrize("make", ["plain", "writable_map"])
def test_pages_that_would_be_lost_are_refused(tmp_path, make):
    path = tmp_path / "blob"
    path.write_bytes(bytes(range(256)) * 64)
    arr = np.arange(4096, dtype=np.float32) if make == "plain" else np.memmap(path, dtype=np.uint8, mode="r+")
    before = np.array(arr)
    with pytest.raises(WeightReleaseError, match="not a read-only file mapping"):
        release_pages(arr)
    assert np.array_equal(arr, before)


def test_a_platform_without_madvise_is_refused(tmp_path, monkeypatch):
    path = tmp_path / "blob"
    path.write_bytes(b"\1" * 3 * mmap.PAGESIZE)
    monkeypatch.delattr(runtime.mmap, "MADV_DONTNEED", raising=False)
    with pytest.raises(WeightReleaseError, match="no madvise"):
        release_pages(np.memmap(path, dtype=np.uint8, mode="r"))


def _recording_hook(base: int, log: list, then=None):
    @WEIGHT_DONE_FN
    def hook(address, nbytes):
        log.append((address - base, nbytes))
        if then is not None:
            then(address, nbytes)
    return hook


def test_each_weight_is_handed_back_once_after_its_last_reader(small_ckpt_path):
    """In op order, each weight of >= WEIGHT_DONE_MIN_BYTES exactly once, at the op that reads it
    last (the phoneme encoder's ALBERT layer is read by all its layers: after the last one), and
    the generated C calls the hook for exactly those, in that order, every stage; the outputs are
    the same bits with the hook as without."""
    synth = Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES)
    plain = _front(synth, _style())
    logs, want = {}, {}
    for name, c in synth.circuits.items():
        g, plan = c.graph, c.plan
        done = weights_done_after(g, plan)
        readers = {}
        for i, op in enumerate(g.ops):
            for w in op.weights.values():
                readers.setdefault(w, []).append(i)
        big = {w for w in readers if plan.weights[w].nbytes >= WEIGHT_DONE_MIN_BYTES}
        assert sorted(w for ws in done for w in ws) == sorted(big), name
        for i, ws in enumerate(done):
            assert all(readers[w][-1] == i for w in ws), name
        if name == "kokoro_phoneme_encoder":
            assert any(len(readers[w]) > 1 for w in big)           # shared weights: released after the last reader
        want[name] = [(plan.weights[w].offset, plan.weights[w].nbytes) for ws in done for w in ws]
        c.release_weights_as_used(True, hook=_recording_hook(c.weights.ctypes.data, logs.setdefault(name, [])))
    try:
        again = _front(synth, _style())
    finally:
        for c in synth.circuits.values():
            c.release_weights_as_used(False)
    assert logs == want and all(want.values())                     # what the C called, per stage
    assert plain.keys() == again.keys()
    for key in plain:
        assert np.array_equal(plain[key], again[key]), key


def test_the_hook_reports_each_weights_bytes_in_op_order(small_ckpt_path):
    synth = Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES[:1])
    c = synth.circuits[STAGES[0]]
    log: list = []
    ins = {"input_ids": np.array([[0, 50, 83, 54, 0]], np.int32), "token_type_ids": np.zeros((1, 5), np.int32),
           "lengths": np.array([5], np.int32)}
    c.release_weights_as_used(True, hook=_recording_hook(c.weights.ctypes.data, log))
    try:
        c.run(ins)
    finally:
        c.release_weights_as_used(False)
    want = [(c.plan.weights[w].offset, c.plan.weights[w].nbytes) for ws in weights_done_after(c.graph, c.plan) for w in ws]
    assert log == want and len(want) > 0
    log.clear()
    c.run(ins)
    assert log == []


def test_only_blobs_that_asked_are_released(monkeypatch):
    """A library is loaded once per path, so every CompiledCircuit over it shares its hook: the hook
    releases only bytes inside a blob registered by release_weights_as_used, never other memory
    (anonymous pages, which MADV_DONTNEED zeroes: the control shows it would)."""
    a = runtime.aligned_empty(4 * mmap.PAGESIZE, mmap.PAGESIZE)
    a[:] = 1
    monkeypatch.setattr(runtime, "_RELEASING", {})
    runtime._weight_done(a.ctypes.data, a.nbytes)
    assert (a == 1).all()
    runtime._RELEASING[a.ctypes.data] = a.ctypes.data + a.nbytes     # as if it had asked (it must not)
    runtime._weight_done(a.ctypes.data, a.nbytes)
    assert (a == 0).all()


def test_a_stage_run_peaks_with_a_fraction_of_its_weights_resident(mapped):
    """Released as used, the weight pages resident at any handback stay under a fifth of the
    stages' blobs (all of them are resident after a plain run), and after the run at most the
    partial pages at the weights' edges remain."""
    _front(mapped, _style())
    total = resident_kb(mapped)
    assert total * 1024 >= 0.9 * sum(c.weights.nbytes for c in mapped.circuits.values())
    for c in mapped.circuits.values():
        c.release_weights()
    samples: list = []

    def release_and_sample(address, nbytes):
        runtime._weight_done(address, nbytes)
        samples.append(resident_kb(mapped))
    mapped.release_weights_after_use()                           # registers the blobs with _weight_done
    for c in mapped.circuits.values():
        c.release_weights_as_used(True, hook=_recording_hook(c.weights.ctypes.data, [], then=release_and_sample))
    try:
        mapped.release_weights = False                           # only the per-weight release in this run
        _front(mapped, _style())
    finally:
        mapped.release_weights_after_use(False)
    weights = sum(len(c.plan.weights) for c in mapped.circuits.values())
    assert samples and max(samples) < total / 5, (max(samples), total)
    assert resident_kb(mapped) <= 4 * weights            # a partial page per weight at most


def test_releasing_as_used_refuses_weights_that_are_not_a_file_mapping(small_ckpt_path):
    synth = Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES[:1])
    with pytest.raises(WeightReleaseError, match="not a read-only file mapping"):
        synth.circuits[STAGES[0]].release_weights_as_used(True)
