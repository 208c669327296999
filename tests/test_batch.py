"""kcc batch: manifests, item outputs and sidecars, resume after kill -9, the local worker pool,
bad items as error records, the Python iterator API and the CLI (fake synthesizer and G2P)."""
from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from kcc.speech.batch import Batch, BatchError, Defaults, Item, ManifestError, Rejected, synthesize
from kcc.speech.batch.audio import AudioFormatError, encode_audio
from kcc.speech.batch.item import ItemWorker, JobOptions, is_done
from kcc.speech.batch.local_pool import MAX_ATTEMPTS, WorkerLoadError, split_cores
from kcc.speech.batch.manifest import RUN_MANIFEST, read_manifest
from kcc.speech.g2p.g2p import Word, load_vocab
from kcc.speech.engine import random_voice
from real_model_here import needs_real_model
from test_say import FakeSynth, LetterG2P

REPO = Path(__file__).resolve().parents[1]


# -- picklable doubles for spawned workers --------------------------------------------------
def letters(lang):
    return LetterG2P()


@dataclass(frozen=True)
class FakeFactory:
    """Loads a FakeSynth in a worker. kill_seed: a call with that seed SIGKILLs its process, once
    (a marker file in `marks` remembers) or every time (always). Each load leaves a file in `marks`."""
    marks: str | None = None
    kill_seed: int = -1
    always: bool = False
    delay: float = 0.0

    def __call__(self):
        if self.marks:
            Path(self.marks, f"load-{os.getpid()}-{time.monotonic_ns()}").touch()
        return _KillingSynth(self)


class _KillingSynth(FakeSynth):
    model_digest = "fake-model-1"

    def __init__(self, factory: FakeFactory):
        super().__init__(delay=factory.delay)
        self.factory = factory

    def synthesize(self, ids, ref_s, speed=1.0, seed=0):
        if seed == self.factory.kill_seed:
            marker = Path(self.factory.marks, f"killed-{seed}")
            if self.factory.always or not marker.exists():
                marker.touch()
                os.kill(os.getpid(), signal.SIGKILL)
        return super().synthesize(ids, ref_s, speed, seed)


class FailingFactory:
    def __call__(self):
        raise RuntimeError("no model here")


# -- helpers ----------------------------------------------------------------------------------
VOICES: Path | None = None     # voice files by path ('va.npy'): no catalog, so no real-model fetch


@pytest.fixture(scope="module", autouse=True)
def voice_dir(tmp_path_factory):
    global VOICES
    VOICES = tmp_path_factory.mktemp("voices")
    np.save(VOICES / "va.npy", random_voice(1))
    np.save(VOICES / "vb.npy", random_voice(2))
    return VOICES


def job_kwargs(**kw) -> dict:
    return {"synth": FakeFactory(), "workers": 1, "g2p": letters, "voices_dirs": [str(VOICES)],
            "defaults": Defaults(voice="va.npy"), **kw}


def ids_of(phonemes: str) -> list[int]:
    vocab = load_vocab()
    return [vocab[c] for c in phonemes]


def expected_bytes(phonemes: str, speed: float = 1.0, fmt: str = "wav") -> bytes:
    ids = ids_of(phonemes)
    return encode_audio(FakeSynth.audio(ids, FakeSynth.durations(ids, speed)), fmt)


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def outputs(outdir: Path) -> dict[str, bytes]:
    """Every item file; sidecars without their wall time (the only field that may differ)."""
    got = {}
    for p in sorted(outdir.iterdir()):
        if p.name.startswith(".") or p.name == RUN_MANIFEST:
            continue
        if p.suffix == ".json":
            side = json.loads(p.read_text(encoding="utf-8"))
            side.pop("wall_s")
            got[p.name] = json.dumps(side, sort_keys=True).encode()
        else:
            got[p.name] = p.read_bytes()
    return got


def children(pid: int) -> list[int]:
    """Direct children of pid, from /proc (Linux)."""
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


PHONEME_ITEMS = [{"id": f"p{i}", "phonemes": ph, "seed": 10 + i}
                 for i, ph in enumerate(["hɛlO wɜɹld.", "ə bɪt mɔɹ.", "kəkˈɔɹO.", "tɛst wʌn tu.", "ɡʊd bI."])]


