"""`kcc say` behaves as a command-line tool is expected to: the format follows the extension
(or --format), -o - streams to stdout with every message on stderr, text comes from a pipe,
--subtitles writes captions, one seed check everywhere, and the exit codes are documented.
The synthesizer and G2P are test_say's doubles (the real model is exercised by test_api)."""
from __future__ import annotations

import io
import re
import sys
import types

import av
import numpy as np
import pytest

from kcc import cli
from kcc.speech import engine
from kcc.speech.cli import say as say_mod
from kcc.speech.engine import random_voice, say
from kcc.speech.audio.wav import pcm16
from tests.test_say import FakeSynth, LetterG2P, sentences

TEXT = "Hello there, friend. This is a second sentence with more words in it."


@pytest.fixture
def voice(tmp_path):
    path = tmp_path / "v.npy"
    np.save(path, random_voice(0))
    return str(path)


def _run(monkeypatch, capsysbinary, argv, synth=None, stdin=None):
    """(exit code, stdout bytes, stderr text, the synthesizer); stdin: a file-like for sys.stdin."""
    synth = synth or FakeSynth()
    for front in (say_mod, engine):        # kcc say, and kcc synth (which loads through the engine)
        monkeypatch.setattr(front, "load_synthesizer", lambda *a, **k: synth)
    monkeypatch.setattr(say_mod, "G2P", lambda lang, backend, **kw: LetterG2P())
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", stdin)
    rc = cli.main(argv)
    out = capsysbinary.readouterr()
    return rc, out.out, out.err.decode(), synth


def _expected(text=TEXT, seed=0) -> np.ndarray:
    return say(text, FakeSynth(), random_voice(0), seed=seed, g2p=LetterG2P()).audio


def _decode(data_or_path) -> tuple[str, np.ndarray, int]:
    src = io.BytesIO(data_or_path) if isinstance(data_or_path, bytes) else str(data_or_path)
    with av.open(src) as c:
        st = c.streams.audio[0]
        frames = [f.to_ndarray().reshape(-1) for f in c.decode(st)]
        return c.format.name, np.concatenate(frames), st.sample_rate


# -- the format follows the extension ------------------------------------------------------------------
@pytest.mark.parametrize("name, container, lossless", [
    ("out.wav", "wav", True), ("out.WAV", "wav", True), ("out.flac", "flac", True), ("out.mp3", "mp3", False),
    ("out.ogg", "ogg", False), ("out.opus", "ogg", False), ("out.m4a", "mov,mp4,m4a,3gp,3g2,mj2", False),
    ("out.aac", "aac", False),
])
def test_the_extension_picks_the_format(tmp_path, monkeypatch, capsysbinary, voice, name, container, lossless):
    path = tmp_path / name
    rc, out, err, _ = _run(monkeypatch, capsysbinary, ["say", TEXT, "-o", str(path), "--voice", voice])
    assert rc == 0, err
    fmt, samples, rate = _decode(path)
    expected = _expected()
    assert fmt == container
    if lossless:
        assert rate == 24000
        np.testing.assert_array_equal(samples, np.frombuffer(pcm16(expected), "<i2"))
    else:                       # a codec's padding and resampling (Opus decodes at 48 kHz)
        assert abs(samples.size / rate - expected.size / 24000) < 0.1
    assert out.decode().startswith(f"{path}: ") and list(tmp_path.glob(".*part")) == []


def test_format_flag_agrees_with_or_replaces_the_extension(tmp_path, monkeypatch, capsysbinary, voice):
    rc, _, err, _ = _run(monkeypatch, capsysbinary, ["say", TEXT, "-o", str(tmp_path / "a.flac"), "--format", "flac",
                                                     "--voice", voice])
    assert rc == 0, err
    assert _decode(tmp_path / "a.flac")[0] == "flac"


@pytest.mark.parametrize("name, fmt", [("out.mp3", "wav"), ("out.wav", "flac"), ("out.ogg", "mp3"),
                                       ("out.flac", "opus")])
def test_a_format_the_extension_contradicts_is_refused(tmp_path, monkeypatch, capsysbinary, voice, name, fmt):
    rc, _, err, synth = _run(monkeypatch, capsysbinary, ["say", TEXT, "-o", str(tmp_path / name), "--format", fmt,
                                                         "--voice", voice])
    assert rc == 2 and "AudioFormatError" in err and "--format says" in err
    assert synth.calls == [] and list(tmp_path.iterdir()) == [tmp_path / "v.npy"]


