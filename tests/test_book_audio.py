"""kcc book's outputs on the batch engine (fake synthesizer and G2P, one real-model run): the
.m4b's chapters and tags read back, chapter files in every format, captions and sidecars, no
clicks at the joins, resume after kill -9, Ray's bytes equal to the local engine's."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
import wave
from pathlib import Path

import numpy as np
import pytest

from book_fixtures import AUTHOR, CHAPTERS, TITLE, join_clicks, write_all, write_epub
from kcc.speech.book.assemble import AUDIO_FORMATS
from kcc.speech.book.job import BookJob, BookOptions, ChapterDone
from kcc.speech.book.layout import Pauses
from kcc.speech.book.m4b import read_chapters
from kcc.speech.engine import random_voice
from real_model_here import needs_real_model
from test_batch import FakeFactory, letters

REPO = Path(__file__).resolve().parents[1]
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082")


@pytest.fixture(scope="module")
def voices(tmp_path_factory):
    d = tmp_path_factory.mktemp("voices")
    np.save(d / "va.npy", random_voice(1))
    return d


def batch_kw(voices, **kw):
    return {"synth": FakeFactory(), "workers": 1, "g2p": letters, "voices_dirs": [str(voices)], **kw}


def run(book, out, voices, options=None, **kw):
    job = BookJob(book, out, options or BookOptions(voice="va.npy"), **batch_kw(voices, **kw))
    events = list(job)
    assert job.ok, job.failures
    return job, events


def samples(path: Path) -> np.ndarray:
    with wave.open(str(path), "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / 32767


def test_m4b_has_the_chapters_title_author_and_cover(tmp_path, voices):
    import av
    from mutagen.mp4 import MP4
    book = write_epub(tmp_path / "alice.epub", cover=PNG)
    job, events = run(book, tmp_path / "alice.m4b", voices, BookOptions(voice="va.npy", subtitles="vtt"))
    got = read_chapters(tmp_path / "alice.m4b")
    assert [t for t, _ in got] == [t for t, _ in CHAPTERS]
    sides = [json.loads((tmp_path / f"alice.{i:03d}.json").read_text()) for i in (1, 2, 3)]
    for (title, start), side in zip(got, sides):
        assert side["title"] == title and abs(start - side["audio"]["start_s"]) < 0.05
    assert sides[1]["audio"]["start_s"] == sides[0]["audio"]["end_s"]
    tags = MP4(str(tmp_path / "alice.m4b")).tags
    assert tags["©nam"] == [TITLE] and tags["©ART"] == [AUTHOR] and bytes(tags["covr"][0]) == PNG
    with av.open(str(tmp_path / "alice.m4b")) as c:
        assert c.streams.audio[0].codec_context.name == "aac" and len(c.chapters()) == 3
        assert abs(c.duration / 1e6 - sides[-1]["audio"]["end_s"]) < 0.1
    vtt = (tmp_path / "alice.001.vtt").read_text()
    assert vtt.startswith("WEBVTT") and "tired." in vtt and "nobody" not in vtt     # the footnote is not read
    done = [(e.index, e.status) for e in events if isinstance(e, ChapterDone)]
    assert done == [(1, "synthesized"), (2, "synthesized"), (3, "synthesized"),
                    (1, "written"), (2, "written"), (3, "written")]


@pytest.mark.parametrize("fmt", AUDIO_FORMATS)
def test_chapter_files_in_every_format_decode_to_the_sidecars_length(tmp_path, voices, fmt):
    import av
    files = write_all(tmp_path / "in")
    run(files["markdown"], tmp_path / "out", voices, BookOptions(format=fmt, voice="va.npy", subtitles="srt"))
    names = sorted(p.name for p in (tmp_path / "out").iterdir() if not p.name.startswith("."))
    assert names == sorted(f"00{i}-{s}.{e}" for i, s in enumerate(["down-the-rabbit-hole", "the-pool-of-tears",
                                                                   "a-caucus-race"], 1) for e in (fmt, "json", "srt"))
    for side_path in (tmp_path / "out").glob("*.json"):
        side = json.loads(side_path.read_text())
        with av.open(str(tmp_path / "out" / side["audio"]["file"])) as c:
            seconds = sum(f.samples / f.sample_rate for f in c.decode(audio=0))     # opus decodes at 48 kHz
        assert abs(seconds - side["audio"]["seconds"]) < 0.1, fmt          # codec padding at most
        assert side["items"][0]["text"] == side["title"] and side["model_digest"] == "fake-model-1"
        assert all(len(i["durations"]) == len(i["phonemes"]) for i in side["items"])


def test_pauses_and_titles_are_options(tmp_path, voices):
    files = write_all(tmp_path / "in")
    opts = BookOptions(format="wav", voice="va.npy", announce=False, pauses=Pauses(paragraph=0.25, chapter=1.0))
    run(files["html"], tmp_path / "out", voices, opts)
    side = json.loads(next((tmp_path / "out").glob("001-*.json")).read_text())
    assert [i["text"] for i in side["items"]] == CHAPTERS[0][1]                    # no title item
    a, b = side["items"]
    assert b["start_s"] - a["end_s"] == pytest.approx(0.25, abs=1e-4)
    audio = samples(next((tmp_path / "out").glob("001-*.wav")))
    assert audio.size / 24000 == pytest.approx(b["end_s"] + 1.0, abs=1e-4)
    gap = audio[int(a["end_s"] * 24000) + 1:int(b["start_s"] * 24000) - 1]
    assert gap.size > 5000 and not gap.any()


def test_joins_carry_no_clicks(tmp_path, voices):
    """The fake voice is a 0.3 sine cut anywhere: unfaded, its joins would step by up to 0.3."""
    files = write_all(tmp_path / "in")
    run(files["text"], tmp_path / "out", voices, BookOptions(format="wav", voice="va.npy",
                                                            pauses=Pauses(paragraph=0.3, sentence=0.0)))
    for side_path in (tmp_path / "out").glob("*.json"):
        side = json.loads(side_path.read_text())
        audio = samples(tmp_path / "out" / side["audio"]["file"])
        spans = [(int(round(i["start_s"] * 24000)), int(round(i["end_s"] * 24000))) for i in side["items"]]
        joins = [j for span in spans for j in span]
        at_joins, inside = join_clicks(audio, joins, spans)
        assert inside > 0.01 and at_joins <= inside, (side_path.name, at_joins, inside)


def test_rerun_writes_nothing_and_a_changed_pause_redoes_no_synthesis(tmp_path, voices):
    files = write_all(tmp_path / "in")
    out = tmp_path / "out"
    run(files["epub"], out, voices, BookOptions(format="flac", voice="va.npy", keep_work=True))
    stamp = {p.name: p.stat().st_mtime_ns for p in out.iterdir() if not p.name.startswith(".")}
    _, events = run(files["epub"], out, voices, BookOptions(format="flac", voice="va.npy", keep_work=True))
    assert {e.status for e in events} == {"skipped", "current"}
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir() if p.name in stamp} == stamp
    _, events = run(files["epub"], out, voices, BookOptions(format="flac", voice="va.npy", pauses=Pauses(paragraph=0.1),
                                                                keep_work=True))
    assert {e.status for e in events if not isinstance(e, ChapterDone)} == {"skipped"}      # no synthesis
    # chapters 2 and 3 are one paragraph each: their only pause is the chapter's
    assert [e.status for e in events if isinstance(e, ChapterDone)] == ["written", "current", "current"]


def test_voice_from_the_books_language_and_blends(tmp_path, voices):
    from kcc.speech.book.sources import Book, Chapter
    np.save(voices / "vb.npy", random_voice(2))
    book = Book("B", chapters=[Chapter("Un", ["Bonjour."])], language="fr-FR")
    job = BookJob(book, tmp_path / "o1", BookOptions(format="wav", voice="va:0.7,vb:0.3", keep_work=True),
                  **batch_kw(voices))
    assert job.lang == "fr-fr" and job.voice == "va:0.7,vb:0.3"
    list(job)
    assert job.ok, job.failures
    side = json.loads(next((tmp_path / "o1").glob("001-*.json")).read_text())
    assert side["lang"] == "fr-fr" and side["voice"] == "va:0.7,vb:0.3"
    item = json.loads((tmp_path / "o1" / ".kcc-book" / "c0001-00001.json").read_text())
    from kcc.speech.voices import load_voice

    def digest(pack):
        return hashlib.sha256(np.ascontiguousarray(pack, "<f4").tobytes()).hexdigest()
    blend = load_voice("va:0.7,vb:0.3", [voices])
    assert np.allclose(blend, 0.7 * random_voice(1) + 0.3 * random_voice(2), atol=1e-6)
    assert item["voice_sha256"] == digest(blend) != digest(random_voice(1))


def test_progress_counts_chapters_audio_hours_and_eta():
    import io
    from kcc.speech.batch.item import Outcome
    from kcc.speech.book.progress import BookProgress
    bar = BookProgress(chapters=2, items=4, enabled=True, stream=io.StringIO())
    assert bar.line().endswith("0/2 chapters, 0.000 h audio, ETA ?")
    bar.item(Outcome("a", 1, "skipped", audio_s=1800.0))
    bar.item(Outcome("b", 2, "done", audio_s=1800.0))
    bar.chapter()
    assert "1/2 chapters, 1.000 h audio, ETA 00:00:0" in bar.line()
    assert bar.eta_s() is not None and bar.eta_s() >= 0


def _script() -> str:
    return ("import sys; sys.path[:0] = [sys.argv[1]]\n"
            "from test_batch import FakeFactory, letters\n"
            "from kcc.speech.book.job import BookJob, BookOptions\n"
            "job = BookJob(sys.argv[2], sys.argv[3], BookOptions(format='wav', voice='va.npy'),\n"
            "              synth=FakeFactory(delay=0.2), workers=1, g2p=letters, voices_dirs=[sys.argv[4]])\n"
            "for e in job:\n"
            "    print(type(e).__name__, getattr(e, 'id', None) or e.index, e.status, flush=True)\n")


def test_kill_9_mid_book_then_resume_redoes_no_finished_chapter(tmp_path, voices):
    chapters = [(f"Chapter {n}", [f"Paragraph {k} of chapter {n} goes here." for k in range(3)]) for n in range(1, 6)]
    book = write_epub(tmp_path / "long.epub", chapters, notes=False)
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-c", _script(), str(REPO / "tests"), str(book), str(out), str(voices)],
                            stdout=subprocess.PIPE, text=True, cwd=REPO)
    lines = []
    while not any(ln.startswith("ChapterDone 2") for ln in lines):
        line = proc.stdout.readline()
        assert line, "the job ended before it could be killed"
        lines.append(line)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    finished = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.glob("00[12]-*")}
    assert len(finished) == 4                                   # chapters 1 and 2: audio and sidecar
    assert not list(out.glob("00[45]-*"))                       # none half-kept
    job, events = run(book, out, voices, BookOptions(format="wav", voice="va.npy"))
    again = {e.index: e.status for e in events if isinstance(e, ChapterDone)}
    assert again[1] == again[2] == "current"
    assert {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in out.glob("00[12]-*")} == finished
    assert not list(out.glob(".*.part")) and not list((out / ".kcc-book").glob(".*.part"))
    redone = [e.id for e in events if not isinstance(e, ChapterDone) and e.status == "done"]
    assert not any(i.startswith(("c0001", "c0002")) for i in redone)
    _, clean_events = run(book, tmp_path / "clean", voices, BookOptions(format="wav", voice="va.npy"))
    for p in sorted(out.glob("00*")):
        clean = tmp_path / "clean" / p.name
        if p.suffix == ".wav":
            assert p.read_bytes() == clean.read_bytes()


def test_ray_engine_writes_the_local_engines_bytes(tmp_path, voices):
    if os.environ.get("KCC_SKIP_RAY") == "1":
        pytest.skip("KCC_SKIP_RAY=1")
    ray = pytest.importorskip("ray")
    tests = Path(__file__).resolve().parent
    path = os.pathsep.join([str(tests.parent), str(tests), os.environ.get("PYTHONPATH", "")])
    files = write_all(tmp_path / "in")
    run(files["epub"], tmp_path / "local.m4b", voices, workers=2, processes=True)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": {"PYTHONPATH": path}})
    try:
        job, _ = run(files["epub"], tmp_path / "ray.m4b", voices, engine="ray", workers=2, threads=1)
    finally:
        ray.shutdown()
    assert (tmp_path / "ray.m4b").read_bytes() == (tmp_path / "local.m4b").read_bytes()
    for i in (1, 2, 3):
        local = json.loads((tmp_path / f"local.{i:03d}.json").read_text())
        remote = json.loads((tmp_path / f"ray.{i:03d}.json").read_text())
        local["audio"].pop("file"), remote["audio"].pop("file")
        assert local == remote


@needs_real_model
def test_real_model_cli_m4b_with_captions(tmp_path, capsys):
    """The command line end to end on the real model: a tiny EPUB, English, a real voice."""
    from kcc.cli import main
    from kcc.weights.real_model import fetch
    chapters = [("One", ["Alice was tired."]), ("Two", ["Curiouser and curiouser!"])]
    book = write_epub(tmp_path / "tiny.epub", chapters, notes=False)
    voice = f"{fetch(offline=True)['voices']}:jf_alpha"
    rc = main(["book", str(book), "-o", str(tmp_path / "tiny.m4b"), "--voice", voice, "--subtitles", "srt",
               "--workers", "1", "--threads", "2", "--progress"])
    assert rc == 0
    err = capsys.readouterr().err
    assert "language en-us" in err and "2/2 chapters" in err and " h audio, ETA " in err
    assert not (tmp_path / ".tiny.m4b.kcc-book").exists()            # removed after a complete book
    whole = (tmp_path / "tiny.srt").read_text()                      # the whole book's captions
    assert "tired." in whole and "Curiouser" in whole
    assert [t for t, _ in read_chapters(tmp_path / "tiny.m4b")] == ["One", "Two"]
    srt = (tmp_path / "tiny.001.srt").read_text()
    assert srt.startswith("1\n00:00:0") and "tired." in srt
    side = json.loads((tmp_path / "tiny.002.json").read_text())
    assert side["lang"] == "en-us" and side["items"][1]["text"] == "Curiouser and curiouser!"


@needs_real_model
def test_real_speech_joins_carry_no_clicks(tmp_path):
    """Real speech, joins with silence (paragraphs) and without (a paragraph cut at a sentence
    end): the largest step near any join is below the 99.9th percentile step inside speech."""
    from kcc.speech.book.sources import Book, Chapter
    from kcc.speech.batch.local_pool import SynthSpec
    from kcc.weights.real_model import fetch
    book = Book("Joins", chapters=[Chapter("Joins", ["Alice was tired of sitting by her sister.",
                                                     "Down she went. Down, down, down. Would the fall never end?"])])
    opts = BookOptions(format="wav", voice=f"{fetch(offline=True)['voices']}:jf_alpha", announce=False,
                       item_chars=30)                                   # the second paragraph is cut
    job = BookJob(book, tmp_path / "out", opts, synth=SynthSpec(threads=2), workers=1)
    list(job)
    assert job.ok, job.failures
    side = json.loads(next((tmp_path / "out").glob("001-*.json")).read_text())
    assert len(side["items"]) >= 3 and any(i["pause_s"] == 0 for i in side["items"])
    audio = samples(tmp_path / "out" / side["audio"]["file"])
    spans = [(int(round(i["start_s"] * 24000)), int(round(i["end_s"] * 24000))) for i in side["items"]]
    at_joins, inside = join_clicks(audio, [j for s in spans for j in s], spans)
    assert inside > 0.005 and at_joins <= inside, (at_joins, inside)


@needs_real_model
def test_default_voice_follows_the_declared_language(tmp_path, voices):
    from kcc.speech.book.sources import Book, Chapter
    from kcc.speech.voices import voice_catalog
    np.save(voices / "ff_test.npy", random_voice(3))                # a French voice, by its name's letter
    # upstream's voice of the language where the catalog has it (the official voices), else a
    # voice whose name says the language (the user's ff_test when only the Japanese five exist)
    french = "ff_siwis" if "ff_siwis" in voice_catalog([voices]) else "ff_test"
    english = "af_heart" if "af_heart" in voice_catalog([voices]) else "jf_alpha"
    for lang, want in (("fr", french), ("ja-JP", "jf_alpha"), (None, english)):
        book = Book("B", chapters=[Chapter("Un", ["Bonjour."])], language=lang)
        assert BookJob(book, tmp_path / "o", BookOptions(), **batch_kw(voices)).voice == want, lang


def test_bad_outputs_are_refused_before_the_book_is_read(tmp_path):
    from kcc.speech.audio.outputs import OutputError
    (tmp_path / "dir.m4b").mkdir()
    (tmp_path / "file").write_text("x")
    os.symlink(tmp_path / "elsewhere.m4b", tmp_path / "link.m4b")
    missing = tmp_path / "no-such-book.epub"                  # would be a BookError if it were read first
    for out, fmt in ((tmp_path / "dir.m4b", "m4b"), (tmp_path / "link.m4b", "m4b"), (tmp_path / "file", "wav"),
                     (tmp_path / "no" / "such" / "dir", "flac")):
        with pytest.raises(OutputError):
            BookJob(missing, out, BookOptions(format=fmt))


def test_a_pdf_job_carries_the_warning_of_what_is_lost(tmp_path, voices, capsys):
    from kcc.speech.book.sources import PDF_WARNING
    files = write_all(tmp_path / "in")
    job = BookJob(files["pdf"], tmp_path / "pdf.m4b", BookOptions(voice="va.npy"), **batch_kw(voices))
    assert job.notes == [PDF_WARNING] and "text layer" in PDF_WARNING and "images" in PDF_WARNING
    assert job.book.format == "pdf" and len(job.plans) == 3
