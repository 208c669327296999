"""Rotating scoring: each step scores the candidate and the incumbent on the same fresh sentences."""
from __future__ import annotations

import json
import shutil
import threading
import time
from types import SimpleNamespace

import numpy as np
import pytest

from kcc.speech.voice_design.encoder import SpeakerEncoder
from kcc.speech.voice_design.search import ROTATE_K, Guard, PoolCache, Scorer, Search, mean_similarity
from kcc.model.pipeline import THREADS
from kcc.speech.voice_design.mel import resample
from test_voice_design_search import SHORT, PitchSynth, pack_at, playback_factor

# four one-chunk "sentences" of different phoneme counts (PitchSynth speaks the same utterance for each)
GROUPS = [[SimpleNamespace(ids=[5] * n, phonemes="a" * n)] for n in (3, 4, 5, 6)]


@pytest.fixture(scope="module")
def encoder():
    return SpeakerEncoder()


@pytest.fixture(scope="module")
def world(encoder, tmp_path_factory):
    synth = PitchSynth()
    scorer = Scorer(synth, [c for g in GROUPS[:2] for c in g], encoder, GROUPS[:2])
    rotation = Scorer(synth, [c for g in GROUPS for c in g], encoder, GROUPS)
    packs = {"low": pack_at(-0.4), "mid": pack_at(0.0), "high": pack_at(0.45)}
    target = scorer.embed(scorer.audio(pack_at(0.2)))
    root = tmp_path_factory.mktemp("rot")
    first = Search(scorer, packs, target, "en-us", 0, root / "state.json",
                   pool_cache=PoolCache(root / "pool.json", "stand-in"), rotation=rotation)
    first.start()
    return synth, scorer, rotation, packs, target, root


def search(world, path):
    synth, scorer, rotation, packs, target, root = world
    shutil.copy(root / "state.json", path)
    s = Search(scorer, packs, target, "en-us", 0, path, rotation=rotation)
    s.resume_or_start()
    return s


def test_the_start_is_heard_on_every_rotating_sentence(world):
    state = json.loads((world[5] / "state.json").read_text())
    assert sorted(state["incumbent"]) == ["0", "1", "2", "3"]
    assert state["start_score"] == state["score"] == pytest.approx(
        mean_similarity(list(state["incumbent"].values()), world[4] / np.linalg.norm(world[4])))


def test_the_incumbent_is_synthesised_once_per_sentence_then_remembered(world, tmp_path):
    synth = world[0]
    s = search(world, tmp_path / "s.json")
    for _ in range(4):
        calls, kept, known = synth.calls, s.state.accepted, set(s.state.incumbent)
        confirmed = s.state.confirmations
        s.run(steps=s.state.step + 1)
        fresh = set(s.state.incumbent) - known
        # a win heard again is heard on the sentences not drawn yet (here: the one left)
        again = (s.state.confirmations - confirmed) * min(ROTATE_K, len(GROUPS) - ROTATE_K)
        if s.state.accepted == kept:          # not replaced: the candidate, and the incumbent where it had not spoken
            assert synth.calls - calls == ROTATE_K + again + len(fresh)
        assert len(s.state.incumbent) >= ROTATE_K
        assert s.state.score == pytest.approx(mean_similarity(list(s.state.incumbent.values()), s.target))


def test_rotating_steps_are_reproducible_and_resume(world, tmp_path):
    straight = search(world, tmp_path / "a.json")
    end = straight.run(steps=3)
    interrupted = search(world, tmp_path / "b.json")
    interrupted.run(steps=1)                                     # Ctrl-C after one step
    synth, scorer, rotation, packs, target, _ = world
    again = Search(scorer, packs, target, "en-us", 0, tmp_path / "b.json", rotation=rotation)
    assert again.resume_or_start().step == 1
    again.run(steps=3)
    assert again.state.logits == end.logits and again.state.offset == end.offset
    assert again.state.incumbent == end.incumbent and again.state.score == end.score
    assert json.loads((tmp_path / "b.json").read_text())["incumbent"] == end.incumbent


