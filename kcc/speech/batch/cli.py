"""`kcc batch MANIFEST -o OUTDIR`: the command line over kcc.speech.batch.api.Batch.

Exit status (kcc.speech.cli.exits): 0 when every item is done (made now or already), 1 when any
item failed (each failure is in OUTDIR/kcc-batch.json with its reason), 2 when the job could not
run at all (its error, BatchError, ManifestError, ..., named by the dispatcher).
"""
from __future__ import annotations

import sys

from kcc.speech.batch import DEFAULT_MAX_CHARS, FORMATS
from kcc.speech.request import FIELDS, add_request_args


def add_parser(subparsers) -> None:
    from kcc.speech.cli.args import add_speech_args
    p = subparsers.add_parser("batch", help="synthesise a manifest of items into OUTDIR (resumable)")
    p.add_argument("manifest", help="JSONL or CSV (columns id, text|phonemes, voice, lang, speed, seed, "
                                    "format) or plain text (one utterance per line, id = line number)")
    p.add_argument("-o", "--out", required=True, metavar="OUTDIR", help="where audio, sidecars and kcc-batch.json go")
    p.add_argument("--kind", choices=["jsonl", "csv", "text"], help="manifest kind (default: from the suffix)")
    p.add_argument("--engine", default="local", choices=["local", "ray"])
    p.add_argument("--address", help="--engine ray: an existing Ray cluster, which is yours to secure (Ray token "
                                     "authentication, a private network); default: start a local Ray that "
                                     "requires a fresh random token for every connection")
    p.add_argument("--workers", type=int, help="items at once: threads, processes or Ray actors (default: one per "
                                               "core, each with cores / workers kernel threads; see --threads)")
    p.add_argument("--processes", action="store_true",
                   help="local engine: one process per worker (survives a crashing worker; slower start) "
                        "instead of threads sharing one model")
    # the request's declarations; each is the default of items whose manifest row leaves it out
    add_request_args(p, "voice", "speed", "seed", "max_chars", defaults={"max_chars": DEFAULT_MAX_CHARS})
    p.add_argument("--format", default="wav", choices=list(FORMATS), help="default audio format")
    p.add_argument("--progress", action="store_true", help="show progress even when stderr is not a tty")
    add_speech_args(p)      # --checkpoint --voices-dir --lang --g2p --max-frames --threads --native
    p.set_defaults(fn=run_cli)


def run_cli(args) -> int:
    from kcc.speech.batch.api import Batch
    from kcc.speech.batch.local_pool import SynthSpec
    from kcc.speech.batch.manifest import Defaults, check_option
    from kcc.speech.batch.progress import BatchProgress
    from kcc.speech.cli.args import checkpoint_of
    from kcc.speech.g2p.g2p import G2PFactory
    g2p = G2PFactory(args.g2p, args.lexicon) if args.lexicon else args.g2p    # a bad file fails the job now
    # the command line's --voice may be a path (a manifest row may not): the declaration's check only
    defaults = Defaults(FIELDS["voice"].check(args.voice), check_option("lang", args.lang, Defaults()),
                        check_option("speed", args.speed, Defaults()),
                        check_option("seed", args.seed, Defaults()), args.format)
    spec = SynthSpec(checkpoint_of(args), args.max_frames, args.native,
                     precision=args.precision)
    job = Batch(args.manifest, args.out, defaults=defaults, engine=args.engine, workers=args.workers,
                threads=args.threads, synth=spec, voices_dirs=args.voices_dir,
                g2p=g2p,
                max_chars=args.max_chars, address=args.address, kind=args.kind, processes=args.processes)
    print(f"kcc batch: {len(job.records)} records, {len(job.items)} items; engine {job.engine_name}, "
          f"{job.workers} worker(s) x {job.threads} thread(s)", file=sys.stderr)
    bar = BatchProgress(len(job.records), enabled=True if args.progress else None)
    try:
        for outcome in job:
            bar.update(outcome)
            if outcome.status == "error":
                print(f"\nkcc batch: item {outcome.id!r} (line {outcome.line}): {outcome.reason}", file=sys.stderr)
    finally:
        bar.close()
    c, t = job.summary["counts"], job.summary["throughput"]
    print(f"{args.out}: {c['done']} made, {c['skipped']} already done, {c['failed']} failed of {c['records']}; "
          f"{t['audio_s']:.1f} s audio in {t['wall_s']:.1f} s ({t['audio_s_per_wall_s'] or 0:.2f} x real time)")
    return 0 if job.ok else 1
