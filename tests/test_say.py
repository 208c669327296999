"""`say` end to end with a fake synthesizer: chunking, style rows, seeds, joining, the CLI."""
from __future__ import annotations

import json
import threading
import time
import wave
from types import SimpleNamespace

import numpy as np
import pytest

from kcc.model.pipeline import continuing_durations
from kcc.speech.cli import say as say_mod
from kcc.speech.g2p.g2p import PUNCTUATION, G2PError, Word, espeak_available
from kcc.speech.engine import SayError, plan, random_voice, say
from kcc.speech.text import MAX_PHONEMES
from kcc.speech.audio.timestamps import SAMPLES_PER_FRAME
from kcc.speech.audio.wav import pcm16


class FakeSynth:
    """Deterministic stand-in for kcc.model.pipeline.Synthesizer: token t lasts 1 + (3t + i) % 4 frames
    (scaled by 1/speed) and sounds a sine at 100 + 10t Hz. Records each call; `gate` (an Event)
    holds every chunk after the first (seed > 0) until it is set; `delay` sleeps per call."""

    def __init__(self, delay: float = 0.0, gate: threading.Event | None = None, fail: str | None = None):
        self.delay, self.gate, self.fail = delay, gate, fail
        self.calls: list[dict] = []
        self.active = self.max_active = 0
        self._lock = threading.Lock()

    @staticmethod
    def durations(ids, speed=1.0):
        tokens = [0, *ids, 0]
        return np.array([max(1, round((1 + (3 * t + i) % 4) / speed)) for i, t in enumerate(tokens)], np.int32)

    def chunk_durations(self, ids, speed=1.0, lead_frames=None, continues=False):
        """The durations a call synthesises, as the pipeline shapes them: the leading pause cut to
        lead_frames, and a chunk that continues another starts as continuing_durations says."""
        d = self.durations(ids, speed)
        if lead_frames is not None:
            d[0] = min(d[0], lead_frames)
        return continuing_durations(d) if continues else d

    @staticmethod
    def audio(ids, durations):
        parts = []
        for t, d in zip([0, *ids, 0], durations):
            n = np.arange(int(d) * SAMPLES_PER_FRAME)
            parts.append(0.3 * np.sin(2 * np.pi * (100 + 10 * t) * n / 24000))
        return np.concatenate(parts).astype(np.float32)

    def synthesize(self, ids, ref_s, speed=1.0, seed=0, lead_frames=None, continues=False):
        with self._lock:
            self.calls.append({"ids": list(ids), "ref_s": np.array(ref_s), "speed": speed, "seed": seed,
                               "lead_frames": lead_frames, "continues": continues})
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if self.fail:
                raise RuntimeError(self.fail)
            if self.gate is not None and seed > 0 and not self.gate.wait(10):
                raise RuntimeError("fake synthesizer: gate never opened")
            time.sleep(self.delay)
            d = self.chunk_durations(ids, speed, lead_frames, continues)
            return SimpleNamespace(audio=self.audio(ids, d), durations=d)
        finally:
            with self._lock:
                self.active -= 1


class LetterG2P:
    """Stand-in G2P: each whitespace token's lowercase letters are its phonemes (all in the
    Kokoro vocab once g is ɡ), trailing punctuation its own word, as the real backends split it."""
    backend = "letters"
    description = "letters (test double)"

    def __call__(self, text):
        words = []
        for tok in text.split():
            core = tok.rstrip("".join(PUNCTUATION))
            if core:
                letters = "".join(c for c in core.lower() if "a" <= c <= "z")
                words.append(Word(core, letters.replace("g", "ɡ"), False))   # Kokoro's g is U+0261
            words += [Word(c, c, False) for c in tok[len(core):]]
            words[-1].whitespace = True
        if words:
            words[-1].whitespace = False
        return words


def sentences(n: int) -> str:
    return " ".join(f"Sentence number {i} has several plain words, and a comma." for i in range(n))