@pytest.mark.parametrize("name", ["out.xyz", "out", "out.txt", "out.wav.bak", "archive.tar.gz", ".wav"])
def test_an_unknown_extension_is_refused_before_synthesis(tmp_path, monkeypatch, capsysbinary, voice, name):
    rc, out, err, synth = _run(monkeypatch, capsysbinary, ["say", TEXT, "-o", str(tmp_path / name), "--voice", voice])
    assert rc == 2 and "AudioFormatError" in err and "names no audio format" in err and "--format" in err
    assert synth.calls == [] and out == b"" and list(tmp_path.iterdir()) == [tmp_path / "v.npy"]


# -- -o - streams to stdout ----------------------------------------------------------------------------------
class WatchingSynth(FakeSynth):
    """Records how many bytes stdout held when each chunk's synthesis began."""

    def __init__(self):
        super().__init__()
        self.stdout_at: list[int] = []

    def synthesize(self, ids, ref_s, **kw):
        self.stdout_at.append(len(sys.stdout.buffer.getvalue()))
        return super().synthesize(ids, ref_s, **kw)


def test_stdout_gets_a_streamed_wav_chunk_by_chunk_and_nothing_else(monkeypatch, capsysbinary, voice):
    text = sentences(12)
    synth = WatchingSynth()
    rc, out, err, _ = _run(monkeypatch, capsysbinary, ["say", text, "-o", "-", "--voice", voice], synth=synth)
    assert rc == 0, err
    assert out[:4] == b"RIFF" and out[8:16] == b"WAVEfmt "
    fmt, samples, rate = _decode(out)
    assert (fmt, rate) == ("wav", 24000)
    np.testing.assert_array_equal(samples, np.frombuffer(pcm16(_expected(text)), "<i2"))
    assert len(synth.stdout_at) >= 3 and synth.stdout_at[0] == 0
    assert all(b > a for a, b in zip(synth.stdout_at[1:], synth.stdout_at[2:]))   # each chunk sent before the next
    assert "-: " in err and "chunk(s)" in err                                       # the summary on stderr


@pytest.mark.parametrize("fmt, container", [("mp3", "mp3"), ("flac", "flac"), ("opus", "ogg"), ("aac", "aac")])
def test_stdout_carries_the_asked_format(monkeypatch, capsysbinary, voice, fmt, container):
    rc, out, err, _ = _run(monkeypatch, capsysbinary, ["say", TEXT, "-o", "-", "--format", fmt, "--voice", voice])
    assert rc == 0, err
    assert _decode(out)[0] == container and "-: " in err


def test_stdout_refuses_m4a(monkeypatch, capsysbinary, voice):
    rc, out, err, synth = _run(monkeypatch, capsysbinary, ["say", TEXT, "-o", "-", "--format", "m4a", "--voice", voice])
    assert rc == 2 and "cannot be streamed" in err and out == b"" and synth.calls == []


# -- text from stdin; never two texts --------------------------------------------------------------------
class Pipe:
    def __init__(self, data: bytes, tty: bool = False):
        self.buffer, self._tty = io.BytesIO(data), tty

    def isatty(self) -> bool:
        return self._tty


def test_text_comes_from_a_pipe_when_none_is_given(tmp_path, monkeypatch, capsysbinary, voice):
    path = tmp_path / "piped.wav"
    rc, _, err, _ = _run(monkeypatch, capsysbinary, ["say", "-o", str(path), "--voice", voice],
                         stdin=Pipe(TEXT.encode()))
    assert rc == 0, err
    np.testing.assert_array_equal(_decode(path)[1], np.frombuffer(pcm16(_expected()), "<i2"))


def test_a_terminal_is_not_read_for_text(tmp_path, monkeypatch, capsysbinary, voice):
    rc, _, err, synth = _run(monkeypatch, capsysbinary, ["say", "-o", str(tmp_path / "x.wav"), "--voice", voice],
                             stdin=Pipe(b"never read", tty=True))
    assert rc == 2 and "UsageError" in err and "no text" in err and synth.calls == []


@pytest.mark.parametrize("text, text_file", [(TEXT, "FILE"), (TEXT, "-"), ("", "FILE"), ("x", "/nonexistent")])
def test_a_text_and_a_text_file_together_are_refused(tmp_path, monkeypatch, capsysbinary, voice, text, text_file):
    f = tmp_path / "t.txt"
    f.write_text("from the file")
    out_path = tmp_path / "x.wav"
    rc, _, err, synth = _run(monkeypatch, capsysbinary,
                             ["say", text, "--text-file", str(f) if text_file == "FILE" else text_file,
                              "-o", str(out_path), "--voice", voice], stdin=Pipe(b"piped"))
    assert rc == 2 and "UsageError" in err and "not both" in err
    assert synth.calls == [] and not out_path.exists()


# -- one checkpoint rule -------------------------------------------------------------------------------------
class _Loaded(Exception):
    """The stand-in loader's stop: the command got as far as loading the model, with this checkpoint."""


