"""`kcc book INPUT -o OUT`: an EPUB / Markdown / HTML / text / PDF book -> an audiobook.

-o NAME.m4b: one AAC .m4b with chapter markers, title, author and cover; -o DIR (with
--format wav|flac|mp3|opus|aac): one file per chapter. Either way a JSON sidecar per chapter and,
with --subtitles srt|vtt, captions per chapter. Resumable: run the same command again after a
crash or kill -9. Exit status (kcc.speech.cli.exits): 0 done, 1 some items failed (named on
stderr), 2 the book cannot be read or the job cannot run (its error, named by the dispatcher).
"""
from __future__ import annotations

import argparse
import sys
import time


def add_parser(subparsers) -> None:
    from kcc.speech.request import add_request_args
    from kcc.speech.book import AUDIO_FORMATS
    from kcc.speech.book.captions import FORMATS as CAPTIONS
    from kcc.speech.book.layout import Pauses
    from kcc.speech.cli.args import add_speech_args
    p = subparsers.add_parser("book", help="read a book (EPUB, Markdown, HTML, text, PDF) into an audiobook "
                                           "(resumable)")
    p.add_argument("input", help="the book: .epub, .md, .html, .txt or .pdf")
    p.add_argument("-o", "--out", required=True,
                   help="NAME.m4b for one chaptered audiobook, or a directory for one file per chapter")
    p.add_argument("--format", choices=list(AUDIO_FORMATS),
                   help="per-chapter audio format when -o is a directory (default flac)")
    p.add_argument("--subtitles", choices=list(CAPTIONS), help="also write captions per chapter")
    p.add_argument("--no-titles", action="store_true", help="do not announce chapter titles")
    d = Pauses()
    p.add_argument("--paragraph-pause", type=float, default=d.paragraph, metavar="S", help="silence after a paragraph")
    p.add_argument("--chapter-pause", type=float, default=d.chapter, metavar="S", help="silence after a chapter")
    p.add_argument("--title-pause", type=float, default=d.title, metavar="S", help="silence after a chapter title")
    add_request_args(p, "voice", "speed", "seed")
    p.add_argument("--engine", default="local", choices=["local", "ray"], help="the batch engine (kcc batch)")
    p.add_argument("--address", help="--engine ray: an existing Ray cluster (default: start a local Ray)")
    p.add_argument("--workers", type=int, help="paragraphs at once (default: one per core)")
    p.add_argument("--processes", action="store_true", help="local engine: worker processes instead of threads")
    p.add_argument("--keep-work", action="store_true",
                   help="keep the work directory (the items) after a complete book: a rerun with other pauses or "
                        "another format then synthesises nothing (it is removed by default; kept after a failure)")
    p.add_argument("--clean", action="store_true", help=argparse.SUPPRESS)     # the default now
    p.add_argument("--progress", action="store_true", help="show progress even when stderr is not a tty")
    add_speech_args(p)
    p.set_defaults(fn=run_cli)


def reading_progress(forced: bool):
    """progress(stage, done, total) for reading a long book: one line on stderr, redrawn (a tty,
    or --progress)."""
    if not (forced or sys.stderr.isatty()):
        return None

    def show(stage: str, done: int, total: int) -> None:
        end = "\n" if done >= total else ""
        print(f"\rkcc book: reading {stage} {done}/{total}", end=end, file=sys.stderr, flush=True)
    return show


def _pause(name: str, value: float) -> float:
    if not (0 <= value <= 60):
        raise ValueError(f"--{name} must be 0 to 60 seconds, got {value}")
    return value


def run_cli(args) -> int:
    from kcc.speech.batch.local_pool import SynthSpec
    from kcc.speech.batch.manifest import Defaults, check_option
    from kcc.speech.book.errors import BookError
    from kcc.speech.book.job import BookJob, BookOptions, ChapterDone
    from kcc.speech.book.layout import Pauses
    from kcc.speech.book.progress import BookProgress
    from kcc.speech.cli.args import checkpoint_of
    from kcc.speech.g2p.g2p import G2PFactory
    t0 = time.perf_counter()
    if args.clean:
        print("kcc: warning: --clean is deprecated: the work directory is removed after a complete book by "
              "default now (--keep-work keeps it)", file=sys.stderr)
    m4b = args.out.lower().endswith(".m4b")
    if m4b and args.format:
        raise BookError("--format is for a directory of chapter files; -o NAME.m4b is AAC")
    pauses = Pauses(_pause("paragraph-pause", args.paragraph_pause), _pause("chapter-pause", args.chapter_pause),
                    _pause("title-pause", args.title_pause))
    options = BookOptions("m4b" if m4b else args.format or "flac", args.subtitles, not args.no_titles, pauses,
                          args.voice, None if args.lang == "auto" else args.lang,
                          check_option("speed", args.speed, Defaults()),
                          check_option("seed", args.seed, Defaults()),
                          args.keep_work)
    spec = SynthSpec(checkpoint_of(args), args.max_frames, args.native,
                     precision=args.precision)
    # The errors of a book that cannot be read or a job that cannot run (BookError, BatchError,
    # ValueError, OSError, ...) go to the dispatcher's one exit table (kcc.speech.cli.exits): exit 2.
    job = BookJob(args.input, args.out, options, progress=reading_progress(args.progress), engine=args.engine,
                  workers=args.workers, threads=args.threads, synth=spec, voices_dirs=args.voices_dir,
                  g2p=G2PFactory(args.g2p, args.lexicon) if args.lexicon else args.g2p,
                  address=args.address, processes=args.processes)
    for note in job.notes:
        print(f"kcc: warning: {note}", file=sys.stderr)
    items = sum(len(p.segments) for p in job.plans)
    print(f"kcc book: {job.book.title!r} ({job.book.format}), {len(job.plans)} chapters, {items} items; "
          f"language {job.lang}, voice {job.voice}; engine {args.engine}", file=sys.stderr)
    bar = BookProgress(len(job.plans), items, enabled=True if args.progress else None)
    try:
        for event in job:
            if isinstance(event, ChapterDone):
                if event.status != "written" or not m4b:       # a .m4b's chapters count once synthesised
                    bar.chapter()
                continue
            bar.item(event)
            if event.status == "error":
                print(f"\nkcc book: item {event.id}: {event.reason}", file=sys.stderr)
    finally:
        bar.close()
    if not job.ok:
        print(f"kcc book: {len(job.failures)} item(s) failed; rerun the same command to retry them", file=sys.stderr)
        return 1
    wall = time.perf_counter() - t0
    print(f"{args.out}: {len(job.plans)} chapters, {job.audio_s / 3600:.3f} h audio in {wall:.1f} s")
    return 0