def test_short_text_one_chunk_matches_direct_synthesis():
    synth, pack = FakeSynth(), random_voice(3)
    r = say("Hello brave world.", synth, pack, speed=1.0, seed=7, g2p=LetterG2P())
    assert len(r.chunks) == 1 and len(synth.calls) == 1
    call = synth.calls[0]
    ids = r.chunks[0].encoded.ids
    assert r.chunks[0].encoded.phonemes == "hello brave world."
    assert call["ids"] == ids and call["seed"] == 7 and call["speed"] == 1.0
    np.testing.assert_array_equal(call["ref_s"], pack[len("hello brave world.") - 1])   # pack[len(ps) - 1]
    np.testing.assert_array_equal(r.audio, FakeSynth.audio(ids, FakeSynth.durations(ids)))
    assert [w["word"] for w in r.words] == ["Hello", "brave", "world", "."]


def test_long_text_chunks_join_in_order():
    synth, pack = FakeSynth(), random_voice(0)
    text = sentences(40)
    r = say(text, synth, pack, speed=1.25, seed=100, g2p=LetterG2P())
    assert len(r.chunks) > 1
    assert all(len(c.encoded.ids) <= MAX_PHONEMES for c in r.chunks)
    assert [w.text for c in r.chunks for w in c.encoded.words] == [w.text for w in LetterG2P()(text)]
    assert [c["seed"] for c in synth.calls] == [100 + i for i in range(len(r.chunks))]
    expect = [FakeSynth.audio(c.encoded.ids, FakeSynth.durations(c.encoded.ids, 1.25)) for c in r.chunks]
    np.testing.assert_array_equal(r.audio, np.concatenate(expect))
    offsets = np.cumsum([0] + [e.size for e in expect[:-1]])
    assert [c.offset for c in r.chunks] == list(offsets)
    for c, call in zip(r.chunks, synth.calls):
        np.testing.assert_array_equal(call["ref_s"], pack[len(c.encoded.phonemes) - 1])
        assert c.encoded.words[-1].phonemes in ".,"          # cut at a sentence end or comma


def test_paragraphs_are_separate_chunks():
    r = say("First paragraph here.\n\nSecond one.", FakeSynth(), random_voice(0), g2p=LetterG2P())
    assert [c.encoded.text for c in r.chunks] == ["First paragraph here.", "Second one."]


def test_voice_blend_from_files(tmp_path):
    a, b = random_voice(1), random_voice(2)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    synth = FakeSynth()
    say("Blend me.", synth, "a.npy:0.75,b.npy:0.25", g2p=LetterG2P(), search=[tmp_path])
    np.testing.assert_allclose(synth.calls[0]["ref_s"], (0.75 * a + 0.25 * b)[len("blend me.") - 1], atol=1e-7)


@pytest.mark.parametrize("text, speed, exc, msg", [
    ("   \n ", 1.0, SayError, "empty"),
    ("Hello.", 0.0, SayError, "speed"),
    ("Hello.", float("nan"), SayError, "speed"),
    (b"caf\xe9 ole", 1.0, G2PError, "offset 3"),
    ("!!! ...", 1.0, None, None),
])
def test_say_errors(text, speed, exc, msg):
    if exc is None:   # punctuation alone still has phonemes (Kokoro has ids for it)
        assert say(text, FakeSynth(), random_voice(0), speed, g2p=LetterG2P()).audio.size > 0
        return
    with pytest.raises(exc, match=msg):
        say(text, FakeSynth(), random_voice(0), speed, g2p=LetterG2P())


def test_plan_reports_unknown_symbols():
    class Odd(LetterG2P):
        def __call__(self, text):
            return [Word("click", "kʘk", True), Word("ok", "ok", False)]
    with pytest.warns(UserWarning, match=r"'ʘ' \(U\+0298\) at 1 in word 'click'"):
        (enc,) = plan("click ok", Odd())
    assert enc.phonemes == "kʘk ok" and len(enc.ids) == 5 and enc.unknown[0].word == 0