# -- manifests --------------------------------------------------------------------------------
def test_manifest_kinds_read_the_same_items(tmp_path):
    rows = [{"id": "a1", "text": "Hello there.", "voice": "af", "speed": 1.25, "seed": 3, "format": "flac"},
            {"id": "b2", "phonemes": "hɛlO", "lang": "en-gb"}]
    jl = read_manifest(write_jsonl(tmp_path / "m.jsonl", rows))
    csv_path = tmp_path / "m.csv"
    csv_path.write_text("id,text,phonemes,voice,lang,speed,seed,format\n"
                        "a1,Hello there.,,af,,1.25,3,flac\n"
                        "b2,,hɛlO,,en-gb,,,\n", encoding="utf-8")
    cs = read_manifest(csv_path)
    strip = lambda recs: [{**r.to_dict(), "line": 0} for r in recs]
    assert strip(jl) == strip(cs)
    assert jl[0] == Item("a1", 1, "Hello there.", None, "af", "auto", 1.25, 3, "flac")
    assert jl[1] == Item("b2", 2, None, "hɛlO", None, "en-gb", 1.0, 0, "wav")
    txt = tmp_path / "lines.txt"
    txt.write_text("First line.\n\n  Third line.  \n", encoding="utf-8")
    assert read_manifest(txt, Defaults(voice="v", format="mp3")) == [
        Item("1", 1, "First line.", voice="v", format="mp3"), Item("3", 3, "Third line.", voice="v", format="mp3")]


BAD_RECORDS = [
    ({"id": "a/b", "text": "x"}, "path separator"),
    ({"id": "a\\b", "text": "x"}, "path separator"),
    ({"id": "..", "text": "x"}, "starts with '.'"),
    ({"id": ".hidden", "text": "x"}, "starts with '.'"),
    ({"id": "bell\x07", "text": "x"}, "control character"),
    ({"id": "", "text": "x"}, "empty"),
    ({"id": " pad", "text": "x"}, "whitespace"),
    ({"id": "x" * 201, "text": "x"}, "longer than 200 bytes"),
    ({"id": "kcc-batch", "text": "x"}, "reserved"),
    ({"id": ["l"], "text": "x"}, "must be a string"),
    ({"text": "x"}, "must be a string"),
    ({"id": "a", "text": "x", "phonemes": "y"}, "exactly one"),
    ({"id": "a"}, "exactly one"),
    ({"id": "a", "text": "   "}, "text is empty"),
    ({"id": "a", "text": 5}, "must be a string"),
    ({"id": "a", "text": "x", "speed": 9}, "speed must be between"),
    ({"id": "a", "text": "x", "speed": "fast"}, "speed must be a number"),
    ({"id": "a", "text": "x", "seed": 1.5}, "seed must be an integer"),
    ({"id": "a", "text": "x", "seed": -1}, "seed must be in"),
    ({"id": "a", "text": "x", "format": "aiff"}, "format 'aiff'"),
    ({"id": "a", "text": "x", "lang": "klingon"}, "language 'klingon' is not supported"),
    ({"id": "a", "text": "x", "voice": "../secret.npy"}, "not paths"),
    ({"id": "a", "text": "x", "colour": "red"}, "unknown column"),
]


@pytest.mark.parametrize("record, reason", BAD_RECORDS)
def test_bad_records_are_rejected_with_reason(tmp_path, record, reason):
    got = read_manifest(write_jsonl(tmp_path / "m.jsonl", [{"id": "ok", "text": "fine"}, record]))
    assert isinstance(got[0], Item) and len(got) == 2
    assert isinstance(got[1], Rejected) and got[1].line == 2 and reason in got[1].reason, got[1]


@pytest.mark.parametrize("line, reason", [
    ('{"id": "deep", "text": ' + "[" * 100_000 + "]" * 100_000 + "}", "RecursionError"),
    ('{"id": "big", "text": "x", "seed": ' + "9" * 5000 + "}", "ValueError: Exceeds the limit"),
])
def test_a_hostile_jsonl_line_is_rejected_and_reading_goes_on(tmp_path, line, reason):
    m = tmp_path / "m.jsonl"
    m.write_text('{"id": "a", "text": "one"}\n' + line + '\n{"id": "b", "text": "two"}\n', encoding="utf-8")
    got = read_manifest(m)
    assert [type(r).__name__ for r in got] == ["Item", "Rejected", "Item"]
    assert got[1].line == 2 and f"not a JSON record kcc reads: {reason}" in got[1].reason


