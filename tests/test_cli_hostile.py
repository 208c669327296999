"""Hostile and clumsy input on the `kcc say` / `kcc synth` / `kcc export` surface, each class of
refusal or repair tested as a class: every valid speed and text fits the frame plan (planned
chunks, and a split retry when the estimate is beaten), output paths refused before synthesis,
control characters in text, SIGINT, streamed output, the build cache, the exported runner's
argument parsing. Fast: the fake synthesizer and letter G2P of tests/test_say.py, no model."""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
import warnings
import wave
from itertools import groupby
from pathlib import Path

import numpy as np
import pytest

from kcc.speech.cli import say as say_mod
from kcc.speech.cli.interrupts import INTERRUPTED_MESSAGE, Interrupted
from kcc.speech import engine
from kcc.speech.g2p.g2p import espeak_available, load_vocab
from kcc.model.pipeline import DEFAULT_MAX_FRAMES, FrameOverflow, SynthesisError, continuing_durations
from kcc.speech.request import chunking
from kcc.speech.engine import iter_plan, plan, random_voice, say, split_encoded
from kcc.speech.audio.wav import pcm16
from kcc.speech.text import MAX_PHONEMES, PACK_PHONEMES, PIECE_CHARS, chunk_limit, clean_text, frame_estimate, pieces
from test_say import FakeSynth, LetterG2P

ROOT = Path(__file__).resolve().parents[1]
SPEEDS = [0.25, 0.3, 0.5, 0.8, 1.0, 1.7, 2.5, 4.0]
# The paragraph: 109 words (3,884 frames at speed 0.25 in one chunk before the fix).
PARAGRAPH = ("The old lighthouse keeper climbed the spiral staircase every evening at dusk, carrying a lantern "
             "and a small notebook in which he recorded the weather, the ships that passed, and the strange "
             "lights he sometimes saw far out on the water. Nobody in the village believed his stories about "
             "the lights, but he wrote them down anyway, year after year, until the notebook was full and he "
             "had to start another. When he finally retired, the new keeper found a whole shelf of notebooks "
             "in the tower, and reading them through the long winter nights, she began to notice a pattern "
             "that the old man had never mentioned to anyone in the village below.")


class FramedSynth(FakeSynth):
    """FakeSynth with a frame plan: `per_token` frames per token at speed 1 (boundary tokens
    `edge`), scaled by 1 / speed, refused past max_frames before any audio, as the compiled
    pipeline refuses (kcc.model.pipeline.FrameOverflow)."""

    def __init__(self, per_token: float = 3.0, edge: int = 20, max_frames: int = DEFAULT_MAX_FRAMES):
        super().__init__()
        self.per_token, self.edge, self.max_frames = per_token, edge, max_frames
        self.overflows = 0

    def durations(self, ids, speed=1.0):
        d = [self.edge, *[self.per_token] * len(ids), self.edge]
        return np.maximum(1, np.round(np.array(d) / speed)).astype(np.int32)

    def synthesize(self, ids, ref_s, speed=1.0, seed=0, lead_frames=None, continues=False):
        d = self.chunk_durations(ids, speed, lead_frames, continues)
        if d.sum() > self.max_frames:
            self.overflows += 1
            raise FrameOverflow(int(d.sum()), self.max_frames)
        self.calls.append({"ids": list(ids), "speed": speed, "seed": seed, "frames": int(d.sum()),
                           "durations": d.copy(), "continues": continues})
        from types import SimpleNamespace
        return SimpleNamespace(audio=FakeSynth.audio(ids, d), durations=d)


def _texts():
    return {"paragraph": PARAGRAPH, "long word": "a" * 1000, "numbers": "one two three four five six seven eight nine ten " * 30,
            "mixed": PARAGRAPH + "\n" + "z" * 700 + " end."}


# -- every valid speed and text fits the frame plan ----------------------------------------
@pytest.mark.parametrize("speed", SPEEDS)
def test_planned_chunks_fit_the_frame_plan_at_every_speed(speed):
    limit = chunk_limit(MAX_PHONEMES, speed, DEFAULT_MAX_FRAMES)
    assert frame_estimate(limit, speed) <= DEFAULT_MAX_FRAMES
    assert limit == MAX_PHONEMES or frame_estimate(limit + 1, speed) > DEFAULT_MAX_FRAMES
    for name, text in _texts().items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            chunks = plan(text, LetterG2P(), speed=speed)
        assert all(len(c.phonemes) <= limit for c in chunks), name
        assert all(frame_estimate(len(c.ids), speed) <= DEFAULT_MAX_FRAMES for c in chunks), name
        spoken = "".join(w.phonemes for c in chunks for w in c.words)
        assert spoken == "".join(w.phonemes for w in LetterG2P()(text.replace("\n", " "))), name


