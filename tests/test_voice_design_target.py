"""The target recording: each way it can be unusable is a named error (or, for several speakers, a
warning), and any rate or container decodes to the same voice."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from kcc.compiler.xray import load_pinned
from kcc.speech.voice_design import target as tg
from kcc.speech.voice_design.encoder import SpeakerEncoder
from kcc.speech.audio.wav import write_wav

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "voice_encoder"


@pytest.fixture(scope="module")
def speech():
    """5.6 s of kcc speaking (af_heart) at 16 kHz, from the encoder's pinned capture."""
    return load_pinned("resemblyzer", "speech", FIXTURES).inputs["wav16k"].astype(np.float32) / 32767


@pytest.fixture(scope="module")
def encoder():
    return SpeakerEncoder()


def test_other_rates_and_containers_decode_to_the_same_voice(speech, encoder, tmp_path):
    reference = tg.embed_target([(speech, 16_000, "16k")], encoder)
    path = write_wav(tmp_path / "t44.wav", tg.resample(speech, 16_000, to=44_100), sample_rate=44_100)
    samples, rate = tg.decode(path)
    assert rate == 44_100 and abs(samples.size - round(speech.size * 44_100 / 16_000)) <= 1
    got = tg.load_targets([path], encoder)
    assert float(got.embedding @ reference.embedding) > 0.99
    assert got.voiced_s == pytest.approx(reference.voiced_s, abs=0.1)
    # af_heart's speaking pitch (a female voice: ~180-240 Hz), the same at either rate
    assert 170 < reference.f0 < 250 and got.f0 == pytest.approx(reference.f0, rel=0.03)


def test_resample_keeps_a_tone_in_band():
    t = np.arange(24_000) / 24_000
    out = tg.resample(np.sin(2 * np.pi * 1000 * t), 24_000)
    assert out.size == 16_000
    np.testing.assert_allclose(out, np.sin(2 * np.pi * 1000 * np.arange(16_000) / 16_000), atol=1e-6)


def test_not_audio_is_refused(tmp_path, encoder):
    bad = tmp_path / "notes.wav"
    bad.write_text("these are not samples\n" * 50)
    with pytest.raises(tg.NotAudioError, match="not audio"):
        tg.load_targets([bad], encoder)
    with pytest.raises(tg.NotAudioError, match="no such file"):
        tg.load_targets([tmp_path / "missing.wav"], encoder)


def test_silence_is_refused(tmp_path, encoder):
    path = write_wav(tmp_path / "quiet.wav", np.zeros(16_000 * 5, np.float32), sample_rate=16_000)
    with pytest.raises(tg.SilentTargetError, match="silence"):
        tg.load_targets([path], encoder)


def test_too_short_is_refused(speech, encoder):
    with pytest.raises(tg.TargetTooShortError, match=r"at least 3 s"):
        tg.embed_target([(speech[:16_000 * 2], 16_000, "two seconds")], encoder)


def test_too_long_is_refused_before_decoding(tmp_path, encoder):
    path = write_wav(tmp_path / "long.wav", np.zeros(8_000 * 302, np.float32), sample_rate=8_000)
    with pytest.raises(tg.TargetTooLongError, match="at most 300 s"):
        tg.load_targets([path], encoder)
    with pytest.raises(tg.TargetTooLongError):
        tg.check_voice(np.ones(16_000 * 302, np.float32) * 0.1, "array")


def test_music_is_refused(encoder):
    t = np.arange(16_000 * 6) / 16_000
    chord = sum(0.1 * np.sin(2 * np.pi * f * t) * (np.sin(2 * np.pi * 0.5 * k * t) > 0)
                for k, f in enumerate([220, 277, 330, 440], 1))
    with pytest.raises(tg.NotSpeechError, match="music or noise"):
        tg.embed_target([(chord.astype(np.float32), 16_000, "chord")], encoder)


def test_several_speakers_are_warned_not_refused(speech, encoder):
    one = tg.embed_target([(speech, 16_000, "one")], encoder)
    assert one.consistency > tg.MIN_CONSISTENCY
    other = tg.resample(speech, 16_000, to=24_000)           # played at 16 kHz: slower, a deeper voice
    turns = np.concatenate([part for k in range(0, speech.size, 32_000) for part in (speech[k:k + 32_000],
                                                                                      other[k:k + 32_000])])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        two = tg.embed_target([(turns, 16_000, "two")], encoder)
    assert [w.category for w in caught] == [tg.SeveralVoicesWarning]
    assert two.consistency < tg.MIN_CONSISTENCY