@pytest.mark.parametrize("kind, big", [
    ("csv", "huge," + "x" * 200_000),
    ("csv", 'huge,"' + "x\n" * 70_000 + '"'),                  # quoted, over many lines
    ("csv", "huge,x\n".replace("x", "é" * 70_000)),             # 140 KB of UTF-8 in 70k characters
    ("csv", "x" * 200_000 + ",short"),                          # the id column
    ("jsonl", json.dumps({"id": "huge", "text": "x" * 200_000})),
    ("jsonl", json.dumps({"id": "huge", "text": "t", "voice": "v" * 140_000})),
    ("text", "x" * 200_000),
])
def test_a_field_over_128_kib_is_a_rejected_line_and_reading_goes_on(tmp_path, kind, big):
    m = tmp_path / f"m.{ {'text': 'txt'}.get(kind, kind)}"
    first, last = {"csv": ("ok,fine", "after,more"), "text": ("fine", "more"),
                   "jsonl": ('{"id": "ok", "text": "fine"}', '{"id": "after", "text": "more"}')}[kind]
    m.write_text(("id,text\n" if kind == "csv" else "") + f"{first}\n{big}\n{last}\n", encoding="utf-8")
    got = read_manifest(m)
    assert [type(r).__name__ for r in got] == ["Item", "Rejected", "Item"], got
    assert "a field may hold at most 128 KiB" in got[1].reason or "id is longer than 200 bytes" in got[1].reason
    assert got[1].line == (3 if kind == "csv" else 2) and got[2].text == "more"


@pytest.mark.parametrize("body, line", [
    ('a,"hello\nb,world\nc,"bye"\n', 2),             # the next quote opens a field: swallowed b
    ('a,fine\nb,"hello\nc,world\nd,more\n', 3),      # never closed: the end of the file inside quotes
    ('a,"x"y\nb,ok\n', 2),                           # text after a closing quote
    ('a,"unclosed\n', 2),
    ('a,ok\nb,"he said "hi""\n', 3),
])
def test_a_csv_quote_left_open_is_a_manifest_error_naming_its_line(tmp_path, body, line):
    m = tmp_path / "m.csv"
    m.write_text("id,text\n" + body, encoding="utf-8")
    with pytest.raises(ManifestError, match=f"CSV manifest line {line}: .*quote opened on this line"):
        read_manifest(m)


def test_a_csv_field_over_lines_that_closes_is_one_record(tmp_path):
    m = tmp_path / "m.csv"
    m.write_text('id,text\na,"Dear John,\nHello, world"\nb,"say ""hi"""\n', encoding="utf-8")
    got = read_manifest(m)
    assert [(r.id, r.text, r.line) for r in got] == [("a", "Dear John,\nHello, world", 2), ("b", 'say "hi"', 4)]


@pytest.mark.parametrize("record, column", [
    ({"id": "\ud800x", "text": "t"}, "id"),
    ({"id": "ok", "text": "t", "voice": "af_\udc80"}, "voice"),
    ({"id": "ok", "text": "bad \udfff text"}, "text"),
    ({"id": "ok", "phonemes": "h\ud83d"}, "phonemes"),
    ({"id": "ok", "text": "t", "lang": "\ud800"}, "lang"),
    ({"id": "ok", "text": "t", "format": "wa\udc00v"}, "format"),
    ({"id": "ok", "text": "t", "\ud800": "x"}, "a column name"),
])
def test_a_lone_surrogate_in_any_field_is_a_rejected_line(tmp_path, record, column):
    m = tmp_path / "m.jsonl"
    m.write_text('{"id": "a", "text": "one"}\n' + json.dumps(record) + '\n{"id": "b", "text": "two"}\n',
                 encoding="utf-8")                      # json.dumps escapes the surrogate: valid UTF-8 on disk
    got = read_manifest(m)
    assert [type(r).__name__ for r in got] == ["Item", "Rejected", "Item"]
    assert "not valid" in got[1].reason and (column in got[1].reason or column == "id")
    assert got[1].id is None or got[1].id.encode("utf-8")       # what is shown can be written


def test_a_surrogate_record_does_not_stop_the_batch_or_its_summary(tmp_path):
    out = tmp_path / "out"
    records = [{"id": "good", "phonemes": "hɛlO"}, {"id": "\ud800", "phonemes": "hɛlO"},
               {"id": "v", "phonemes": "hɛlO", "voice": "x\udc80.npy"}, {"id": "good2", "phonemes": "hɛlO"}]
    job, got = run_batch(records, out)
    assert [o.status for o in got] == ["error", "error", "done", "done"]
    run = json.loads((out / RUN_MANIFEST).read_text(encoding="utf-8"))
    assert run["status"] == "complete" and run["counts"]["done"] == 2 and run["counts"]["failed"] == 2
    assert run["failures"][0]["id"] == "\\ud800"                      # shown as its escape


