"""The voice search on a stand-in synthesiser (fast, deterministic) with the real speaker encoder:
start from the best blend, improve, guard, resume, reproduce; and the command's request checks
and pack layouts."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from kcc.compiler.xray import load_pinned
from kcc.speech.voice_design import run as vrun
from kcc.speech.voice_design.encoder import SpeakerEncoder
from kcc.speech.voice_design.pitch import pitch_stats
from kcc.speech.voice_design import search as search_module
from kcc.model.kokoro import STYLE_DEC, STYLE_PRED
from kcc.speech.voice_design.search import (CLIP, HEARD_MIN, LOGIT_SIGMA_MIN, SIGMA_MIN, DesignError, Guard, PoolCache, Scorer,
                                            Search, StateMismatchError, fit_blend, local_direction, make_pack)
from kcc.speech.voice_design.target import resample
from kcc.speech.voices import load_pack, style_mean

ROOT = Path(__file__).resolve().parent.parent
SPEECH = load_pinned("resemblyzer", "speech", ROOT / "fixtures" / "voice_encoder").inputs["wav16k"].astype(np.float32) / 32767
SHORT = SPEECH[:16_000 * 7 // 2]          # 3.5 s: two partials per candidate keeps each step cheap


def playback_factor(style: np.ndarray) -> float:
    return float(1.0 + 0.35 * np.tanh(3.0 * (style[0, :16].mean() - style_mean()[:16].mean())))


class PitchSynth:
    """Speaks the pinned af_heart utterance played faster or slower (a higher or lower voice) as
    the first 16 style values rise or fall: a voice the encoder tells apart, in milliseconds."""

    def __init__(self):
        self.calls = 0

    def synthesize(self, ids, style, speed=1.0, seed=0):
        self.calls += 1
        f = playback_factor(style)
        return SimpleNamespace(audio=0.5 * resample(SHORT, 16_000, to=int(24_000 / f)))


def pack_at(shift: float) -> np.ndarray:
    rng = np.random.default_rng(int(round(shift * 100)) + 100)
    row = style_mean() + 0.2 * rng.standard_normal(256)
    row[:16] += shift
    return np.tile(row.astype(np.float32), (510, 1, 1))


CHUNKS = [SimpleNamespace(ids=[5, 6, 7], phonemes="abc")]


@pytest.fixture(scope="module")
def encoder():
    return SpeakerEncoder()


@pytest.fixture(scope="module")
def setup(encoder):
    packs = {"low": pack_at(-0.4), "mid": pack_at(0.0), "high": pack_at(0.45)}
    scorer = Scorer(PitchSynth(), CHUNKS, encoder)
    target = scorer.embed(scorer.audio(pack_at(0.2)))          # between "mid" and "high"
    return scorer, packs, target


def search(setup, path, seed=0, cache=None):
    scorer, packs, target = setup
    return Search(scorer, packs, target, "en-us", seed, path, pool_cache=cache)


@pytest.fixture(scope="module")
def started(setup, tmp_path_factory):
    """One start (pool scored into a cache, then the blends), its state file copied by each test."""
    root = tmp_path_factory.mktemp("started")
    s = search(setup, root / "state.json", cache=PoolCache(root / "pool.json", "stand-in"))
    s.start()
    return root


def resumed(setup, started, path, seed=0):
    shutil.copy(started / "state.json", path)
    s = search(setup, path, seed)
    s.resume_or_start()
    return s


def test_start_is_the_best_blend_of_the_pool(started):
    state = json.loads((started / "state.json").read_text())
    assert set(state["pool_scores"]) == {"low", "mid", "high"}
    assert state["top"][0] in ("mid", "high") and state["top"][-1] == "low"
    assert state["start_score"] == state["score"] >= max(state["pool_scores"].values())
    assert state["step"] == 0 and state["pool_scores"]["low"] < max(state["pool_scores"].values()) - 0.02


def test_steps_never_lose_similarity_are_reproducible_and_resume(setup, started, tmp_path):
    straight = resumed(setup, started, tmp_path / "a.json")
    end = straight.run(steps=3)
    assert end.step == 3 and end.score >= end.start_score
    assert json.loads((tmp_path / "a.json").read_text())["score"] == end.score
    interrupted = resumed(setup, started, tmp_path / "b.json")
    interrupted.run(steps=1)                                     # Ctrl-C after one step
    again = search(setup, tmp_path / "b.json")
    assert again.resume_or_start().step == 1
    again.run(steps=3)
    assert again.state.logits == end.logits and again.state.offset == end.offset and again.state.score == end.score
    np.testing.assert_array_equal(again.pack(), straight.pack())


def test_the_blend_keeps_moving_once_the_offset_steps_are_small(setup, started, tmp_path, monkeypatch):
    """The blend's logits step by LOGIT_SIGMA_MIN at least: at the offset's smallest step size a
    softmax-saturated blend (one voice ~1) would otherwise never move again."""
    s = resumed(setup, started, tmp_path / "s.json")
    s.state.sigma = s.state.sigma_guided = SIGMA_MIN
    tried = []
    real = search_module.make_pack
    monkeypatch.setattr(search_module, "make_pack", lambda packs, logits, offset: (
        tried.append((np.asarray(logits) - np.asarray(s.state.logits), np.asarray(offset) - np.asarray(s.state.offset))),
        real(packs, logits, offset))[1])
    s.run(steps=6)
    logit_steps = np.concatenate([d for d, _ in tried])
    assert logit_steps.std() > 0.15         # ~N(0, >= 0.3) each, 18 draws (the offset's own size: 0.05)
    assert max(np.abs(o).max() for _, o in tried) > 0                      # the offset still moves too


def test_the_offset_moves_the_decoder_half_and_the_guide_learns_from_each_step(setup, started, tmp_path, monkeypatch):
    """The predictor's half of a row (durations, pitch) stays the blend's; every candidate heard
    leaves (its style step, its embedding step against the incumbent) for the local model, and
    once HEARD_MIN are heard every other step is guided by it."""
    s = resumed(setup, started, tmp_path / "s.json")
    guided = []
    real = search_module.local_direction
    monkeypatch.setattr(search_module, "local_direction", lambda *a, **k: guided.append(len(a[0])) or real(*a, **k))
    steps = HEARD_MIN + 6
    s.run(steps=steps)
    offset = np.asarray(s.state.offset)
    assert np.abs(offset[STYLE_PRED]).max() == 0 and np.abs(offset[STYLE_DEC]).max() > 0
    assert s.state.accepted > 0
    assert len(s.state.heard) == steps
    for step, moved in s.state.heard:
        assert len(step) == 256 and len(moved) == 256
    # the style steps' predictor half is the logits' move only: far smaller than the offset's
    u = np.array([step for step, _ in s.state.heard])
    assert np.abs(u[:, STYLE_PRED]).mean() < np.abs(u[:, STYLE_DEC]).mean()
    assert guided == [n for n in range(HEARD_MIN, steps) if n % 2 == 0]      # the candidates heard before it


def test_a_state_of_another_design_is_not_resumed(setup, started, tmp_path):
    shutil.copy(started / "state.json", tmp_path / "s.json")
    with pytest.raises(StateMismatchError, match="--restart"):
        search(setup, tmp_path / "s.json", seed=1).resume_or_start()


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"version": 1, "surprise": 2}', '{"version": 99}'])
def test_a_damaged_state_file_is_a_named_error(setup, tmp_path, text):
    (tmp_path / "s.json").write_text(text)
    with pytest.raises(StateMismatchError, match="--restart"):
        search(setup, tmp_path / "s.json").resume_or_start()


def test_pool_cache_scores_each_voice_once(setup, started, tmp_path):
    scorer = setup[0]
    assert len(json.loads((started / "pool.json").read_text())) == 3
    calls = scorer.synth.calls
    again = search(setup, tmp_path / "s.json", cache=PoolCache(started / "pool.json", "stand-in")).start()
    assert scorer.synth.calls - calls == 4                      # the four start blends only, no pool voice
    assert again.pool_scores == json.loads((started / "state.json").read_text())["pool_scores"]


def test_guard_refuses_clipping_loudness_length_and_implausible_packs():
    guard = Guard.from_pool([0.05, 0.1], [2.0, 3.0])
    pack = pack_at(0.0)
    ok = 0.1 * np.sin(np.arange(24_000 * 2) / 10.0).astype(np.float32)
    assert guard.problem(ok, pack) is None
    assert "clipping" in guard.problem(ok / 0.1 * CLIP, pack)
    assert "loudness" in guard.problem(ok * 0.1, pack)
    assert "length" in guard.problem(np.tile(ok, 3), pack)
    assert "not finite" in guard.problem(np.full(48_000, np.nan, np.float32), pack)
    assert "not a voice" in guard.problem(ok, np.zeros_like(pack) + 0.5)


def saw(f0: float, seconds: float = 2.0) -> np.ndarray:
    t = np.arange(int(24_000 * seconds)) / 24_000
    return (0.2 * ((t * f0) % 1.0 - 0.5)).astype(np.float32)


@pytest.mark.parametrize("f0", [80.0, 140.0, 220.0, 330.0])
def test_pitch_stats_hear_the_period_not_its_multiples(f0):
    got, voiced = pitch_stats(saw(f0), 24_000)
    assert abs(got / f0 - 1) < 0.03 and voiced == 1.0
    assert pitch_stats(np.random.default_rng(0).standard_normal(48_000).astype(np.float32) * 0.1, 24_000) == (0.0, 0.0)


def test_guard_refuses_a_pitch_or_a_voicing_no_official_voice_has():
    guard = Guard.from_pool([0.05, 0.1], [1.5, 3.0], f0=[160.0, 240.0], voiced=[0.8, 0.9])
    pack = pack_at(0.0)
    assert guard.problem(saw(200.0), pack) is None
    assert "median pitch 100 Hz outside the allowed 139..276 Hz" in guard.problem(saw(100.0), pack)
    assert "median pitch" in guard.problem(saw(350.0), pack)
    half = np.concatenate([saw(200.0, 1.0), np.random.default_rng(1).standard_normal(24_000).astype(np.float32) * 0.07])
    assert "voiced share 0.51 under the official voices' 0.68" in guard.problem(half, pack)
    # a target's pitch narrows the range to within 1.2x of it, inside the official voices'
    near = Guard.from_pool([0.05, 0.1], [1.5, 3.0], f0=[100.0, 240.0], voiced=[0.8, 0.9], target_f0=200.0)
    assert near.f0 == pytest.approx((200 / 1.2, 200 * 1.2))
    assert near.problem(saw(200.0), pack) is None and "median pitch 119 Hz outside the allowed 167..240 Hz" in near.problem(saw(120.0), pack)
    # a target outside every official voice's pitch: its own band
    assert Guard.from_pool([0.05, 0.1], [1.5, 3.0], f0=[100.0, 140.0], voiced=[0.8], target_f0=300.0).f0 == \
        pytest.approx((250.0, 360.0))
    # a start below the target's band (a male voice for a high-pitched recording): the band reaches
    # down to it (with the pool's sentence-to-sentence margin), so a step up toward the target passes
    # and a step well under the start does not
    low = near.reaching(120.0)
    assert low.f0 == pytest.approx((120 / 1.15, 200 * 1.2))
    assert low.problem(saw(110.0), pack) is None and low.problem(saw(180.0), pack) is None
    assert "outside the allowed 104..240 Hz" in low.problem(saw(95.0), pack)
    assert near.reaching(180.0) is near                      # inside the band: unchanged
    # a state saved before the pitch guard: read without one
    old = Guard.from_state({"rms": [0.04, 0.12], "seconds": [1.0, 4.0]})
    assert old.f0 is None and old.problem(saw(100.0), pack) is None
    assert old.reaching(100.0).f0 is None                  # and a start's pitch gives it none


def test_fit_blend_finds_the_mixture_behind_a_target():
    rng = np.random.default_rng(5)
    e = rng.standard_normal((5, 256))
    e /= np.linalg.norm(e, axis=1, keepdims=True)
    target = 0.7 * e[1] + 0.3 * e[3]
    w = fit_blend(e, target / np.linalg.norm(target))
    assert w.sum() == pytest.approx(1.0) and (w >= 0).all()
    np.testing.assert_allclose(w, [0, 0.7, 0, 0.3, 0], atol=0.02)


def test_local_direction_turns_the_embedding_toward_the_target():
    rng = np.random.default_rng(6)
    jac = rng.standard_normal((128, 256)) / 16
    at = rng.standard_normal(256)
    at /= np.linalg.norm(at)
    target = rng.standard_normal(256)
    target /= np.linalg.norm(target)
    u = 0.2 * rng.standard_normal((48, 128))
    g = local_direction(u, u @ jac, target, at)
    assert np.linalg.norm(g) == pytest.approx(1.0)

    def similarity(step):               # the modelled embedding after a small step, against the target
        e = at + step @ jac
        return float(e @ target / np.linalg.norm(e))

    # a small step along it raises the similarity more than any of 40 random unit steps does
    randoms = rng.standard_normal((40, 128))
    assert similarity(0.05 * g) - similarity(0 * g) > 0
    assert similarity(0.05 * g) > max(similarity(0.05 * r / np.linalg.norm(r)) for r in randoms)
    # the part of the target along `at` only rescales the embedding: the direction ignores it
    np.testing.assert_allclose(local_direction(u, u @ jac, target + 3 * at, at), g, atol=1e-9)


def test_make_pack_blends_then_offsets_every_row():
    a, b = pack_at(0.0), pack_at(0.4)
    offset = np.linspace(-0.1, 0.1, 256)
    got = make_pack(np.stack([a, b]), np.array([0.0, np.log(3.0)]), offset)
    np.testing.assert_allclose(got, 0.25 * a + 0.75 * b + offset.astype(np.float32), atol=1e-6)


@pytest.mark.parametrize("suffix", [".pt", ".npy", ".bin"])
def test_packs_are_written_in_every_layout_the_front_ends_read(tmp_path, suffix):
    pack = pack_at(0.1)
    path = vrun.write_pack(pack, tmp_path / f"mine{suffix}")
    np.testing.assert_array_equal(load_pack(str(path)), pack)


@pytest.mark.parametrize("change, message", [
    ({"out": Path("voice.wav")}, "written as .pt, .npy, .bin"),
    ({"language": "tlh"}, "not one of"),
    ({"pool": ["af_heart", "zz_nobody"]}, "no voice named zz_nobody"),
    ({"minutes": 0}, "--minutes 0"),
    ({"steps": -1}, "--steps -1"),
])
def test_requests_are_checked_before_anything_loads(change, message):
    req = vrun.DesignRequest(targets=[Path("t.wav")], out=Path("v.pt"), pool=["af_heart"])
    for k, v in change.items():
        setattr(req, k, v)
    with pytest.raises(DesignError, match=message):
        vrun.check_request(req)


def test_design_voice_writes_the_pack_and_continues(tmp_path, encoder):
    from kcc.speech.audio.wav import write_wav
    target = write_wav(tmp_path / "me.wav", resample(SPEECH, 16_000, to=int(16_000 / 1.1)), sample_rate=16_000)
    req = vrun.DesignRequest(targets=[target], out=tmp_path / "me.pt", pool=["af_heart", "am_adam"], steps=1)
    first = vrun.run_design(req, synth=PitchSynth(), encoder=encoder)
    assert first.steps == 1 and first.end >= first.start and (tmp_path / "me.pt.design.json").is_file()
    req.steps = 2
    second = vrun.run_design(req, synth=PitchSynth(), encoder=encoder)
    assert second.steps == 2 and second.end >= first.end
    np.testing.assert_array_equal(load_pack(str(tmp_path / "me.pt")), second.pack)


def test_help_lists_the_command_without_loading_it():
    code = ("import sys; from kcc.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(sorted(m for m in sys.modules if m.startswith('kcc.speech.voice_design')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert "voice" in out and out.strip().splitlines()[-1] == "['kcc.speech.voice_design', 'kcc.speech.voice_design.cli']"


@pytest.mark.parametrize("argv, message", [
    (["voice", "design", "t.wav", "-o", "mine.wav"], "DesignError: -o mine.wav: a voice pack is written as"),
    (["voice", "design", "{notes}", "-o", "mine.pt", "--pool", "af_heart"], "NotAudioError: "),
])
def test_the_command_names_the_error_and_exits_2(tmp_path, argv, message):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a recording\n" * 40)
    argv = [a.replace("{notes}", str(notes)) for a in argv]
    res = subprocess.run([sys.executable, "-m", "kcc.cli", *argv], capture_output=True, text=True, cwd=tmp_path,
                         env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert res.returncode == 2 and message in res.stderr
    assert not (tmp_path / "mine.pt").exists()
