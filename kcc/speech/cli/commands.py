"""The product's commands on the kcc command line: say, synth, export, voices. serve / wyoming,
batch, book and voice design declare their own (their rooms' cli modules), registered by
kcc/cli.py, the top-level dispatcher; each command here imports what it runs inside its function, so
`kcc --help` loads none of it."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kcc.speech.cli.args import add_speech_args, checkpoint_of
from kcc.speech.cli.exits import EXIT_CODES
from kcc.speech.cli.streams import require_stdout
from kcc.speech.request import add_request_args

# Commands whose own signal handling (uvicorn, asyncio) needs the main thread: they drain on a
# signal instead of ending at once (kcc.speech.cli.run.run_command).
SERVERS = frozenset({"serve", "wyoming"})

DEMO_PHONEMES = "kəkˈɔɹO sˈɜɹkjət kəmpˈIlɚ."


def cmd_say(args) -> int:
    from kcc.speech.cli.say import run_cli
    return run_cli(args)


def cmd_synth(args) -> int:
    """Phoneme ids (or a phoneme string) + a voice -> audio (format from -o's extension, - for
    stdout), entirely in generated C (no G2P)."""
    from kcc.model.loader import check_max_frames, check_precision
    from kcc.speech.audio.formats import format_for
    from kcc.speech.audio.output import STDOUT, open_audio
    from kcc.speech.audio.outputs import check_output
    from kcc.speech.audio.wav import SAMPLE_RATE
    from kcc.speech.engine import check_seed, check_speed, load_synthesizer, resolve_voice
    from kcc.speech.g2p.g2p import load_vocab
    from kcc.speech.voices import style_for
    if args.out == STDOUT:
        require_stdout("the audio")
    out_path = args.out if args.out == STDOUT else check_output(args.out, "-o")
    fmt = format_for(args.out)
    max_frames = check_max_frames(args.max_frames)
    check_precision(args.precision)
    speed = check_speed(args.speed)
    seed = check_seed(args.seed)
    ids = _synth_ids(args)
    top = max(load_vocab().values())
    bad = [i for i in ids if not 0 <= i <= top]
    if bad:
        raise ValueError(f"--ids: {bad[:5]} outside the Kokoro vocabulary's ids 0..{top}")
    pack = resolve_voice(args.voice, [Path(d) for d in args.voices_dir])
    synth = load_synthesizer(checkpoint_of(args), max_frames, args.native, getattr(args, "threads", None),
                             precision=args.precision)
    out = synth.synthesize(ids, style_for(pack, len(ids)), speed=speed, seed=seed)
    with open_audio(out_path, fmt) as audio:
        audio.write(out.audio)
        audio.commit()
    print(f"{args.out}: {out.audio.size / SAMPLE_RATE:.2f} s from {len(ids)} phoneme ids, "
          f"{int(out.durations.sum())} frames, {sum(out.seconds.values()):.2f} s in generated C",
          file=sys.stderr if args.out == STDOUT else sys.stdout)
    return 0


def _synth_ids(args) -> list[int]:
    from kcc.speech.g2p.g2p import load_vocab
    if args.ids:
        try:
            ids = [int(t) for t in args.ids.replace(",", " ").split()]
        except ValueError:
            raise ValueError(f"--ids must be integers separated by commas or spaces, got {args.ids!r}")
        return ids
    phonemes = args.phonemes or (DEMO_PHONEMES if args.demo else None)
    if not phonemes:
        raise ValueError("pass --ids 50,83,54,... or --phonemes 'həlˈO' (or --demo)")
    vocab = load_vocab()
    unknown = sorted({p for p in phonemes if p not in vocab})
    if unknown:
        raise ValueError(f"phoneme(s) {unknown} are not in the Kokoro vocabulary")
    return [vocab[p] for p in phonemes]


def cmd_export(args) -> int:
    from kcc.model.export import export
    from kcc.model.loader import check_max_frames, check_precision
    from kcc.speech.audio.outputs import check_output_dir
    from kcc.speech.engine import load_synthesizer, resolve_voice
    check_output_dir(args.dir, "export directory")
    max_frames = check_max_frames(args.max_frames)
    check_precision(args.precision)
    pack = resolve_voice(args.voice, [Path(d) for d in args.voices_dir])
    synth = load_synthesizer(checkpoint_of(args), max_frames, args.native,
                             precision=args.precision)
    out = export(synth, args.dir, pack)
    print(f"{out}: {len(synth.circuits)} stage circuits, main.c, Makefile, voice.f32; build with: make -C {out}")
    return 0


def cmd_voices(args) -> int:
    """List every voice by name: the built-in ones (the 54 official voices) and those in --voices-dir."""
    from kcc.speech.languages import LANGUAGES
    from kcc.speech.voices import voice_catalog
    require_stdout("the voice list")
    if args.fetch:
        from kcc.weights.official_voices import official_voices
        official_voices(force=True)       # VoiceFetchError (a FetchError: a RuntimeError) says why
    voices = voice_catalog([Path(d) for d in args.voices_dir])
    defaults = {lang.default_voice for lang in LANGUAGES.values()}
    if args.json:
        print(json.dumps([{"name": v.name, "language": v.language, "gender": v.gender, "origin": v.origin,
                           "default": v.name in defaults} for v in voices.values()], indent=1))
        return 0
    print(f"{'name':<16} {'language':<9} {'gender':<7} source")
    for v in voices.values():
        mark = f" (default for {v.language})" if v.name in defaults else ""
        print(f"{v.name:<16} {v.language or '?':<9} {v.gender or '?':<7} {v.origin}{mark}")
    print(f"{len(voices)} voices; blend them with --voice 'a:0.6,b:0.4' or 'a(2)+b(1)'", file=sys.stderr)
    return 0


def add_commands(sub) -> None:
    """say, synth, export, voices on the `kcc` parser's subparsers."""
    p = sub.add_parser("say", help="speak text into an audio file (or stdout)", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("text", nargs="?", help="the text (or --text-file, or piped on stdin)")
    p.add_argument("--text-file", help="read UTF-8 text from a file, - for stdin")
    p.add_argument("-o", "--out", required=True,
                   help="output file, written atomically, its format from the extension (.wav .flac .mp3 "
                        ".ogg/.opus .m4a .aac); - streams to stdout chunk by chunk (WAV unless --format)")
    add_request_args(p, "format")
    p.add_argument("--subtitles", metavar="SRT|VTT", help="also write captions (.srt or .vtt) from the word timestamps")
    add_request_args(p, "voice", "speed", "seed")
    p.add_argument("--timestamps", metavar="JSON", help="also write word timestamps")
    p.add_argument("--progress", action="store_true", help="show progress even when stderr is not a tty")
    add_speech_args(p)
    p.set_defaults(fn=cmd_say)
    p = sub.add_parser("synth", help="phoneme ids + voice -> audio in generated C (no G2P)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--ids", help="Kokoro phoneme ids, e.g. 50,83,54 (boundary 0s are added)")
    g.add_argument("--phonemes", help="a Kokoro phoneme string, mapped through the vocabulary")
    g.add_argument("--demo", action="store_true", help="a built-in phoneme string")
    p.add_argument("-o", "--out", required=True, help="output file (format from its extension, as for say) or - for stdout")
    add_request_args(p, "voice", "speed", "seed")
    add_speech_args(p)
    p.set_defaults(fn=cmd_synth)
    p = sub.add_parser("export", help="write a standalone C program (stages, weights, main.c, Makefile)")
    p.add_argument("dir")
    p.add_argument("--voice", help="voice pack written as voice.f32 (default: a seeded random pack)")
    add_speech_args(p)
    p.set_defaults(fn=cmd_export)
    p = sub.add_parser("voices", help="list the voices (name, language, gender)")
    p.add_argument("--voices-dir", action="append", default=[], metavar="DIR", help="also list the voices in DIR")
    p.add_argument("--json", action="store_true", help="as JSON")
    p.add_argument("--fetch", action="store_true", help="fetch the official voices now (npm pack kokoro-js), "
                   "even if a fetch failed recently; fails if they cannot be had")
    p.set_defaults(fn=cmd_voices)
