"""`kcc voice design TARGET.wav [MORE.wav ...] -o NAME.pt`: the command line of the voice search.

Only argparse at the top: `kcc --help` builds this parser without loading the encoder or the
model (each command imports what it runs).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kcc.speech.voice_design import DEFAULT_MINUTES

EPILOG = """Three walks from the best blend of the official voices share the first half of the budget; the one
heard closest to the target then runs the rest. The search writes its state beside the output
(NAME.pt.design.json) after every step: Ctrl-C, then the same command continues; the same --seed
and --steps give the same voice. Save NAME.pt into a directory and speak it by name with
`kcc say --voices-dir DIR --voice NAME`, or by path anywhere."""


def add_parser(sub) -> None:
    voice = sub.add_parser("voice", help="make voices: `kcc voice design` (a voice like a recording)")
    vsub = voice.add_subparsers(dest="voice_command", required=True)
    p = vsub.add_parser("design", help="design a voice pack that sounds like the target recording(s)",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("targets", nargs="+", metavar="TARGET", help="recordings of one speaker (any audio format, "
                   ">= 3 s of voice, <= 5 min each)")
    p.add_argument("-o", "--out", required=True, help="the voice pack: NAME.pt (torch), NAME.npy or NAME.bin (kokoro-js)")
    p.add_argument("--language", default="en-us", help="the language whose official voices start the search "
                   "and whose sentences score it (default en-us)")
    p.add_argument("--pool", default=None, help="comma-separated official voices to start from (default: all of "
                   "--language)")
    p.add_argument("--minutes", type=float, default=DEFAULT_MINUTES, help="time budget of this run's search, after "
                   f"its start (default {DEFAULT_MINUTES:g}: the budget the published results were measured with)")
    p.add_argument("--steps", type=int, default=None, help="stop after this many search steps in all (exactly "
                   "reproducible, whatever the machine's speed)")
    p.add_argument("--seed", type=int, default=0, help="the search's random seed (default 0)")
    p.add_argument("--restart", action="store_true", help="ignore a state file left by an earlier design")
    p.add_argument("--checkpoint", default=None, help="a kokoro-v1_0.pth to synthesise with (default: the real model)")
    p.set_defaults(fn=cmd_design)


def _progress(text: str) -> None:
    if sys.stderr.isatty():
        print(f"\r\033[Kkcc voice design: {text}", end="", file=sys.stderr, flush=True)
    else:
        print(f"kcc voice design: {text}", file=sys.stderr, flush=True)


def cmd_design(args) -> int:
    from kcc.speech.voice_design.run import DesignRequest, run_design
    out = Path(args.out)
    request = DesignRequest(targets=[Path(t) for t in args.targets], out=out, language=args.language,
                            pool=args.pool.split(",") if args.pool else None, minutes=args.minutes,
                            steps=args.steps, seed=args.seed, restart=args.restart, checkpoint=args.checkpoint)
    # Ctrl-C ends the command at once (kcc.speech.cli.run); the state written after every step is
    # where the same command line continues.
    result = run_design(request, progress=_progress)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"{out}: similarity {result.start:.3f} -> {result.end:.3f} after {result.steps} steps "
          f"({result.minutes:.1f} min); blend of {', '.join(result.blend)}")
    return 0