def test_the_run_summary_is_finalised_whatever_an_engine_reports(tmp_path, monkeypatch):
    """The summary is written in a finally with text that always encodes: an engine outcome
    carrying a lone surrogate leaves status 'complete', not 'running'."""
    from kcc.speech.batch.item import Outcome
    job = Batch(PHONEME_ITEMS[:1], tmp_path / "out", **job_kwargs())
    monkeypatch.setattr(job, "_engine_outcomes", lambda: iter([Outcome("p0", 1, "error", "bad \udc80 reason")]))
    assert [o.status for o in job] == ["error"]
    run = json.loads((tmp_path / "out" / RUN_MANIFEST).read_text(encoding="utf-8"))
    assert run["status"] == "complete" and run["failures"][0]["reason"] == "bad \udc80 reason"   # JSON's escape


@pytest.mark.parametrize("source", ["/dev/zero", "/dev/urandom"])
def test_a_manifest_that_never_ends_is_refused_by_size(source):
    """stat says 0 bytes for these: the reader counts what it reads."""
    with pytest.raises(ManifestError, match=f"manifest {source} is over 256 MiB"):
        read_manifest(source)


def test_bad_lines_and_repeated_ids(tmp_path):
    m = tmp_path / "m.jsonl"
    m.write_text('{"id": "a", "text": "x"}\n{oops\n[1, 2]\n{"id": "A", "text": "y"}\n{"id": 7, "text": "z"}\n',
                 encoding="utf-8")
    got = read_manifest(m)
    assert [type(r).__name__ for r in got] == ["Item", "Rejected", "Rejected", "Rejected", "Item"]
    assert "not valid JSON" in got[1].reason and "expected a JSON object" in got[2].reason
    assert got[3].reason == "id 'A' repeats the id on line 1" and got[4].id == "7"
    c = tmp_path / "m.csv"
    c.write_text('id,text\nok,"quoted, with comma"\nbad,two,extra\n', encoding="utf-8")
    got = read_manifest(c)
    assert got[0].text == "quoted, with comma" and "more field(s) than the header" in got[1].reason


@pytest.mark.parametrize("content, kind, msg", [
    (None, None, "No such file"),
    (b"id,text\nok,caf\xe9\n", None, "not valid UTF-8"),
    (b"name,text\nok,x\n", None, "needs a header row with an 'id' column"),
    (b"x\n", "yaml", "kind 'yaml'"),
])
def test_unreadable_manifests_raise(tmp_path, content, kind, msg):
    path = tmp_path / "m.csv"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(ManifestError, match=msg):
        read_manifest(path, kind=kind)


# -- items, sidecars, resume --------------------------------------------------------------------
def run_batch(manifest, out, **kw) -> tuple[Batch, list]:
    job = Batch(manifest, out, **job_kwargs(**kw))
    return job, list(job)


def test_item_outputs_and_sidecar(tmp_path):
    job, got = run_batch([{"id": "hello", "text": "Hello brave world.", "seed": 7, "speed": 1.25},
                          PHONEME_ITEMS[0]], tmp_path / "out")
    assert [o.status for o in got] == ["done", "done"] and job.ok
    out = tmp_path / "out"
    assert (out / "hello.wav").read_bytes() == expected_bytes("hello brave world.", 1.25)
    assert (out / "p0.wav").read_bytes() == expected_bytes(PHONEME_ITEMS[0]["phonemes"])
    side = json.loads((out / "hello.json").read_text(encoding="utf-8"))
    ids = ids_of("hello brave world.")
    assert side["phonemes"] == ["hello brave world."] and side["seed"] == 7 and side["speed"] == 1.25
    assert side["durations"] == [FakeSynth.durations(ids, 1.25).tolist()]
    assert [w["word"] for w in side["words"]] == ["Hello", "brave", "world", "."]
    assert side["model_digest"] == "fake-model-1" and side["g2p"] == "letters (test double)"
    data = (out / "hello.wav").read_bytes()
    assert side["audio"]["sha256"] == hashlib.sha256(data).hexdigest() and side["audio"]["bytes"] == len(data)
    assert side["audio"]["samples"] == int(FakeSynth.durations(ids, 1.25).sum()) * 600
    assert side["audio"]["seconds"] == pytest.approx(got[0].audio_s) and side["wall_s"] > 0
    run = json.loads((out / RUN_MANIFEST).read_text())
    assert run["status"] == "complete" and run["counts"]["done"] == 2 and run["failures"] == []
    umask = os.umask(0)
    os.umask(umask)
    assert {(out / n).stat().st_mode & 0o777 for n in ("hello.wav", "hello.json", RUN_MANIFEST)} == {0o666 & ~umask}
    assert run["throughput"]["audio_s"] == pytest.approx(sum(o.audio_s for o in got), abs=1e-3)


