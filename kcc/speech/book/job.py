"""One audiobook job: read the book, run its items on the batch engine, assemble the outputs.

    job = BookJob("alice.epub", "alice.m4b")            # or an OUT directory, one file per chapter
    for event in job:                                  # batch Outcomes, then chapters as written
        ...
    job.ok, job.failures, job.audio_s

Outputs: `-o NAME.m4b` writes one .m4b with chapter markers and metadata, and beside it
NAME.NNN.json (and NAME.NNN.srt / .vtt) per chapter, plus NAME.srt / .vtt for the whole book
(chapter offsets added); `-o DIR` writes DIR/NNN-title.<format>, tagged as the book's tracks
(tags.py), with the same sidecars and captions. The items (one per paragraph, layout.py) go through
kcc.speech.batch into a work directory (.NAME.kcc-book beside the .m4b, DIR/.kcc-book inside
the directory), which is what makes the job resumable: after a kill -9 the next run skips every
item whose sidecar says it is complete and redoes the rest; a chapter file is renamed into place
only when whole, and is not rewritten when its sidecar's fingerprint (its items' fingerprints,
pauses and format) and its bytes still match. The work directory is the user's own (0700, refused
when someone else could write it: kcc.files.private_work_dir); it is removed once the book is
complete unless keep_work=True (a rerun with other pauses or another format is then nearly free),
and stays after a failure so that the rerun resumes. Only kcc's own temporaries are ever swept
(kcc.files.sweep_temporaries).
"""
from __future__ import annotations

import hashlib
import json
import re
import unicodedata
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from kcc.files import file_sha256, private_work_dir, remove_dir_atomically, sweep_temporaries
from kcc.speech.audio.outputs import check_output, check_output_dir
from kcc.speech.audio.timestamps import SAMPLE_RATE
from kcc.speech.batch.api import Batch
from kcc.speech.batch.item import Outcome, is_done, write_atomic
from kcc.speech.batch.manifest import Defaults
from kcc.speech.book.assemble import AUDIO_FORMATS, ChapterFile, assemble, chapter_sidecar
from kcc.speech.book.captions import item_breaks, write_captions
from kcc.speech.book.errors import BookError, UnsafeWorkDir
from kcc.speech.book.layout import ITEM_CHARS, ChapterPlan, Pauses, plan_chapters
from kcc.speech.book.m4b import M4bWriter
from kcc.speech.book.sources import Book, read_book
from kcc.speech.book.tags import ChapterTags
from kcc.speech.book.voice_choice import book_language, default_voice
from kcc.speech.worker_budget import check_workers

CHAPTER_SCHEMA = "kcc.speech.book.chapter/1"
WORK_DIR = ".kcc-book"


@dataclass(frozen=True)
class BookOptions:
    format: str = "m4b"                  # m4b, or a per-chapter audio format (assemble.AUDIO_FORMATS)
    subtitles: str | None = None         # srt / vtt
    announce: bool = True                # speak each chapter's title first
    pauses: Pauses = field(default_factory=Pauses)
    voice: str | None = None             # None: the book's language's default voice
    lang: str | None = None              # None: the book's declared language
    speed: float = 1.0
    seed: int = 0
    keep_work: bool = False              # keep the work directory (the items) after a complete job
    item_chars: int = ITEM_CHARS         # a longer paragraph is cut at sentence ends (layout.py)


@dataclass
class ChapterDone:
    index: int
    title: str
    status: str      # "written"; "current" (complete already, left alone); "synthesized" (its items, for a .m4b)
    seconds: float
    files: list[str]