@pytest.mark.parametrize("argv", [["say", TEXT, "-o", "{tmp}/x.wav"], ["synth", "--ids", "50,83", "-o", "{tmp}/x.wav"],
                                  ["export", "{tmp}/runner"], ["batch", "{tmp}/lines.txt", "-o", "{tmp}/out"],
                                  ["book", "{tmp}/book.txt", "-o", "{tmp}/book"], ["serve"], ["wyoming"]])
@pytest.mark.parametrize("flag, env, want", [(None, "env.pth", "env.pth"), ("flag.pth", "env.pth", "flag.pth"),
                                             ("flag.pth", None, "flag.pth"), (None, None, None)])
def test_every_speaking_command_loads_the_checkpoint_flag_else_kcc_checkpoint(tmp_path, monkeypatch, voice, argv,
                                                                              flag, env, want):
    from kcc.speech.g2p import g2p
    from kcc.speech.batch import local_pool

    def stop(checkpoint=None, *a, **k):
        raise _Loaded(checkpoint)
    for front in (say_mod, engine):
        monkeypatch.setattr(front, "load_synthesizer", stop)
    monkeypatch.setattr(local_pool, "SynthSpec", stop)
    monkeypatch.setattr(say_mod, "G2P", lambda lang, backend, **kw: LetterG2P())
    monkeypatch.setattr(g2p, "G2PFactory", lambda *a, **k: lambda lang: LetterG2P())
    (tmp_path / "lines.txt").write_text("One line.\n", encoding="utf-8")
    (tmp_path / "book.txt").write_text("A paragraph.\n", encoding="utf-8")
    monkeypatch.delenv("KCC_CHECKPOINT", raising=False)
    if env:
        monkeypatch.setenv("KCC_CHECKPOINT", env)
    voice_flag = [] if argv[0] in ("batch", "book", "serve", "wyoming") else ["--voice", voice]
    with pytest.raises(_Loaded) as loaded:
        cli.main([a.replace("{tmp}", str(tmp_path)) for a in argv] + voice_flag
                 + (["--checkpoint", flag] if flag else []))
    assert loaded.value.args == (want,)


# -- one seed check -------------------------------------------------------------------------------------------
BAD_SEEDS = [2**31, 2**31 + 5, 2**40, -1, -(2**31)]


@pytest.mark.parametrize("seed", BAD_SEEDS)
def test_say_and_synth_refuse_a_seed_out_of_range(tmp_path, monkeypatch, capsysbinary, voice, seed):
    for argv in (["say", TEXT], ["synth", "--ids", "50,83"]):
        rc, _, err, synth = _run(monkeypatch, capsysbinary, [*argv, "-o", str(tmp_path / "x.wav"), "--seed", str(seed),
                                                             "--voice", voice])
        assert rc == 2 and "seed must be in [0, 2147483647]" in err and synth.calls == [], argv
    assert not (tmp_path / "x.wav").exists()


@pytest.mark.parametrize("seed", BAD_SEEDS)
def test_batch_serve_and_the_api_refuse_the_same_seeds(seed):
    from kcc.speech.batch.manifest import Defaults, check_option
    from kcc.speech.serve.request import ApiError, parse_speech
    from kcc.speech.engine import SayError, check_seed
    with pytest.raises(SayError, match=r"seed must be in \[0, 2147483647\]"):
        check_seed(seed)
    with pytest.raises(ValueError, match=r"seed must be in \[0, 2147483647\]"):
        check_option("seed", seed, Defaults())
    with pytest.raises(ApiError, match="seed"):
        parse_speech(('{"input": "hi", "seed": %d}' % seed).encode())


@pytest.mark.parametrize("seed", [0, 1, 2**31 - 1])
def test_every_seed_in_range_is_kept_as_given(seed):
    from kcc.speech.batch.manifest import Defaults, check_option
    from kcc.speech.engine import check_seed
    assert check_seed(seed) == seed == check_option("seed", seed, Defaults())


def test_the_largest_seed_speaks_differently_from_seed_zero(tmp_path, monkeypatch, capsysbinary, voice):
    synth = FakeSynth()
    rc, _, err, _ = _run(monkeypatch, capsysbinary, ["say", "Hi.", "-o", str(tmp_path / "x.wav"), "--seed",
                                                     str(2**31 - 1), "--voice", voice], synth=synth)
    assert rc == 0, err
    assert [c["seed"] for c in synth.calls] == [2**31 - 1]


# -- subtitles ------------------------------------------------------------------------------------------------------
CUE = re.compile(r"(\d\d):(\d\d):(\d\d)[,.](\d\d\d) --> (\d\d):(\d\d):(\d\d)[,.](\d\d\d)")