def test_rerun_skips_done_items_and_redoes_changed_or_damaged_ones(tmp_path):
    out = tmp_path / "out"
    first = list(synthesize(PHONEME_ITEMS, out, **job_kwargs()))          # the notebook shorthand
    assert {o.status for o in first} == {"done"} and len(first) == 5
    before = outputs(out)
    _, again = run_batch(PHONEME_ITEMS, out, synth=FakeFactory(marks=str(tmp_path)))
    assert [o.status for o in again] == ["skipped"] * 5 and outputs(out) == before
    # damage: a truncated audio, an edited audio of the same size, a missing sidecar, a stale temp file
    (out / "p0.wav").write_bytes((out / "p0.wav").read_bytes()[:100])
    b = bytearray((out / "p1.wav").read_bytes())
    b[-1] ^= 1
    (out / "p1.wav").write_bytes(bytes(b))
    (out / "p2.json").unlink()
    dead = subprocess.Popen(["true"])
    dead.wait()
    killed_runs = [out / f".kcc-tmp.{dead.pid}.p3.wav.abc.part", out / f".kcc-tmp.{dead.pid}.kcc-batch.json.x.part"]
    for p in killed_runs:
        p.write_bytes(b"half")
    users = [out / ".draft.wav.part", out / ".p3.wav.abc.part", out / ".kcc-tmp.notapid.x.part"]
    for p in users:                                    # not kcc's temporaries: the user's, kept
        p.write_bytes(b"mine")
    changed = [dict(r, speed=1.5) if r["id"] == "p4" else r for r in PHONEME_ITEMS]
    _, third = run_batch(changed, out)
    assert {o.id: o.status for o in third} == {"p0": "done", "p1": "done", "p2": "done", "p3": "skipped", "p4": "done"}
    assert sorted(out.glob(".*.part")) == sorted(users) and all(p.read_bytes() == b"mine" for p in users)
    for p in users:
        p.unlink()
    after = outputs(out)
    assert (out / "p4.wav").read_bytes() == expected_bytes(PHONEME_ITEMS[4]["phonemes"], 1.5)
    assert {k: v for k, v in after.items() if not k.startswith("p4")} == {
        k: v for k, v in before.items() if not k.startswith("p4")}


def test_bad_items_become_error_records_and_the_batch_goes_on(tmp_path):
    out = tmp_path / "out"
    records = [{"id": "good", "phonemes": "hɛlO"},
               {"id": "novoice", "text": "Hi there.", "voice": "nobody.npy"},
               {"id": "long", "text": "word " * 50},
               {"id": "odd", "phonemes": "hʘlO"},
               {"id": "../escape", "text": "x"},
               {"id": "silent", "text": "\u200b"},
               {"id": "good2", "text": "Fine again."}]
    job, got = run_batch(records, out, max_chars=200)
    reasons = {o.id: (o.status, o.reason) for o in got}
    assert reasons["good"] == ("done", "") and reasons["good2"] == ("done", "")
    assert reasons["novoice"][0] == "error" and "voice file 'nobody.npy' does not exist" in reasons["novoice"][1]
    assert "too long: 250 characters, over the 200" in reasons["long"][1]
    assert "'ʘ' (U+0298)" in reasons["odd"][1]
    assert "path separator" in reasons["../escape"][1]
    assert "no phonemes" in reasons["silent"][1]
    assert not job.ok and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    assert sorted(p.name for p in out.iterdir()) == [".kcc-batch.lock", "good.json", "good.wav", "good2.json",
                                                     "good2.wav", RUN_MANIFEST]
    run = json.loads((out / RUN_MANIFEST).read_text())
    assert run["counts"] == {"records": 7, "finished": 7, "done": 2, "skipped": 0, "failed": 5}
    assert {f["id"]: f["line"] for f in run["failures"]} == {"novoice": 2, "long": 3, "odd": 4, "../escape": 5,
                                                            "silent": 6}


class _OddG2P(LetterG2P):
    def __call__(self, text):
        return [Word("click", "kʘk", True), Word("ok", "ok", False)]


def test_g2p_warnings_go_into_the_sidecar(tmp_path):
    job, got = run_batch([{"id": "odd", "text": "click ok"}], tmp_path, g2p=lambda lang: _OddG2P())
    assert got[0].status == "done"
    side = json.loads((tmp_path / "odd.json").read_text(encoding="utf-8"))
    assert side["phonemes"] == ["kʘk ok"] and len(side["warnings"]) == 1
    assert "'ʘ' (U+0298) at 1 in word 'click'" in side["warnings"][0]