@pytest.mark.parametrize("speed", SPEEDS)
def test_say_at_every_speed_never_overflows(speed):
    """A synthesizer at the measured real rate (3 frames a token, 20 per boundary) never needs
    a retry; every word the G2P gave is spoken once, in order (a word past the chunk limit as
    consecutive pieces of it)."""
    for text in _texts().values():
        synth = FramedSynth()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = say(text, synth, random_voice(0), speed=speed, g2p=LetterG2P())
        assert synth.overflows == 0
        assert r.audio.size == sum(c["frames"] * 600 for c in synth.calls)
        given = LetterG2P()(text.replace("\n", " "))
        assert [k for k, _ in groupby(w["word"] for w in r.words)] == [k for k, _ in groupby(w.text for w in given)]
        assert "".join(w["phonemes"] for w in r.words) == "".join(w.phonemes for w in given)


@pytest.mark.parametrize("speed", [0.25, 0.6, 1.0])
def test_an_overflowing_chunk_is_split_and_retried(speed):
    """The estimate beaten (8 frames a token, 2.5x the plan's rate): each overflowing chunk is
    cut at words and retried; callers still get one Chunk per planned chunk, its audio the parts'
    audio end to end and its words' timestamps tiling it."""
    synth, pack = FramedSynth(per_token=8.0), random_voice(0)
    chunks = plan(PARAGRAPH, LetterG2P(), speed=speed, pack=None)       # chunks filled to the limit
    r = say(None, synth, pack, speed=speed, g2p=LetterG2P(), chunks=chunks)
    assert synth.overflows > 0 and len(r.chunks) == len(chunks)
    assert len(synth.calls) > len(chunks)
    expect = np.concatenate([FakeSynth.audio(c["ids"], c["durations"]) for c in synth.calls])
    np.testing.assert_array_equal(r.audio, expect)
    assert [w["word"] for w in r.words] == [w.text for c in chunks for w in c.words]
    ends = [w["end_s"] for w in r.words]
    assert ends == sorted(ends) and ends[-1] == pytest.approx(r.audio.size / 24000)
    for c in r.chunks:
        assert int(c.durations.sum()) * 600 == c.audio.size


def test_a_single_token_that_overflows_is_a_named_error():
    synth = FramedSynth(per_token=600.0, edge=1)
    with pytest.raises(SynthesisError, match="needs 2408 frames, over the planned 2048"):
        say("a", synth, random_voice(0), speed=0.25, g2p=LetterG2P())