def _cli(monkeypatch, capsys, argv, synth=None):
    from kcc import cli
    monkeypatch.setattr(say_mod, "load_synthesizer", lambda ckpt, max_frames=None, native=False, threads=None, precision=None: synth or FakeSynth())
    monkeypatch.setattr(say_mod, "G2P", lambda lang, backend, **kw: LetterG2P())
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_say_writes_wav_and_timestamps(tmp_path, monkeypatch, capsys):
    wav_path, ts_path = tmp_path / "out.wav", tmp_path / "ts.json"
    np.save(tmp_path / "v.npy", random_voice(0))
    rc, out, err = _cli(monkeypatch, capsys, ["say", sentences(30), "-o", str(wav_path), "--timestamps",
                                              str(ts_path), "--seed", "5", "--progress", "--voice", str(tmp_path / "v.npy")])
    assert rc == 0, err
    assert "kcc say: [" in err and "% of the text" in err and "chunks" in err
    with wave.open(str(wav_path)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24000, 1, 2)
        n = w.getnframes()
        assert w.readframes(n) == pcm16(say(sentences(30), FakeSynth(), random_voice(0), seed=5, g2p=LetterG2P()).audio)
    ts = json.loads(ts_path.read_text(encoding="utf-8"))
    assert ts["audio_seconds"] == pytest.approx(n / 24000) and len(ts["chunks"]) > 1
    assert ts["words"][0]["start_s"] == 0 and ts["words"][-1]["end_s"] == pytest.approx(n / 24000)
    starts = [w["start_s"] for w in ts["words"]]
    assert starts == sorted(starts)


class ReleasingSynth(FakeSynth):
    """Records release_weights_after_use(); `refuse` raises as a model compiled in memory does."""

    def __init__(self, refuse=False):
        super().__init__()
        self.refuse, self.released = refuse, 0

    def release_weights_after_use(self, on=True):
        from kcc.compiler.runtime import WeightReleaseError
        if self.refuse:
            raise WeightReleaseError("stage x: the weights are not a read-only file mapping")
        self.released += 1


@pytest.mark.parametrize("refuse", [False, True])
def test_cli_say_releases_weights_between_stages_where_it_can(tmp_path, monkeypatch, capsys, refuse):
    synth = ReleasingSynth(refuse)
    rc, _, err = _cli(monkeypatch, capsys, ["say", sentences(3), "-o", str(tmp_path / "o.wav")], synth=synth)
    assert rc == 0, err
    assert synth.released == (0 if refuse else 1) and synth.calls           # spoken either way
    assert (tmp_path / "o.wav").stat().st_size > 44


def test_cli_say_refuses_bad_input(tmp_path, monkeypatch, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe")
    rc, _, err = _cli(monkeypatch, capsys, ["say", "--text-file", str(bad), "-o", str(tmp_path / "x.wav")])
    assert rc == 2 and "not valid UTF-8" in err and "offset 3" in err
    rc, _, err = _cli(monkeypatch, capsys, ["say", "hi", "-o", str(tmp_path / "x.wav"), "--voice", "nope"])
    assert rc == 2 and "voice 'nope'" in err
    rc, _, err = _cli(monkeypatch, capsys, ["say", "hi", "-o", str(tmp_path / "x.wav"), "--speed", "9"])
    assert rc == 2 and "speed" in err
    assert not (tmp_path / "x.wav").exists()


@pytest.mark.skipif(not espeak_available()[0], reason=f"espeak G2P unavailable: {espeak_available()[1]}")
def test_say_with_real_g2p():
    from kcc.speech.g2p.g2p import G2P
    synth = FakeSynth()
    r = say("The quick brown fox jumps over the lazy dog. It was 42 degrees!", synth, None, g2p=G2P("en-us", "espeak"))
    assert r.chunks[0].encoded.phonemes == "ðə kwˈɪk bɹˈWn fˈɑks ʤˈʌmps ˌOvəɹ ðə lˈAzi dˈɑɡ. ɪt wʌz fˈɔɹTi tˈu dᵻɡɹˈiz!"
    assert [w["word"] for w in r.words] == ["The", "quick", "brown", "fox", "jumps", "over", "the", "lazy",
                                            "dog", ".", "It", "was", "42", "degrees", "!"]
    assert r.words[12]["phonemes"] == "fˈɔɹTi tˈu"          # one text word, two espeak words
    assert r.words[-1]["end_s"] == pytest.approx(r.audio.size / 24000)


def test_cli_argv_that_is_not_utf8(tmp_path):
    import subprocess
    import sys
    root = str(__import__("pathlib").Path(__file__).parents[1])
    p = subprocess.run([sys.executable, "-m", "kcc.cli", "say", b"caf\xe9 au lait", "-o", str(tmp_path / "x.wav")],
                       cwd=root, capture_output=True, timeout=120)
    assert p.returncode == 2, p.stderr
    assert b"the text argument is not valid UTF-8: byte 0xe9 at offset 3" in p.stderr