def test_voices_resolve_in_voice_dirs_and_blend(tmp_path):
    vdir = VOICES
    out = tmp_path / "out"
    worker = ItemWorker(FakeSynth(), JobOptions(str(out), (str(vdir),), letters))
    pack, digest = worker.voice("va.npy:0.75,vb.npy:0.25")
    np.testing.assert_allclose(pack, 0.75 * random_voice(1) + 0.25 * random_voice(2), atol=1e-7)
    assert worker.voice("va.npy")[1] != digest
    synth = FakeSynth()
    job, got = run_batch([{"id": "v", "phonemes": "hɛlO", "voice": "vb.npy"}], out, synth=synth)
    assert got[0].status == "done"
    np.testing.assert_array_equal(synth.calls[0]["ref_s"], random_voice(2)[len("hɛlO") - 1])


@pytest.mark.parametrize("workers, processes", [(2, False), (2, True)])
def test_kill_9_loses_only_items_in_flight_and_resume_matches_a_clean_run(tmp_path, workers, processes):
    items = [{"id": f"k{i:02d}", "phonemes": "hɛlO wɜɹld " * (1 + i % 3), "seed": i} for i in range(12)]
    manifest = write_jsonl(tmp_path / "m.jsonl", items)
    out = tmp_path / "out"
    script = ("import sys; sys.path[:0] = [sys.argv[1]]\n"
              "from test_batch import FakeFactory, letters\nfrom kcc.speech.batch import Batch, Defaults\n"
              "for o in Batch(sys.argv[2], sys.argv[3], synth=FakeFactory(delay=0.15), workers=int(sys.argv[5]),\n"
              "               processes=sys.argv[6] == '1', g2p=letters, voices_dirs=[sys.argv[4]],\n"
              "               defaults=Defaults(voice='va.npy')):\n"
              "    print(o.id, o.status, flush=True)\n")
    proc = subprocess.Popen([sys.executable, "-c", script, str(REPO / "tests"), str(manifest), str(out), str(VOICES),
                             str(workers), str(int(processes))],
                            stdout=subprocess.PIPE, text=True, cwd=REPO)
    finished = [proc.stdout.readline().split()[0] for _ in range(4)]
    kids = children(proc.pid)
    assert len(kids) >= workers if processes else kids == []     # threads: no child process at all
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    deadline = time.monotonic() + 20                        # pool workers notice their parent died
    while any(Path(f"/proc/{k}").exists() for k in kids) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [k for k in kids if Path(f"/proc/{k}").exists()], "orphaned workers still running"
    # every item with a sidecar is complete; nothing else pretends to be
    sides = sorted(p.stem for p in out.glob("k[0-9]*.json"))
    assert set(finished) <= set(sides) and len(sides) < 12
    for stem in sides:
        side = json.loads((out / f"{stem}.json").read_text(encoding="utf-8"))
        assert is_done(out / f"{stem}.wav", out / f"{stem}.json", side["fingerprint"])
    assert json.loads((out / RUN_MANIFEST).read_text())["status"] == "running"
    _, resumed = run_batch(manifest, out)
    # (a pool worker may finish the item it holds after its parent died: more may be skipped)
    assert set(sides) <= {o.id for o in resumed if o.status == "skipped"}
    assert all(o.status in ("done", "skipped") for o in resumed) and len(resumed) == 12
    _, clean = run_batch(manifest, tmp_path / "clean")
    assert outputs(out) == outputs(tmp_path / "clean")


def test_one_job_per_outdir(tmp_path):
    job = Batch(PHONEME_ITEMS, tmp_path, **job_kwargs())
    it = iter(job)
    next(it)
    with pytest.raises(BatchError, match="another kcc batch is writing"):
        list(Batch(PHONEME_ITEMS, tmp_path, **job_kwargs()))
    it.close()
    assert json.loads((tmp_path / RUN_MANIFEST).read_text())["status"] == "interrupted"
    assert len(list(Batch(PHONEME_ITEMS, tmp_path, **job_kwargs()))) == 5


@pytest.mark.parametrize("kwargs, msg", [
    ({"engine": "spark"}, "engine 'spark'"),
    ({"workers": 0}, r"workers 0 is outside \[1, 256\]"),
    ({"threads": -2}, "threads must be a positive integer, got -2"),
    ({"workers": 1.5}, r"workers 1.5 is outside \[1, 256\]"),
    ({"max_chars": 0}, "max_chars must be a positive integer, got 0"),
])
def test_bad_job_options_raise(tmp_path, kwargs, msg):
    with pytest.raises(BatchError, match=msg):
        Batch(PHONEME_ITEMS, tmp_path, **kwargs)
    assert not list(tmp_path.iterdir())


def test_unloadable_model_stops_the_job(tmp_path):
    with pytest.raises(WorkerLoadError, match="no model here"):
        list(Batch(PHONEME_ITEMS, tmp_path, **job_kwargs(synth=FailingFactory())))