def test_split_encoded_keeps_every_phoneme_in_order():
    (enc,) = plan("word " * 60, LetterG2P(), first_limit=None)
    for parts in (2, 3, 7):
        cut = split_encoded(enc, parts)
        assert len(cut) >= 2 and "".join(c.phonemes.replace(" ", "") for c in cut) == enc.phonemes.replace(" ", "")
        assert max(len(c.phonemes) for c in cut) <= -(-len(enc.phonemes) // parts)


def test_a_word_longer_than_the_limit_is_really_cut():
    """The warning says how many pieces, and the chunks hold exactly those pieces."""
    with pytest.warns(UserWarning, match=r"1000 phonemes, over the 510-phoneme chunk limit; it is cut into 2 pieces"):
        chunks = plan("a" * 1000, LetterG2P())
    assert [len(c.phonemes) for c in chunks] == [510, 490]
    with pytest.warns(UserWarning, match="over the 141-phoneme chunk limit; it is cut into 8 pieces"):
        chunks = plan("a" * 1000, LetterG2P(), speed=0.25)
    assert max(len(c.phonemes) for c in chunks) <= chunk_limit(MAX_PHONEMES, 0.25, DEFAULT_MAX_FRAMES)


def test_a_whole_file_chunk_ends_where_the_text_does_and_a_stream_starts_short_at_a_boundary():
    whole = plan(PARAGRAPH * 2, LetterG2P())
    assert all(c.words[-1].phonemes == "." for c in whole[:-1])              # sentence ends only
    # no two of these sentences fit PACK_PHONEMES together: each is a chunk of its own, whole
    assert [c.text for c in whole[:2]] == [s + "." for s in PARAGRAPH.split(". ")[:2]]
    assert not any(". " in c.text for c in whole) and len(whole[1].phonemes) <= PACK_PHONEMES
    streamed = plan(PARAGRAPH * 2, LetterG2P(), **chunking(stream=True))
    # "The old lighthouse keeper climbed the spiral staircase | every evening": no mark within
    # 3 x the first limit, so a word boundary there (none of its words starts a phrase)
    assert len(streamed[0].phonemes) < len(whole[0].phonemes)
    assert [w.text for w in streamed[0].words][:4] == ["The", "old", "lighthouse", "keeper"]
    assert all(len(c.phonemes) <= MAX_PHONEMES for c in whole + streamed)


def test_whole_sentences_share_a_chunk_up_to_pack_phonemes_and_a_longer_one_is_alone():
    short = "Rain fell on the quiet harbour town. "                           # 36 letters a sentence
    long = "The keeper " + "climbed the stairs and " * 12 + "slept."          # one sentence > 175
    chunks = plan(short * 12 + long + " " + short * 2, LetterG2P())
    texts = [c.text for c in chunks]
    assert all(t.endswith(".") for t in texts)                               # whole sentences only
    packed = [c for c in chunks if c.text != long]
    assert all(len(c.phonemes) <= PACK_PHONEMES for c in packed)
    assert [len(c.words) // 7 for c in packed] == [4, 4, 4, 2]              # as many as fit, in order
    assert texts[3] == long and PACK_PHONEMES < len(chunks[3].phonemes) <= MAX_PHONEMES
    unpacked = plan(short * 12 + long + " " + short * 2, LetterG2P(), pack=None)
    assert len(unpacked[0].phonemes) > 2 * PACK_PHONEMES                   # the old fill, on request


# -- text cleaning: control characters and line separators --------------------------------
@pytest.mark.parametrize("ctrl", [chr(c) for c in [*range(0, 9), 11, 12, *range(14, 32), *range(0x7F, 0xA0)]])
def test_control_characters_separate_words_and_lose_none(ctrl):
    text = f"Hello{ctrl}world and more"
    words = [w.text for c in plan(text, LetterG2P()) for w in c.words]
    assert words == ["Hello", "world", "and", "more"]


@pytest.mark.parametrize("brk", ["\r", "\r\n", "\u2028", "\u2029", "\v", "\f", "\x85"])
def test_line_separators_end_paragraphs(brk):
    chunks = plan(f"First part.{brk}Second part.", LetterG2P())
    assert [c.text for c in chunks] == ["First part.", "Second part."]
    assert "\n" not in clean_text(f"a{brk}b").replace("\n", "", 1)


@pytest.mark.skipif(not espeak_available()[0], reason=f"espeak G2P unavailable: {espeak_available()[1]}")
def test_nul_byte_no_longer_drops_the_rest_of_the_word():
    from kcc.speech.g2p.g2p import G2P
    (enc,) = plan("Hello\0world", G2P("en-us", "espeak"))
    assert enc.phonemes == "həlˈO wˈɜɹld"


# -- lazy planning in pieces ----------------------------------------------------------------
class CountingG2P(LetterG2P):
    def __init__(self):
        self.calls = []

    def __call__(self, text):
        self.calls.append(len(text))
        return super().__call__(text)


def test_a_huge_paragraph_reaches_g2p_in_pieces_and_chunks_come_early():
    g2p = CountingG2P()
    text = "Some words in a sentence here. " * 40_000          # 1.2 MB, one paragraph
    t0 = time.perf_counter()
    first = next(iter_plan(text, g2p))
    assert time.perf_counter() - t0 < 2.0
    assert g2p.calls == [g2p.calls[0]] and g2p.calls[0] <= PIECE_CHARS
    assert first.text.startswith("Some words")


@pytest.mark.parametrize("para", ["word " * 3000, "x" * 5000, "One. Two three! " * 400 + "tail", "ab " * 700 + "c" * 2500])
def test_pieces_cover_the_paragraph(para):
    para = para.strip()
    got = list(pieces(para))
    assert all(len(p) <= PIECE_CHARS for p, _ in got)
    joined = "".join(p + (" " if spaced else "") for p, spaced in got).strip()
    assert joined.split() == para.split() and joined.replace(" ", "") == para.replace(" ", "")


def test_words_across_pieces_keep_their_space():
    text = "alpha beta " * 500
    words = [w for c in plan(text, LetterG2P(), first_limit=None) for w in c.words]
    assert [w.text for w in words] == text.split()
    assert all(w.whitespace for w in words[:-1])


# -- the CLI: outputs checked before synthesis ---------------------------------------------
def _cli(monkeypatch, capsys, argv, synth=None):
    from kcc import cli
    loads = []

    def load(ckpt, max_frames=None, native=False, threads=None, precision=None):
        loads.append(max_frames)
        return synth or FramedSynth()
    monkeypatch.setattr(say_mod, "load_synthesizer", load)
    monkeypatch.setattr(say_mod, "G2P", lambda lang, backend, **kw: LetterG2P())
    rc = cli.main(argv)
    out = capsys.readouterr()
    return rc, out.out, out.err, loads


def _bad_outputs(tmp_path):
    (tmp_path / "dir").mkdir()
    (tmp_path / "file").write_text("keep")
    (tmp_path / "link.wav").symlink_to(tmp_path / "file")
    (tmp_path / "dangling.wav").symlink_to(tmp_path / "nowhere.wav")
    os.mkfifo(tmp_path / "fifo.wav")
    return {"a directory": tmp_path / "dir", "a device": Path("/dev/null"), "a FIFO": tmp_path / "fifo.wav",
            "a symbolic link": tmp_path / "link.wav", "dangling": tmp_path / "dangling.wav",
            "does not exist": tmp_path / "missing" / "x.wav", "is not a directory": tmp_path / "file" / "x.wav"}


@pytest.mark.parametrize("kind", ["a directory", "a device", "a FIFO", "a symbolic link", "dangling",
                                  "does not exist", "is not a directory"])
@pytest.mark.parametrize("flag", ["-o", "--timestamps"])
def test_bad_output_paths_are_refused_before_synthesis(tmp_path, monkeypatch, capsys, kind, flag):
    bad = _bad_outputs(tmp_path)[kind]
    before = os.lstat(bad) if os.path.lexists(bad) else None
    good = tmp_path / "good.wav"
    argv = ["say", "hello there", "-o", str(bad if flag == "-o" else good)]
    if flag == "--timestamps":
        argv += ["--timestamps", str(bad)]
    rc, _, err, loads = _cli(monkeypatch, capsys, argv)
    assert rc == 2 and "OutputError" in err and flag in err
    assert (kind if kind != "dangling" else "a symbolic link") in err
    assert loads == [] and not good.exists()
    if before is not None:                                  # untouched: same inode, same kind
        after = os.lstat(bad)
        assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert (tmp_path / "file").read_text() == "keep"


def test_unwritable_outputs_are_refused(tmp_path, monkeypatch, capsys):
    """As root every file is writable to os.access; the refusal is driven through it."""
    import kcc.speech.audio.outputs
    target = tmp_path / "ro.wav"
    target.write_bytes(b"old")
    real = os.access
    monkeypatch.setattr(kcc.speech.audio.outputs.os, "access", lambda p, mode: False if Path(p) in (target, tmp_path / "sub") else real(p, mode))
    rc, _, err, loads = _cli(monkeypatch, capsys, ["say", "hi", "-o", str(target)])
    assert rc == 2 and "exists and is not writable" in err and loads == []
    (tmp_path / "sub").mkdir()
    rc, _, err, loads = _cli(monkeypatch, capsys, ["say", "hi", "-o", str(tmp_path / "sub" / "x.wav")])
    assert rc == 2 and "is not writable" in err and loads == []
    assert target.read_bytes() == b"old"


@pytest.mark.parametrize("spelling", ["same", "dot", "parent"])
def test_timestamps_equal_to_the_output_is_refused(tmp_path, monkeypatch, capsys, spelling):
    (tmp_path / "d").mkdir()
    out = tmp_path / "d" / "a.wav"
    ts = {"same": out, "dot": tmp_path / "d" / "." / "a.wav", "parent": tmp_path / "d" / ".." / "d" / "a.wav"}[spelling]
    rc, _, err, loads = _cli(monkeypatch, capsys, ["say", "hi", "-o", str(out), "--timestamps", str(ts)])
    assert rc == 2 and "the same file" in err and loads == [] and not out.exists()


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_outputs_follow_the_umask(tmp_path, monkeypatch, capsys, mask):
    old = os.umask(mask)
    try:
        rc, _, err, _ = _cli(monkeypatch, capsys, ["say", "hi", "-o", str(tmp_path / "a.wav"),
                                                   "--timestamps", str(tmp_path / "a.json")])
    finally:
        os.umask(old)
    assert rc == 0, err
    for name in ("a.wav", "a.json"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o666 & ~mask


def test_a_replaced_file_keeps_its_mode(tmp_path, monkeypatch, capsys):
    out = tmp_path / "a.wav"
    out.write_bytes(b"old")
    out.chmod(0o640)
    rc, _, err, _ = _cli(monkeypatch, capsys, ["say", "hi", "-o", str(out)])
    assert rc == 0, err
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640
    assert out.read_bytes()[:4] == b"RIFF"


@pytest.mark.parametrize("argv_tail, msg", [
    (["--ids", "50,83", "-o", "/dev/null"], "is a device"),
    (["--ids", "50,83", "-o", "{tmp}"], "is a directory"),
    (["--ids", "50,999", "-o", "{tmp}/x.wav"], "outside the Kokoro vocabulary"),
    (["--ids", "-3", "-o", "{tmp}/x.wav"], "outside the Kokoro vocabulary"),
    (["--ids", "5a", "-o", "{tmp}/x.wav"], "must be integers"),
])
def test_synth_refuses_before_loading_the_model(tmp_path, monkeypatch, capsys, argv_tail, msg):
    argv = ["synth", *[a.replace("{tmp}", str(tmp_path)) for a in argv_tail]]
    rc, _, err, loads = _cli(monkeypatch, capsys, argv)
    assert rc == 2 and msg in err and loads == []


@pytest.mark.parametrize("command", [["say", "hi"], ["synth", "--ids", "50"], ["export", "{tmp}/runner"]])
@pytest.mark.parametrize("frames", ["0", "-5", "63", "8193", "1000000000"])
def test_max_frames_out_of_range_is_refused_before_loading(tmp_path, monkeypatch, capsys, command, frames):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in command] + ["--max-frames", frames]
    if command[0] != "export":
        argv += ["-o", str(tmp_path / "x.wav")]
    rc, _, err, loads = _cli(monkeypatch, capsys, argv)
    assert rc == 2 and "--max-frames must be a whole number from 64 to 8192" in err and loads == []


@pytest.mark.parametrize("command", [["say", "hi"], ["synth", "--ids", "50"], ["export", "{tmp}/runner"]])
def test_unknown_precision_is_refused_before_loading(tmp_path, monkeypatch, capsys, command):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in command] + ["--precision", "fp16"]
    if command[0] != "export":
        argv += ["-o", str(tmp_path / "x.wav")]
    with pytest.raises(SystemExit) as exc:
        _cli(monkeypatch, capsys, argv)
    assert exc.value.code == 2 and "invalid choice: 'fp16'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("speed", ["0", "-1", "nan", "inf", "5.5", "0.2", "4.5"])
def test_synth_refuses_a_bad_speed_before_loading(tmp_path, monkeypatch, capsys, speed):
    rc, _, err, loads = _cli(monkeypatch, capsys, ["synth", "--ids", "50", "--speed", speed, "-o", str(tmp_path / "x.wav")])
    assert rc == 2 and "speed must be between 0.25 and 4.0" in err and loads == []


def test_export_refuses_a_file_as_its_directory(tmp_path, monkeypatch, capsys):
    (tmp_path / "f").write_text("x")
    rc, _, err, loads = _cli(monkeypatch, capsys, ["export", str(tmp_path / "f")])
    assert rc == 2 and "exists and is not a directory" in err and loads == []


# -- streaming, interrupts ------------------------------------------------------------------
class Stopping(FramedSynth):
    """Records the size of the output's temporary file at each call; raises `signal` at call n."""

    def __init__(self, directory: Path, stop_at: int | None = None):
        super().__init__()
        self.directory, self.stop_at, self.sizes = directory, stop_at, []

    def synthesize(self, ids, ref_s, speed=1.0, seed=0, lead_frames=None, continues=False):
        parts = list(self.directory.glob(".*.part"))
        self.sizes.append(sum(p.stat().st_size for p in parts))
        if self.stop_at is not None and len(self.calls) == self.stop_at:
            raise Interrupted(signal.SIGINT)
        return super().synthesize(ids, ref_s, speed, seed, lead_frames, continues)


def test_say_streams_chunks_into_the_output(tmp_path, monkeypatch, capsys):
    synth = Stopping(tmp_path)
    out = tmp_path / "long.wav"
    np.save(tmp_path / "v.npy", random_voice(0))
    rc, _, err, _ = _cli(monkeypatch, capsys, ["say", PARAGRAPH * 6, "-o", str(out), "--seed", "3",
                                               "--voice", str(tmp_path / "v.npy")], synth)
    assert rc == 0, err
    written = np.cumsum([0] + [c["frames"] * 600 * 2 for c in synth.calls[:-1]])
    assert len(synth.calls) > 3
    assert synth.sizes[1:] == [44 + int(n) for n in written[1:]]       # each chunk on disk before the next
    with wave.open(str(out)) as w:
        assert w.getnframes() == int(written[-1] / 2) + synth.calls[-1]["frames"] * 600
        samples = w.readframes(w.getnframes())
    assert not list(tmp_path.glob(".*.part"))
    # the streamed file holds the samples the in-memory say() makes, in order
    assert samples == pcm16(say(PARAGRAPH * 6, FramedSynth(), random_voice(0), seed=3, g2p=LetterG2P()).audio)


def test_streamed_timestamps_are_the_in_memory_document(tmp_path, monkeypatch, capsys):
    text = PARAGRAPH * 3 + "\nA second paragraph, \"quoted\" and odd: ünïcode."
    expect = say(text, FramedSynth(), random_voice(0), seed=3, g2p=LetterG2P()).timestamps_json()
    np.save(tmp_path / "v.npy", random_voice(0))
    rc, _, err, _ = _cli(monkeypatch, capsys, ["say", text, "-o", str(tmp_path / "a.wav"), "--seed", "3",
                                               "--voice", str(tmp_path / "v.npy"), "--timestamps", str(tmp_path / "a.json")])
    assert rc == 0, err
    got = json.loads((tmp_path / "a.json").read_text(encoding="utf-8"))
    assert got == expect and len(got["chunks"]) > 2
    assert expect["g2p"] == LetterG2P.description


def test_an_interrupt_leaves_no_output(tmp_path, monkeypatch, capsys):
    out, ts = tmp_path / "a.wav", tmp_path / "a.json"
    out.write_bytes(b"previous")
    rc, _, err, _ = _cli(monkeypatch, capsys, ["say", PARAGRAPH * 4, "-o", str(out), "--timestamps", str(ts)],
                         Stopping(tmp_path, stop_at=2))
    assert rc == 130 and INTERRUPTED_MESSAGE in err and "Traceback" not in err
    assert out.read_bytes() == b"previous" and not ts.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.wav"]


_SLOW_SAY = r"""
import ctypes, signal, sys
sys.path[:0] = [{root!r}, {root!r} + "/tests"]
from kcc.speech import engine
from kcc.speech.cli import say
from test_say import FakeSynth, LetterG2P
libc = ctypes.CDLL(None)
class Slow(FakeSynth):
    def synthesize(self, *a, **k):
        # A C stage that runs on through signals (as the compiled stages do): 2 s per chunk.
        signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGINT, signal.SIGTERM}})
        open({mark!r}, "a").write("x")
        libc.usleep(2000000)
        return super().synthesize(*a, **k)
say.load_synthesizer = engine.load_synthesizer = lambda *a, **k: Slow()
say.G2P = lambda lang, backend, **kw: LetterG2P()
from kcc.cli import main
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.parametrize("command", ["say", "synth"])
def test_a_signal_exits_at_once_without_traceback_or_output(tmp_path, sig, code, command):
    """The signal lands while a 2 s uninterruptible 'C call' runs: the process ends within a
    fraction of it, removes its temporary output, prints no traceback."""
    (tmp_path / "out").mkdir()
    out, mark = tmp_path / "out" / "a.wav", tmp_path / "calls"
    argv = ["say", PARAGRAPH * 8, "--progress"] if command == "say" else ["synth", "--ids", "50,83,54"]
    p = subprocess.Popen([sys.executable, "-c", _SLOW_SAY.format(root=str(ROOT), mark=str(mark)), *argv, "-o", str(out)],
                         stderr=subprocess.PIPE, stdout=subprocess.PIPE, cwd=str(ROOT))
    calls = 2 if command == "say" else 1      # say: the first chunk written, the next one in its C call
    deadline = time.monotonic() + 60
    while (not mark.exists() or len(mark.read_text()) < calls) and p.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    if command == "say":
        assert [f.stat().st_size for f in (tmp_path / "out").glob(".*.part")][0] > 44
    t0 = time.monotonic()
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    waited = time.monotonic() - t0
    assert p.returncode == code, err.decode()
    assert waited < 0.8, waited
    assert b"Traceback" not in err and INTERRUPTED_MESSAGE.encode() in err
    assert list((tmp_path / "out").iterdir()) == []


# -- the build cache --------------------------------------------------------------------------
_SRC = "int kcc_probe(void);\nint kcc_probe(void) { return 7; }\n"


def test_cache_entry_that_matches_its_sidecar_but_does_not_load_is_rebuilt(tmp_path, monkeypatch):
    import ctypes

    from kcc.compiler.build import build_library
    from kcc.files import file_sha256
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path))
    first = build_library(_SRC, name="probe")
    first.library.write_bytes(b"\x7fELF garbage that matches its sidecar")
    from kcc.cache_trust import sign
    (tmp_path / f"probe-{first.key}.so.sig").write_text(
        sign(f"{first.library.name}\0{file_sha256(first.library)}".encode(), "build-library") + "\n")
    again = build_library(_SRC, name="probe")
    assert not again.cached and ctypes.CDLL(str(again.library)).kcc_probe() == 7


@pytest.mark.parametrize("entry", [".so", ".c", ".so.sig", ".lock"])
def test_a_directory_at_a_cache_path_is_a_named_error(tmp_path, monkeypatch, entry):
    from kcc.compiler.build import BuildError, build_library
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path))
    key = build_library(_SRC, name="probe").key
    for p in tmp_path.glob("probe-*"):
        p.unlink()
    (tmp_path / f"probe-{key}{entry}").mkdir()
    with pytest.raises(BuildError, match="is not a regular file"):
        build_library(_SRC, name="probe")


def test_a_read_only_cache_serves_what_it_has_and_names_what_it_lacks(tmp_path, monkeypatch):
    import builtins

    import kcc.compiler.build
    from kcc.compiler.build import BuildError, build_library
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path))
    built = build_library(_SRC, name="probe")

    def read_only(path, mode="r", *a, **k):
        if any(c in mode for c in "wax+"):
            raise PermissionError(13, "Read-only file system", str(path))
        return builtins.open(path, mode, *a, **k)
    monkeypatch.setattr(kcc.compiler.build, "open", read_only, raising=False)
    again = build_library(_SRC, name="probe")
    assert again.cached and again.library == built.library
    with pytest.raises(BuildError, match="not writable.*KCC_CACHE_DIR"):
        build_library(_SRC + "/* other */\n", name="probe")


# -- the exported runner's argument parsing ----------------------------------------------------
@pytest.fixture(scope="module")
def runner_args(tmp_path_factory):
    from kcc.model.export import runtime_helpers
    d = tmp_path_factory.mktemp("args")
    src = "\n".join(runtime_helpers()) + r"""
int main(int argc, char **argv)
{
    struct args a;
    if (parse_args(argc, argv, &a)) return 2;
    for (size_t i = 0; i < a.n_ids; ++i) printf("%d ", a.ids[i]);
    printf("| %g %ld\n", a.speed, a.seed);
    return 0;
}
"""
    (d / "args.c").write_text(src)
    subprocess.run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-Wno-unused-function",
                    "-o", str(d / "args"), str(d / "args.c"), "-lm"], check=True)
    return d / "args"


@pytest.mark.parametrize("argv, ok", [
    (["--ids", "50,83,54"], "50 83 54 | 1 0"),
    (["--ids", "5, 6 ,7", "--seed", "12", "--speed", "0.5"], "5 6 7 | 0.5 12"),
    (["--ids", "5a"], None), (["--ids", "4294967346"], None), (["--ids", "178"], None), (["--ids", "-1"], None),
    (["--ids", "9" * 40], None), (["--ids", ",,"], None), (["--ids", "5", "--speed"], None),
    (["--ids", "5", "--speed", "1.0x"], None), (["--ids", "5", "--speed", "nan"], None),
    (["--ids", "5", "--speed", "1e999"], None), (["--ids", "5", "--seed", "9" * 30], None),
    (["--ids", "5", "--seed", "3z"], None), (["--ids", ",".join(["5"] * 511)], None),
])
def test_exported_runner_parses_whole_numbers_only(runner_args, argv, ok):
    p = subprocess.run([str(runner_args), *argv, "-o", "x.wav"], capture_output=True, text=True)
    if ok is None:
        assert p.returncode == 2 and p.stderr.startswith("kokoro: ") and p.stdout == ""
    else:
        assert p.returncode == 0 and p.stdout.strip() == ok


# -- the text fuzzer ---------------------------------------------------------------------------
def _fuzz():
    import importlib.util
    spec = importlib.util.spec_from_file_location("fuzz_text", ROOT / "fuzz" / "fuzz_text.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_fuzz_text_with_the_letter_g2p():
    counts = _fuzz().run(300, 0, LetterG2P(), log=lambda *_: None)
    assert counts["planned"] > 100 and counts["refused"] > 20          # both outcomes exercised


@pytest.mark.skipif(not espeak_available()[0], reason=f"espeak G2P unavailable: {espeak_available()[1]}")
def test_fuzz_text_with_the_real_g2p():
    from kcc.speech.g2p.g2p import G2P
    counts = _fuzz().run(150, 2, G2P("en-us"), log=lambda *_: None)
    assert counts["planned"] > 50


@pytest.mark.skipif(not espeak_available()[0], reason=f"espeak G2P unavailable: {espeak_available()[1]}")
def test_a_huge_number_is_read_digit_by_digit():
    """A number past the quadrillions (here 400 digits, which overflowed num2words inside misaki)
    is spoken digit by digit, plain or comma-grouped."""
    from kcc.speech.g2p.g2p import G2P
    g2p = G2P("en-us")
    for number in ("9" * 400, "9" * 16, "1,234,567,890,123,456,789"):
        words = [w for c in plan(f"the number {number} is big", g2p) for w in c.words]
        assert [w.text for w in words] == ["the", "number", *number.replace(",", ""), "is", "big"]
        assert all(w.phonemes == g2p(d)[0].phonemes for w, d in zip(words[2:-2], number.replace(",", "")))


def test_a_g2p_backend_crash_is_a_named_error(tmp_path, monkeypatch, capsys):
    class Crashing(LetterG2P):
        def __call__(self, text):
            raise RuntimeError("backend fell over")
    with pytest.raises(engine.G2PBackendError, match=r"G2P failed on the text 'hello there': RuntimeError: backend fell over"):
        plan("hello there", Crashing())
    from kcc import cli
    monkeypatch.setattr(say_mod, "G2P", lambda lang, backend, **kw: Crashing())
    monkeypatch.setattr(say_mod, "load_synthesizer", lambda *a, **k: pytest.fail("loaded the model"))
    assert cli.main(["say", "hello there", "-o", str(tmp_path / "x.wav")]) == 2
    assert "G2PBackendError" in capsys.readouterr().err and not list(tmp_path.iterdir())


@pytest.mark.parametrize("source, msg", [("/dev/zero", "is over 64 MiB"), ("{tmp}", "Is a directory"),
                                         ("{tmp}/missing.txt", "No such file")])
def test_text_files_that_cannot_be_read_whole_are_refused(tmp_path, monkeypatch, capsys, source, msg):
    rc, _, err, loads = _cli(monkeypatch, capsys, ["say", "--text-file", source.replace("{tmp}", str(tmp_path)),
                                                   "-o", str(tmp_path / "x.wav")])
    assert rc == 2 and "SayError" in err and msg in err and loads == [] and not (tmp_path / "x.wav").exists()


# -- the server shares the planner and the retry ---------------------------------------------------
@pytest.mark.parametrize("stream", [False, True])
def test_server_speaks_slow_speech_whole_when_the_estimate_is_beaten(tmp_path, stream):
    """Speed 0.25 with 8 frames a token (2.5x the planning rate): chunks overflow and are split;
    the answer is 200 with every sample, not a 500 or a stream cut before its last chunk."""
    import http.client

    from test_server import serving
    synth = FramedSynth(per_token=8.0)
    with serving(tmp_path, synth=synth) as srv:
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=120)
        conn.request("POST", "/v1/audio/speech", json.dumps(
            {"model": "tts-1", "input": PARAGRAPH, "voice": "af_alloy", "response_format": "pcm",
             "speed": 0.25, "stream": stream}), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
    assert resp.status == 200, body[:300]
    assert synth.overflows > 0
    expect = sum(c["frames"] * 600 for c in synth.calls)
    assert len(body) == 2 * expect
    # what was synthesised is the whole text, in order (cuts move only the spaces between words)
    space = load_vocab()[" "]
    spoken = [i for c in synth.calls for i in c["ids"] if i != space]
    assert spoken == [i for c in plan(PARAGRAPH, LetterG2P()) for i in c.ids if i != space]
    # the first chunk keeps its leading edge (80 frames); its end is drawn as continuing when it
    # ends inside a sentence
    first = synth.calls[0]
    d = synth.durations(first["ids"], 0.25)
    assert first["frames"] == int((continuing_durations(d) if first["continues"] else d).sum())


# -- the planning bound against the real model ---------------------------------------------------
@pytest.fixture(scope="module")
def real_frames():
    """frames(encoded, speed): real Kokoro-82M's durations for a chunk. The probe shares the
    compiled stages but plans 0 frames, so every run stops with FrameOverflow right after the
    front stages (the duration predictor) and reports the frames it needed."""
    if not espeak_available()[0]:
        pytest.skip(f"espeak G2P unavailable: {espeak_available()[1]}")
    from kcc.model.pipeline import Synthesizer
    from kcc.speech.voices import style_for
    try:
        synth = say_mod.load_synthesizer(None)
    except Exception as exc:                    # no network for the wheels, no compiler, ...
        pytest.skip(f"the real model is not available here: {type(exc).__name__}: {exc}")
    probe = Synthesizer.from_circuits(synth.circuits, 0, "probe")
    pack = say_mod.resolve_voice(None)

    def frames(enc, speed):
        with pytest.raises(FrameOverflow) as info:
            probe.synthesize(enc.ids, style_for(pack, len(enc.phonemes)), speed=speed)
        return info.value.frames
    return frames


REAL_TEXTS = [PARAGRAPH, "1234567890 " * 20, "a" * 600, "Wait... what?! No!!! Really?.. " * 6,
              "Dr. Smith paid $1,250.75 on 3/14/2025 at 10:30 a.m., e.g. for the U.S.A. trip (and more)."]


@pytest.mark.parametrize("speed", [0.25, 1.0, 4.0])
def test_real_model_chunks_fit_the_frame_plan(real_frames, speed):
    """Measured on the default voice: every planned chunk needs at most its frame estimate, so
    at most the 2,048 planned frames; the split retry stays a fallback."""
    from kcc.speech.g2p.g2p import G2P
    g2p = G2P("en-us")
    worst = 0.0
    for text in REAL_TEXTS:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            chunks = plan(text, g2p, speed=speed)
        for c in chunks:
            need = real_frames(c, speed)
            assert need <= DEFAULT_MAX_FRAMES, (speed, len(c.ids), need, c.phonemes[:60])
            worst = max(worst, need / frame_estimate(len(c.ids), speed))
    print(f"speed {speed}: worst frames / estimate {worst:.2f}")
    assert worst <= 1.0


@pytest.mark.parametrize("errno_, name", [(28, "No space left on device"), (27, "File too large")])
def test_an_output_the_disk_refuses_is_a_named_error_and_leaves_nothing(tmp_path, monkeypatch, capsys, errno_, name):
    from kcc.speech.audio import wav
    calls = []

    def refuse(self, audio):
        calls.append(len(audio))
        if len(calls) == 2:                      # the first chunk was written; the second hits the limit
            raise OSError(errno_, name)
        return real(self, audio)
    real = wav.WavWriter.write
    monkeypatch.setattr(wav.WavWriter, "write", refuse)
    out = tmp_path / "a.wav"
    out.write_bytes(b"previous")
    rc, _, err, _ = _cli(monkeypatch, capsys, ["say", PARAGRAPH * 4, "-o", str(out)])
    assert rc == 2 and f"kcc: OSError: [Errno {errno_}] {name}" in err and "Traceback" not in err
    assert out.read_bytes() == b"previous" and sorted(p.name for p in tmp_path.iterdir()) == ["a.wav"]
