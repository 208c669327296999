"""The kcc command line: compile a circuit, X-Ray it against its pinned capture, say, serve."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from kcc.speech.cli.args import add_speech_args, checkpoint_of


def _checkpoint_arg(args) -> str:
    path = checkpoint_of(args)
    if not path:
        raise SystemExit("kcc: no checkpoint: pass --checkpoint PATH (or set KCC_CHECKPOINT)")
    return path


def cmd_compile(args) -> int:
    from kcc.compiler.build import release_options
    from kcc.compiler.driver import compile_circuit
    dims = _dim_values(args.max or [])
    c = compile_circuit(args.circuit, _checkpoint_arg(args), release_options(args.native), dims=dims)
    print(f"circuit {c.graph.name}: {len(c.graph.ops)} ops, {len(c.graph.checkpoints)} checkpoints")
    print(f"plan: {c.plan.summary()}")
    print(f"library: {c.library_path} sha256 {c.built.sha256} ({'cached' if c.built.cached else 'built'})")
    print(f"source: {c.built.source}")
    return 0


def _dim_values(pairs: list[str]) -> dict[str, int] | None:
    dims = {}
    for kv in pairs:
        name, sep, value = kv.partition("=")
        if not sep or not name or not value.isdigit():
            raise ValueError(f"--max expects DIM=N with N a positive integer, got {kv!r}")
        dims[name] = int(value)
    return dims or None


def cmd_xray(args) -> int:
    from kcc.circuits import load_circuit
    from kcc.compiler.driver import compile_circuit
    from kcc.compiler.xray import find_capture, load_pinned, render, xray_compiled
    from kcc.weights.checkpoint import checkpoint_digest, load_checkpoint
    doc = load_circuit(args.circuit)
    ckpt = load_checkpoint(_checkpoint_arg(args))
    if "capture" not in doc:
        raise SystemExit(f"kcc: circuit {doc['name']} names no pinned capture to compare with")
    config = args.config or find_capture(doc["capture"], checkpoint_digest(ckpt))
    pinned = load_pinned(doc["capture"], config)
    report = xray_compiled(compile_circuit(doc, ckpt), pinned)
    print(render(report))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(report.to_json(), fh, indent=1, default=str)
    if args.plot:
        from kcc.compiler.plot import plot_results
        title = f"X-Ray {doc['name']} ({config} config)"
        print(f"plot: {plot_results(report.results, args.plot, title)}")
    return 0 if report.passed else 1


def cmd_import_onnx(args) -> int:
    from kcc.weights.importers.onnx_kokoro import LABEL
    from kcc.weights.importers.onnx_kokoro import main as import_main
    report = import_main(args.model, args.out, args.report)
    print(f"{args.out}: {LABEL}")
    print(report.summary())
    return 0


def cmd_say(args) -> int:
    from kcc.speech.cli.say import run_cli
    return run_cli(args)


def cmd_synth(args) -> int:
    """Phoneme ids (or a phoneme string) + a voice -> audio (format from -o's extension, - for
    stdout), entirely in generated C (no G2P)."""

    from kcc.model.loader import check_max_frames, check_precision
    from kcc.speech.audio.formats import format_for
    from kcc.speech.audio.output import STDOUT, open_audio
    from kcc.speech.engine import check_seed, check_speed, load_synthesizer, resolve_voice
    from kcc.speech.g2p.g2p import load_vocab
    from kcc.speech.cli.interrupts import Interrupted, interruptible, interrupts_raise
    from kcc.speech.audio.outputs import check_output
    from kcc.speech.voices import style_for
    from kcc.speech.audio.wav import SAMPLE_RATE
    out_path = args.out if args.out == STDOUT else check_output(args.out, "-o")
    fmt = format_for(args.out)
    max_frames = check_max_frames(args.max_frames)
    check_precision(args.precision)
    check_speed(args.speed)
    seed = check_seed(args.seed)
    ids = _synth_ids(args)
    top = max(load_vocab().values())
    bad = [i for i in ids if not 0 <= i <= top]
    if bad:
        raise ValueError(f"--ids: {bad[:5]} outside the Kokoro vocabulary's ids 0..{top}")
    with interrupts_raise():
        try:
            def work():
                pack = resolve_voice(args.voice, [Path(d) for d in args.voices_dir])
                synth = load_synthesizer(checkpoint_of(args), max_frames,
                                         args.native, getattr(args, "threads", None), precision=args.precision)
                out = synth.synthesize(ids, style_for(pack, len(ids)), speed=args.speed, seed=seed)
                with open_audio(out_path, fmt) as audio:
                    audio.write(out.audio)
                    audio.commit()
                return out
            out = interruptible(work)
        except Interrupted as exc:
            print("\nkcc: interrupted; no output written", file=sys.stderr)
            return exc.exit_code
    print(f"{args.out}: {out.audio.size / SAMPLE_RATE:.2f} s from {len(ids)} phoneme ids, "
          f"{int(out.durations.sum())} frames, {sum(out.seconds.values()):.2f} s in generated C",
          file=sys.stderr if args.out == STDOUT else sys.stdout)
    return 0


DEMO_PHONEMES = "kəkˈɔɹO sˈɜɹkjət kəmpˈIlɚ."


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


def cmd_report(args) -> int:
    from kcc.compiler.report import run_cli
    return run_cli(args)


def cmd_export(args) -> int:

    from kcc.model.export import export
    from kcc.model.loader import check_max_frames, check_precision
    from kcc.speech.engine import load_synthesizer, resolve_voice
    from kcc.speech.audio.outputs import check_output_dir
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


EXIT_CODES = """exit codes:
  0    done
  1    kcc xray: a checkpoint out of tolerance; any command: an internal error (a traceback)
  2    a usage or input error, named on stderr before any output is written (bad option, text,
       voice, format, path, checkpoint; argparse's own usage errors too)
  130  interrupted (SIGINT), 143 terminated (SIGTERM): partial outputs are removed"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="kcc", description="Kokoro Circuit Compiler", epilog=EXIT_CODES,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("compile", help="lower, plan, emit and build a circuit")
    p.add_argument("circuit")
    p.add_argument("--checkpoint")
    p.add_argument("--max", nargs="*", metavar="DIM=N", help="raise a runtime dim's planned max")
    p.add_argument("--native", action="store_true", help="build for this CPU: -O3 -march=native -mtune=generic (default: portable -O3)")
    p.set_defaults(fn=cmd_compile)
    p = sub.add_parser("xray", help="compare a compiled circuit with its pinned upstream capture")
    p.add_argument("circuit")
    p.add_argument("--checkpoint")
    p.add_argument("--config", help="capture config (default: the one made from this checkpoint)")
    p.add_argument("--json", help="also write the report as JSON")
    p.add_argument("--plot", metavar="PNG", help="also plot the error per checkpoint")
    p.set_defaults(fn=cmd_xray)
    p = sub.add_parser("report", help="per-op FLOPs, bytes moved, arena and roofline bound at given dims")
    p.add_argument("circuit")
    p.add_argument("--checkpoint")
    p.add_argument("--dims", help="runtime dim values, e.g. T=36,F=200 (others: their planned max)")
    p.add_argument("--passes", default="default", choices=["default", "none"], help="graph passes (fusion)")
    p.add_argument("--threads", type=int, default=1, help="threads for the roofline measurement")
    p.add_argument("--bandwidth", type=float, metavar="GBPS", help="skip measuring: memory bandwidth in GB/s")
    p.add_argument("--peak", type=float, metavar="GFLOPS", help="skip measuring: peak GFLOP/s (with --bandwidth)")
    p.add_argument("--no-roofline", action="store_true", help="costs only, no measurement")
    p.add_argument("--summary", action="store_true", help="per op type only, not per op")
    p.add_argument("--measure", action="store_true",
                   help="also build with per-op timing (-DKCC_PROFILE) and print each op's measured ms")
    p.add_argument("--json", help="also write the report as JSON")
    p.set_defaults(fn=cmd_report)
    p = sub.add_parser("import-onnx", help="import Kokoro-82M weights from the int8 ONNX export into kokoro-v1_0.pth layout")
    p.add_argument("model", help="kokoro-v1.0.int8.onnx (scripts/fetch_real_weights.py fetches it)")
    p.add_argument("-o", "--out", required=True, help="output .pth")
    p.add_argument("--report", help="also write the mapping report as JSON")
    p.set_defaults(fn=cmd_import_onnx)
    p = sub.add_parser("say", help="speak text into an audio file (or stdout)", epilog=EXIT_CODES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("text", nargs="?", help="the text (or --text-file, or piped on stdin)")
    p.add_argument("--text-file", help="read UTF-8 text from a file, - for stdin")
    p.add_argument("-o", "--out", required=True,
                   help="output file, written atomically, its format from the extension (.wav .flac .mp3 "
                        ".ogg/.opus .m4a .aac); - streams to stdout chunk by chunk (WAV unless --format)")
    from kcc.speech.audio.formats import FORMATS
    p.add_argument("--format", choices=list(FORMATS), help="audio format (default: from the -o extension)")
    p.add_argument("--subtitles", metavar="SRT|VTT", help="also write captions (.srt or .vtt) from the word timestamps")
    p.add_argument("--voice", help="voice pack: NAME, PATH (.pt/.npy/.npz:member) or a blend 'a:0.6,b:0.4'")
    p.add_argument("--speed", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0, help="seed of the sine source's noise")
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
    p.add_argument("--voice", help="voice pack: NAME, PATH (.pt/.npy/.npz:member) or a blend 'a:0.6,b:0.4'")
    p.add_argument("--speed", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0, help="seed of the sine source's noise")
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
    from kcc.speech.batch.cli import add_parser as add_batch
    from kcc.speech.book.cli import add_parser as add_book
    from kcc.speech.serve.cli import add_parsers as add_serve
    from kcc.speech.voice_design.cli import add_parser as add_voice
    add_serve(sub)                        # serve, wyoming
    add_voice(sub)                        # voice design
    add_batch(sub)
    add_book(sub)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except Exception as exc:  # every kcc error class carries a message naming what and where
        from kcc.cache_trust import CacheError
        from kcc.circuits import CircuitError
        from kcc.compiler.build import BuildError
        from kcc.compiler.emit import CheckedCallCodegenError
        from kcc.compiler.runtime import KccRunError
        from kcc.compiler.xray import PinnedCaptureError
        from kcc.model.pipeline import SynthesisError
        from kcc.ops import LoweringError
        from kcc.speech.voices import VoiceError
        from kcc.weights.checkpoint import CheckpointError
        from kcc.weights.importers.onnx_graph import OnnxImportError
        from kcc.weights.real_model import FetchError
        known = (CheckpointError, CircuitError, BuildError, CheckedCallCodegenError, LoweringError,
                 KccRunError, PinnedCaptureError, OnnxImportError, SynthesisError, VoiceError,
                 FetchError, CacheError, ValueError, OSError)  # G2PError and SayError are ValueErrors; OSError: a file (disk full...)
        if isinstance(exc, known):
            print(f"kcc: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    raise SystemExit(main())