class BookJob:
    """book: a path (read with sources.read_book) or a Book. The batch keywords (engine,
    workers, threads, synth, voices_dirs, g2p, address, processes) go to kcc.speech.batch.Batch.
    progress(stage, done, total): called now and then while a long book is read."""

    def __init__(self, book, out: str | Path, options: BookOptions = BookOptions(), progress=None, **batch):
        self.m4b = options.format == "m4b"
        if not self.m4b and options.format not in AUDIO_FORMATS:
            raise BookError(f"format {options.format!r} is not m4b or one of {', '.join(AUDIO_FORMATS)}")
        self.out = check_output(out, "-o") if self.m4b else check_output_dir(out, "-o")    # before any work
        if batch.get("workers") is not None:
            try:
                check_workers(batch["workers"], local=batch.get("engine", "local") == "local"
                              or batch.get("address") is None)
            except ValueError as exc:
                raise BookError(str(exc)) from None
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.book: Book = book if isinstance(book, Book) else read_book(book, progress=progress)
            self.lang = options.lang or book_language(self.book.language)
        self.notes = [str(w.message) for w in caught]
        self.options, self.batch = options, batch
        self.work = self.out.parent / f".{self.out.name}{WORK_DIR}" if self.m4b else self.out / WORK_DIR
        dirs = [Path(d) for d in batch.get("voices_dirs", ())]
        self.voice = options.voice or default_voice(self.lang, dirs)
        self.plans: list[ChapterPlan] = plan_chapters(self.book, options.pauses, options.announce, options.item_chars)
        self.failures: list[Outcome] = []
        self.audio_s = 0.0

    # -- the items --------------------------------------------------------------------------
    def records(self) -> list[dict]:
        return [{"id": s.item_id, "text": s.text} for p in self.plans for s in p.segments]

    def defaults(self):
        """Every item's options (as batch defaults: a voice may be a path or a blend here, which
        a manifest's own column refuses)."""
        return Defaults(self.voice, self.lang, self.options.speed, self.options.seed, "wav")

    @property
    def ok(self) -> bool:
        return not self.failures

    def __iter__(self) -> Iterator[Outcome | ChapterDone]:
        self.out.parent.mkdir(parents=True, exist_ok=True)
        if not self.m4b:
            self.out.mkdir(exist_ok=True)
        # kcc's own temporaries a killed run left (kcc.files: pid- and owner-checked names);
        # a user's '.notes.part' or another live run's temporary stays
        sweep_temporaries(self.out.parent if self.m4b else self.out)
        private_work_dir(self.work, UnsafeWorkDir)
        left = {p.index: len(p.segments) for p in self.plans}
        chapter_of = {s.item_id: p for p in self.plans for s in p.segments}
        failed: set[int] = set()
        job = Batch(self.records(), self.work, defaults=self.defaults(),
                    max_chars=2 * max(ITEM_CHARS, self.options.item_chars), **self.batch)
        for outcome in job:
            yield outcome
            plan = chapter_of.get(outcome.id)
            if plan is None:
                self.failures.append(outcome)
                continue
            if outcome.status == "error":
                self.failures.append(outcome)
                failed.add(plan.index)
            left[plan.index] -= 1
            if left[plan.index] == 0 and plan.index not in failed:
                # a chapter file is written as soon as its items are; the .m4b only at the end
                if self.m4b:
                    yield ChapterDone(plan.index, plan.title, "synthesized", 0.0, [])
                else:
                    yield self._write_chapter(plan)
        if self.m4b and not self.failures:
            yield from self._write_m4b()
        if self.ok and not self.options.keep_work:
            remove_dir_atomically(self.work)

    # -- the outputs ------------------------------------------------------------------------
    def chapter_stem(self, plan: ChapterPlan) -> str:
        if self.m4b:
            return f"{self.out.stem}.{plan.index:03d}"
        return f"{plan.index:03d}-{slug(plan.title)}" if slug(plan.title) else f"{plan.index:03d}"

    def _fingerprint(self, plan: ChapterPlan) -> str:
        items = []
        for s in plan.segments:
            side = json.loads((self.work / f"{s.item_id}.json").read_text(encoding="utf-8"))
            items.append([side["fingerprint"], s.pause_s])
        doc = {"schema": CHAPTER_SCHEMA, "items": items, "format": self.options.format, "title": plan.title,
               "subtitles": self.options.subtitles}
        return hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=False).encode()).hexdigest()

    def _write_chapter(self, plan: ChapterPlan) -> ChapterDone:
        stem = self.chapter_stem(plan)
        audio_path, side_path = self.out / f"{stem}.{self.options.format}", self.out / f"{stem}.json"
        fp = self._fingerprint(plan)
        done = is_done(audio_path, side_path, fp)
        if done is not None:
            self.audio_s += done["audio"]["seconds"]
            return ChapterDone(plan.index, plan.title, "current", done["audio"]["seconds"], [audio_path.name])
        sink = ChapterFile(audio_path, self.options.format,
                           ChapterTags(plan.title, self.book.title, self.book.author, plan.index, len(self.plans)))
        try:
            got = assemble(plan, self.work, sink.write)
            sink.commit()
        except BaseException:
            sink.abort()
            raise
        seconds = got.samples / SAMPLE_RATE
        files = self._captions(plan, got.words, stem)
        meta = {"file": audio_path.name, "bytes": audio_path.stat().st_size, "sha256": file_sha256(audio_path),
                "samples": got.samples, "sample_rate": SAMPLE_RATE, "seconds": round(seconds, 6)}
        write_atomic(side_path, json.dumps(chapter_sidecar(plan, got, fp, meta), ensure_ascii=False,
                                           indent=1).encode("utf-8"))
        self.audio_s += seconds
        return ChapterDone(plan.index, plan.title, "written", seconds, [audio_path.name, side_path.name, *files])

    def _captions(self, plan: ChapterPlan, words: list[dict], stem: str) -> list[str]:
        fmt = self.options.subtitles
        if not fmt:
            return []
        path = self.out.parent / f"{stem}.{fmt}" if self.m4b else self.out / f"{stem}.{fmt}"
        write_captions(path, words, fmt, item_breaks(words))
        return [path.name]

    def _write_m4b(self) -> Iterator[ChapterDone]:
        writer = M4bWriter(self.out)
        marks, dones, book_words = [], [], []
        try:
            for plan in self.plans:
                start = writer.samples
                got = assemble(plan, self.work, writer.write, start)
                marks.append((plan.title, start, writer.samples))
                at = start / SAMPLE_RATE
                book_words += [{**w, "start_s": round(w["start_s"] + at, 6), "end_s": round(w["end_s"] + at, 6)}
                               for w in got.words]
                stem = self.chapter_stem(plan)
                files = self._captions(plan, got.words, stem)
                meta = {"file": self.out.name, "start_s": round(start / SAMPLE_RATE, 6),
                        "end_s": round(writer.samples / SAMPLE_RATE, 6), "samples": got.samples,
                        "sample_rate": SAMPLE_RATE, "seconds": round(got.samples / SAMPLE_RATE, 6)}
                side_path = self.out.parent / f"{stem}.json"
                write_atomic(side_path, json.dumps(chapter_sidecar(plan, got, self._fingerprint(plan), meta),
                                                   ensure_ascii=False, indent=1).encode("utf-8"))
                dones.append(ChapterDone(plan.index, plan.title, "written", got.samples / SAMPLE_RATE,
                                         [side_path.name, *files]))
            writer.commit(marks, self.book.title, self.book.author, self.book.cover, self.book.cover_mime)
        except BaseException:
            writer.abort()
            raise
        self.audio_s = writer.samples / SAMPLE_RATE
        if self.options.subtitles:             # the whole book's captions, on the .m4b's timeline
            whole = self.out.with_suffix(f".{self.options.subtitles}")
            write_captions(whole, book_words, self.options.subtitles, item_breaks(book_words))
            dones[-1].files.append(whole.name)
        yield from dones


def slug(title: str, limit: int = 48) -> str:
    """A chapter title as a file-name part: letters, digits and dashes only."""
    s = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    return re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-")[:limit].strip("-").lower()
