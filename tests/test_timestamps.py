"""Word timestamps from integer durations: exact spans, tiling, chunk offsets, failure paths."""
from __future__ import annotations

import numpy as np
import pytest

from kcc.speech.g2p.g2p import Word, encode
from kcc.speech.engine import random_voice, say
from kcc.speech.audio.timestamps import SAMPLES_PER_FRAME, TimestampError, word_timestamps

from test_say import FakeSynth, LetterG2P, sentences


def _enc(*words):
    return encode([Word(t, p, ws) for t, p, ws in words])


def test_exact_spans_small_example():
    enc = _enc(("ab", "ab", True), ("c", "c", False), (".", ".", False))   # ids: a b ' ' c .
    d = np.array([2, 1, 3, 2, 4, 1, 5], np.int32)                          # bos a b sp c . eos
    ts = word_timestamps(enc, d)
    f = SAMPLES_PER_FRAME / 24000
    # 'ab' = bos + a + b + half the space; 'c' = other half + c; '.' = . + eos
    assert [w["word"] for w in ts] == ["ab", "c", "."]
    assert [w["start_s"] for w in ts] == pytest.approx([0, 7 * f, 12 * f])
    assert [w["end_s"] for w in ts] == pytest.approx([7 * f, 12 * f, 18 * f])
    assert ts[-1]["end_s"] == pytest.approx(d.sum() * f)


def test_word_without_ids_is_zero_length_in_place():
    enc = encode([Word("a", "a", True), Word("", "", False), Word("b", "b", False)])
    ts = word_timestamps(enc, np.array([1, 2, 2, 2, 1]), offset=600)
    assert ts[1]["start_s"] == ts[1]["end_s"] == ts[0]["end_s"] == ts[2]["start_s"]
    assert ts[0]["start_s"] == pytest.approx(600 / 24000)


@pytest.mark.parametrize("seed", range(25))
def test_random_chunks_tile_the_audio(seed):
    rng = np.random.default_rng(seed)
    words = [Word(f"w{i}", "ab"[: rng.integers(1, 3)] * int(rng.integers(1, 4)), bool(rng.integers(0, 2)))
             for i in range(int(rng.integers(1, 30)))]
    enc = encode(words)
    d = rng.integers(0, 9, size=len(enc.ids) + 2).astype(np.int32)
    if d.sum() == 0:
        d[0] = 1
    n = int(d.sum()) * SAMPLES_PER_FRAME
    offset = int(rng.integers(0, 10 ** 6))
    ts = word_timestamps(enc, d, n, offset)
    assert len(ts) == len(words)
    assert ts[0]["start_s"] == pytest.approx(offset / 24000)
    assert ts[-1]["end_s"] == pytest.approx((offset + n) / 24000)
    for a, b in zip(ts, ts[1:]):
        assert a["start_s"] <= a["end_s"] == b["start_s"] <= b["end_s"]


def test_scaled_when_waveform_length_differs():
    enc = _enc(("a", "a", True), ("b", "b", False))
    ts = word_timestamps(enc, np.array([1, 1, 2, 1, 1]), n_samples=3000)     # 6 frames -> 3000, not 3600
    assert ts[-1]["end_s"] == pytest.approx(3000 / 24000)
    assert ts[0]["end_s"] == pytest.approx(3000 * 3 / 6 / 24000)


@pytest.mark.parametrize("d, msg", [([1, 2, 3], "3 durations for 2 phoneme ids; expected 4"),
                                    ([1, -2, 3, 1], "non-negative"),
                                    ([1.0, 2.0, 3.0, 1.0], "integers")])
def test_bad_durations(d, msg):
    with pytest.raises(TimestampError, match=msg):
        word_timestamps(_enc(("ab", "ab", False)), np.array(d))


def test_joined_chunks_monotonic_and_cover_the_audio():
    synth = FakeSynth()
    r = say(sentences(45), synth, random_voice(0), speed=0.8, g2p=LetterG2P())
    assert len(r.chunks) >= 3
    for c in r.chunks:                   # per chunk: frames x 600 is exactly its waveform
        assert int(c.durations.sum()) * SAMPLES_PER_FRAME == c.audio.size
        assert c.words[0]["start_s"] == pytest.approx(c.offset / 24000)
        assert c.words[-1]["end_s"] == pytest.approx((c.offset + c.audio.size) / 24000)
    ts = r.words
    assert len(ts) == sum(len(c.encoded.words) for c in r.chunks)
    assert ts[0]["start_s"] == 0 and ts[-1]["end_s"] == pytest.approx(r.audio.size / 24000)
    for a, b in zip(ts, ts[1:]):
        assert a["start_s"] <= a["end_s"] == b["start_s"] <= b["end_s"]
    # the fake sounds token t at 100 + 10 t Hz: inside a word's span the audio is that word's tones
    w = next(x for x in ts if x["word"] == "several")
    mid = int((w["start_s"] + w["end_s"]) / 2 * 24000)
    seg = r.audio[mid - 300: mid + 300]
    freq = np.argmax(np.abs(np.fft.rfft(seg * np.hanning(seg.size)))) * 24000 / seg.size
    vocab_ids = [encode([Word("x", c, False)]).ids[0] for c in "several"]
    assert min(abs(freq - (100 + 10 * t)) for t in vocab_ids) < 45
