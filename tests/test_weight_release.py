"""Releasing a finished stage's weight pages (Synthesizer.release_weights_after_use): the mapped
blob's pages leave the process's resident set after each stage, the page cache keeps them,
and the next synthesis faults them back in with the same bits. Weights that are not a
read-only file mapping are refused by name: dropping their pages would lose them."""
from __future__ import annotations

import mmap

import numpy as np
import pytest

from kcc.compiler import runtime
from kcc.compiler.runtime import WeightReleaseError, release_pages
from kcc.model import model_store
from kcc.model.pipeline import Synthesizer

from test_model_store import STAGES, _front, _style, cache  # noqa: F401  (the artifact cache fixture, the same front stages)


@pytest.fixture()
def mapped(cache, small_ckpt_path):
    return model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES, log=None)


def resident_kb(path_part: str) -> int:
    """This process's resident kB in mappings of files whose path contains `path_part`."""
    total, inside = 0, False
    with open("/proc/self/smaps") as f:
        for line in f:
            head = line.split()
            if "-" in head[0] and len(head) >= 5 and not line.startswith(("Rss", "Pss")):
                inside = len(head) >= 6 and path_part in head[-1]
            elif inside and head[0] == "Rss:":
                total += int(head[1])
    return total


def test_released_weights_leave_the_resident_set_and_come_back_bit_for_bit(mapped):
    kept = _front(mapped, _style())
    assert resident_kb("weights.bin") > 0
    mapped.release_weights_after_use()
    first, second = _front(mapped, _style()), _front(mapped, _style())      # the second faults them back in
    assert resident_kb("weights.bin") <= 4 * len(STAGES)  # at most a partial page each
    for key in ("durations", "d", "t_en", "d_en"):
        if key in kept:
            assert np.array_equal(kept[key], first[key]) and np.array_equal(kept[key], second[key]), key
    mapped.release_weights_after_use(False)
    _front(mapped, _style())
    assert resident_kb("weights.bin") > 0


def test_a_stage_releases_its_whole_pages_only(mapped):
    _front(mapped, _style())
    c = mapped.circuits[STAGES[0]]
    before = resident_kb("weights.bin")
    got = c.release_weights()
    assert 0 < got <= c.weights.nbytes and got % mmap.PAGESIZE == 0
    assert c.weights.nbytes - got < 2 * mmap.PAGESIZE
    assert 0 < before - resident_kb("weights.bin") <= got // 1024


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