def test_mean_similarity_averages_the_sentences_embeddings():
    e1, e2 = np.eye(256)[0], np.eye(256)[1]
    assert mean_similarity([e1, e2], (e1 + e2) / np.sqrt(2)) == pytest.approx(1.0)
    assert mean_similarity([e1, e2], e1) == pytest.approx(1 / np.sqrt(2))
    assert mean_similarity([e1, e1], e1) == pytest.approx(1.0)


def test_scorer_counts_phonemes_per_sentence(world):
    rotation = world[2]
    assert rotation.phonemes() == 18 and rotation.phonemes([0, 3]) == 9


def test_guard_length_range_scales_with_the_sentences_spoken():
    guard = Guard.from_pool([0.05, 0.1], [2.0, 3.0])
    pack = pack_at(0.0)
    five_s = 0.1 * np.sin(np.arange(24_000 * 5) / 10.0).astype(np.float32)
    assert "length" in guard.problem(five_s, pack)
    assert guard.problem(five_s, pack, length_scale=2.0) is None
    assert "length 5.00 s outside the official voices' 0.91..1.65 s" in guard.problem(five_s, pack, length_scale=0.5)


def test_a_win_is_confirmed_on_fresh_sentences_before_it_is_kept(world, tmp_path):
    """A candidate that beats the incumbent on its ROTATE_K sentences is heard on the rest of the
    pool (here one more) and kept only if it still wins on them together: nothing is kept unconfirmed, and a
    kept one is the incumbent on every sentence it was heard on."""
    s = search(world, tmp_path / "c.json")
    confirmed = 0
    for _ in range(40):
        if confirmed >= 2:
            break
        before, kept = s.state.confirmations, s.state.accepted
        s.run(steps=s.state.step + 1)
        if s.state.confirmations == before:
            assert s.state.accepted == kept
            continue
        confirmed += 1
        if s.state.accepted > kept:
            assert sorted(s.state.incumbent, key=int) == [str(i) for i in range(len(GROUPS))]
    assert confirmed >= 1


class SharingSynth(PitchSynth):
    """PitchSynth that notes the kernel threads each synthesis is given (pipeline.THREADS), the
    first two held until both have started: two sentences spoken side by side."""

    def __init__(self):
        super().__init__()
        self.both = threading.Barrier(2, timeout=10)
        self.lock = threading.Lock()
        self.threads = []

    def synthesize(self, ids, style, speed=1.0, seed=0):
        with self.lock:
            first_two = self.calls < 2
            self.calls += 1
        if first_two:
            self.both.wait()
        share = THREADS.get()
        n = share() if callable(share) else share
        if first_two:
            self.both.wait()                 # neither finishes before the other has read its share
        else:                                # the pipeline reads the share again before each stage:
            deadline = time.monotonic() + 10  # once the other sentence is done, this one has both cores
            while n != 2 and time.monotonic() < deadline:
                time.sleep(0.001)
                n = share()
        with self.lock:
            self.threads.append(n)
        f = playback_factor(style)
        return SimpleNamespace(audio=0.5 * resample(SHORT, 16_000, to=int(24_000 / f)))


def test_sentences_side_by_side_share_the_cores_and_equal_one_by_one(encoder):
    jobs = [(pack_at(-0.4), 0), (pack_at(0.45), 1), (pack_at(0.0), 3)]
    one = Scorer(PitchSynth(), [c for g in GROUPS for c in g], encoder, GROUPS)
    one.cores = 1
    synth = SharingSynth()
    two = Scorer(synth, [c for g in GROUPS for c in g], encoder, GROUPS)
    two.cores = 2
    alone, side_by_side = one.sentences(jobs), two.sentences(jobs)
    for (audio_a, emb_a), (audio_b, emb_b) in zip(alone, side_by_side):
        np.testing.assert_array_equal(audio_a, audio_b)
        np.testing.assert_array_equal(emb_a, emb_b)
    assert synth.threads[:2] == [1, 1]       # two at once: a core each
    assert synth.threads[2] == 2             # the last one, once alone: both cores