def test_split_cores():
    assert split_cores(2) == (2, 1)
    assert split_cores(8, threads=2) == (4, 2)
    assert split_cores(8, workers=2) == (2, 4)
    assert split_cores(2, workers=3, threads=1) == (3, 1)


# -- the local engine: threads, processes -------------------------------------------------------
def test_threads_run_items_at_once_on_one_synthesizer(tmp_path):
    _, serial = run_batch(PHONEME_ITEMS, tmp_path / "serial")
    synth = FakeFactory(delay=0.2)()
    job, got = run_batch(PHONEME_ITEMS, tmp_path / "threads", workers=2, synth=synth)
    assert job.ok and job.summary["engine"] == "local-threads" and job.summary["workers"] == 2
    assert synth.max_active == 2 and len(synth.calls) == len(PHONEME_ITEMS)
    assert outputs(tmp_path / "threads") == outputs(tmp_path / "serial")
    with pytest.raises(BatchError, match="runs in this process only"):
        Batch(PHONEME_ITEMS, tmp_path / "x", synth=synth, processes=True)


def test_pool_matches_in_process_and_survives_a_killed_worker(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    _, serial = run_batch(PHONEME_ITEMS, tmp_path / "serial")
    job, pooled = run_batch(PHONEME_ITEMS, tmp_path / "pool", workers=2, processes=True,
                            synth=FakeFactory(marks=str(marks), kill_seed=12))
    assert job.ok and sorted(o.id for o in pooled) == [r["id"] for r in PHONEME_ITEMS]
    assert (marks / "killed-12").exists()
    assert 2 <= len(list(marks.glob("load-*"))) <= 2 * 2 + 2      # per worker (and its replacements), not per item
    assert outputs(tmp_path / "pool") == outputs(tmp_path / "serial")


def test_no_worker_pool_is_built_once_kcc_is_ending(monkeypatch):
    """After a signal's clean-up (AtomicFile.ending) the batch's thread, which runs on until the
    process ends, builds no new pool: its five semaphores would outlive the clean-up that
    released the others, and multiprocessing's resource tracker would warn of them."""
    from kcc.files import AtomicFile, ProcessEnding
    from kcc.speech.batch import local_pool
    built = []
    monkeypatch.setattr(local_pool, "ProcessPoolExecutor", lambda *a, **k: built.append(a) or pytest.fail("built"))
    monkeypatch.setattr(AtomicFile, "ending", True)
    with pytest.raises(ProcessEnding, match="no new worker pool"):
        next(local_pool.run_processes([Item("1", 1, "One.")], JobOptions("out"), lambda: None, 2))
    assert built == []


def test_pool_gives_up_on_an_item_that_always_kills_its_worker(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    # p2 is queued behind p1 and each innocent item takes 0.4 s: every death of a grouped run
    # happens with an innocent item in flight, which must not be blamed for it
    job, got = run_batch(PHONEME_ITEMS[:3], tmp_path / "out", workers=2, processes=True,
                         synth=FakeFactory(marks=str(marks), kill_seed=11, always=True, delay=0.4))
    status = {o.id: o for o in got}
    assert status["p1"].status == "error", status["p1"]
    assert f"died {MAX_ATTEMPTS} times with this item alone in flight" in status["p1"].reason
    assert status["p0"].status == status["p2"].status == "done", (status["p0"], status["p2"])
    assert not job.ok and sorted(status) == ["p0", "p1", "p2"]


# -- audio formats ----------------------------------------------------------------------------
def test_compressed_formats_are_deterministic_and_decode():
    av = pytest.importorskip("av")
    ids = ids_of("hɛlO wɜɹld.")
    audio = FakeSynth.audio(ids, FakeSynth.durations(ids))
    audio = audio * np.float32(0.95 / np.abs(audio).max())          # past half scale, where a second rounding shows
    pcm = np.frombuffer(encode_audio(audio, "wav")[44:], dtype="<i2")
    for fmt, rate in (("flac", 24000), ("mp3", 24000), ("opus", 48000)):    # Opus decodes at 48 kHz
        data = encode_audio(audio, fmt)
        assert encode_audio(audio, fmt) == data
        with av.open(io.BytesIO(data)) as c:
            stream = c.streams.audio[0]
            decoded = np.concatenate([f.to_ndarray().reshape(-1) for f in c.decode(stream)])
            assert stream.rate == rate
        if fmt == "flac":
            np.testing.assert_array_equal(decoded, pcm)                  # lossless
        else:
            assert abs(decoded.size - pcm.size * rate // 24000) <= 2 * 1152 + 312 * rate // 24000
    with pytest.raises(AudioFormatError, match="unknown audio format 'aiff'"):
        encode_audio(audio, "aiff")


# -- command line -----------------------------------------------------------------------------
def _cli(argv, monkeypatch):
    from kcc.speech.batch import cli as batch_cli
    from kcc.speech.batch import local_pool
    from kcc.speech.cli.run import run_command
    monkeypatch.setattr(local_pool.SynthSpec, "__call__", lambda self: FakeSynth())
    monkeypatch.setattr("kcc.speech.batch.item.G2P", lambda lang, backend: LetterG2P())
    ap = argparse.ArgumentParser(prog="kcc")
    batch_cli.add_parser(ap.add_subparsers(dest="cmd"))
    args = ap.parse_args(["batch", *argv])
    return run_command(args.fn, args)        # as kcc.cli runs it: errors named by the one exit table


def test_cli_batch_exit_status_and_progress(tmp_path, monkeypatch, capsys):
    txt = tmp_path / "lines.txt"
    txt.write_text("One line here.\nAnother line.\n", encoding="utf-8")
    voice = ["--voice", "va.npy", "--voices-dir", str(VOICES)]
    rc = _cli([str(txt), "-o", str(tmp_path / "out"), "--workers", "1", "--progress", "--seed", "4", *voice],
              monkeypatch)
    err = capsys.readouterr().err
    assert rc == 0 and "2/2 items" in err and "h audio" in err and "ETA" in err
    assert json.loads((tmp_path / "out" / "2.json").read_text(encoding="utf-8"))["seed"] == 4
    txt.write_text("One line here.\n\u200b\n", encoding="utf-8")
    rc = _cli([str(txt), "-o", str(tmp_path / "out"), "--workers", "1", *voice], monkeypatch)
    assert rc == 1 and "item '2' (line 2)" in capsys.readouterr().err
    rc = _cli([str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "out")], monkeypatch)
    assert rc == 2 and "ManifestError" in capsys.readouterr().err
    rc = _cli([str(txt), "-o", str(tmp_path / "o2"), "--speed", "9"], monkeypatch)
    assert rc == 2 and "speed must be between" in capsys.readouterr().err


# -- the real model -------------------------------------------------------------------------
@needs_real_model
def test_real_model_same_bytes_from_one_two_thread_worker_and_two_single_thread_workers(tmp_path):
    from kcc.speech.batch import SynthSpec
    from kcc.weights.real_model import fetch
    voice = Defaults(voice=f"{fetch(offline=True)['voices']}:jf_alpha")      # a real voice, by file
    items = [{"id": "r0", "phonemes": "hɛlO wɜɹld.", "seed": 3}, {"id": "r1", "phonemes": "kəkˈɔɹO.", "format": "flac"}]
    one, _ = run_batch(items, tmp_path / "one", synth=SynthSpec(threads=2), defaults=voice)
    assert one.ok and one.summary["workers"] == 1 and one.summary["threads_per_worker"] == 2
    for mode in ("threads", "processes"):
        job, _ = run_batch(items, tmp_path / mode, synth=SynthSpec(threads=1), workers=2, processes=mode == "processes",
                           defaults=voice)
        assert job.ok and job.summary["workers"] == 2 and job.summary["threads_per_worker"] == 1
        assert outputs(tmp_path / "one") == outputs(tmp_path / mode), mode
    side = json.loads((tmp_path / "one" / "r0.json").read_text(encoding="utf-8"))
    assert side["voice"] == voice.voice and side["model_digest"].startswith("kokoro-82m")
    assert 0.3 < side["audio"]["seconds"] < 5 and len(side["durations"][0]) == len("hɛlO wɜɹld.") + 2


def test_an_item_is_planned_at_its_speed_for_the_models_frames(tmp_path):
    """Chunks sized as kcc say sizes them (speed, the model's max_frames): none overflows and is cut
    again after its front stages ran."""
    from test_cli_hostile import FramedSynth
    made = []

    def factory():
        s = FramedSynth(max_frames=600)
        s.model_digest = "framed-1"
        made.append(s)
        return s
    text = " ".join(["word"] * 300) + "."
    items = [{"id": "slow", "text": text, "speed": 0.5}, {"id": "ph", "phonemes": " ".join(["wɜɹd"] * 300), "speed": 0.5}]
    outs = list(synthesize(write_jsonl(tmp_path / "m.jsonl", items), tmp_path / "out", **job_kwargs(synth=factory)))
    assert [o.status for o in outs] == ["done", "done"], outs
    calls = [c for s in made for c in s.calls]
    assert sum(s.overflows for s in made) == 0 and len(calls) > 4 and max(c["frames"] for c in calls) <= 600