def _seconds(m, at: int) -> float:
    h, mi, s, ms = (int(m.group(at + k)) for k in range(4))
    return h * 3600 + mi * 60 + s + ms / 1000


@pytest.mark.parametrize("ext", [".srt", ".vtt"])
def test_subtitles_follow_the_words(tmp_path, monkeypatch, capsysbinary, voice, ext):
    text = sentences(6)
    subs, ts = tmp_path / f"out{ext}", tmp_path / "ts.json"
    rc, _, err, _ = _run(monkeypatch, capsysbinary, ["say", text, "-o", str(tmp_path / "x.wav"), "--subtitles",
                                                     str(subs), "--timestamps", str(ts), "--voice", voice])
    assert rc == 0, err
    doc = subs.read_text(encoding="utf-8")
    assert doc.startswith("WEBVTT\n\n") if ext == ".vtt" else doc.startswith("1\n00:00:00,000 --> ")
    cues = [m for m in CUE.finditer(doc)]
    assert len(cues) >= 6                                  # a cue ends at each sentence's end at least
    ends = [(_seconds(m, 1), _seconds(m, 5)) for m in cues]
    assert all(a <= b for a, b in ends) and all(b1 <= a2 + 1e-3 for (_, b1), (a2, _) in zip(ends, ends[1:]))
    import json
    words = json.loads(ts.read_text())["words"]
    assert ends[-1][1] == pytest.approx(words[-1]["end_s"], abs=1e-3)
    lines = [line for line in doc.splitlines() if line and not CUE.match(line) and not line.isdigit()
             and line != "WEBVTT"]
    assert " ".join(lines).replace(" ,", ",") == text


@pytest.mark.parametrize("name", ["subs.txt", "subs.json", "subs", "subs.srt.tmp"])
def test_subtitles_need_an_srt_or_vtt_name(tmp_path, monkeypatch, capsysbinary, voice, name):
    rc, _, err, synth = _run(monkeypatch, capsysbinary, ["say", TEXT, "-o", str(tmp_path / "x.wav"), "--subtitles",
                                                         str(tmp_path / name), "--voice", voice])
    assert rc == 2 and "OutputError" in err and ".srt or .vtt" in err and synth.calls == []
    assert not (tmp_path / "x.wav").exists()


# -- exit codes --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("argv", [["--help"], ["say", "--help"]])
def test_exit_codes_are_documented_in_help(capsys, argv):
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    text = capsys.readouterr().out
    assert exc.value.code == 0 and "exit codes:" in text
    for code in ("0 ", "1 ", "2 ", "130 "):
        assert re.search(rf"^\s+{code}", text, re.M), code


# -- kcc synth follows the same conventions -----------------------------------------------------------
class TimedSynth(FakeSynth):
    """FakeSynth with the per-stage seconds `kcc synth` reports."""

    def synthesize(self, ids, ref_s, **kw):
        out = super().synthesize(ids, ref_s, **kw)
        out.seconds = {"stage": 0.01}
        return out


@pytest.mark.parametrize("name, container", [("s.mp3", "mp3"), ("s.flac", "flac"), ("s.wav", "wav"),
                                             ("s.opus", "ogg")])
def test_synth_picks_the_format_from_the_extension(tmp_path, monkeypatch, capsysbinary, voice, name, container):
    rc, _, err, synth = _run(monkeypatch, capsysbinary, ["synth", "--ids", "50,83,54", "-o", str(tmp_path / name),
                                                         "--voice", voice], synth=TimedSynth())
    assert rc == 0, err
    assert _decode(tmp_path / name)[0] == container and len(synth.calls) == 1


@pytest.mark.parametrize("name", ["s.xyz", "s", "s.txt"])
def test_synth_refuses_an_unknown_extension_before_synthesis(tmp_path, monkeypatch, capsysbinary, voice, name):
    rc, _, err, synth = _run(monkeypatch, capsysbinary, ["synth", "--ids", "50,83", "-o", str(tmp_path / name),
                                                         "--voice", voice], synth=TimedSynth())
    assert rc == 2 and "AudioFormatError" in err and synth.calls == []
    assert list(tmp_path.iterdir()) == [tmp_path / "v.npy"]


def test_synth_streams_to_stdout(monkeypatch, capsysbinary, voice):
    rc, out, err, synth = _run(monkeypatch, capsysbinary, ["synth", "--ids", "50,83,54", "-o", "-", "--voice", voice],
                               synth=TimedSynth())
    assert rc == 0, err
    fmt, samples, rate = _decode(out)
    expected = FakeSynth.audio([50, 83, 54], FakeSynth.durations([50, 83, 54]))
    assert (fmt, rate) == ("wav", 24000)
    np.testing.assert_array_equal(samples, np.frombuffer(pcm16(expected), "<i2"))
    assert "-: " in err and "phoneme ids" in err
