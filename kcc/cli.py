"""The kcc command line, the top-level dispatcher: the compiler's commands (compile, xray,
report, import-onnx) here, the product's (say, synth, export, voices, serve, wyoming, batch,
book, voice design) from kcc.speech.cli.commands and the rooms' own cli modules; every command
runs under kcc.speech.cli.run.run_command (the one exit table, quiet broken pipes, Ctrl-C)."""
from __future__ import annotations

import argparse
import json

from kcc.speech.cli.args import checkpoint_of
from kcc.speech.cli.commands import SERVERS, add_commands
from kcc.speech.cli.exits import EXIT_CODES, Exit
from kcc.speech.cli.interrupts import end_now
from kcc.speech.cli.run import run_command
from kcc.speech.cli.streams import guard_standard_fds


class UsageError(ValueError):
    """The command line asks for something it cannot have (exit 2, by the one table)."""


def _checkpoint_arg(args) -> str:
    path = checkpoint_of(args)
    if not path:
        raise UsageError("no checkpoint: pass --checkpoint PATH (or set KCC_CHECKPOINT)")
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
        raise UsageError(f"circuit {doc['name']} names no pinned capture to compare with")
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


def cmd_report(args) -> int:
    from kcc.compiler.report import run_cli
    return run_cli(args)


def _main(argv) -> int:
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
    add_commands(sub)                     # say, synth, export, voices
    # The other rooms' commands are registered here, above them all, so that kcc.speech.cli (the
    # plumbing they share: arguments, exits, progress) imports none of them.
    from kcc.speech.batch.cli import add_parser as add_batch
    from kcc.speech.book.cli import add_parser as add_book
    from kcc.speech.serve.cli import add_parsers as add_serve
    from kcc.speech.voice_design.cli import add_parser as add_voice
    add_serve(sub)                        # serve, wyoming
    add_batch(sub)
    add_book(sub)
    add_voice(sub)                        # voice design
    args = ap.parse_args(argv)
    # Ray's driver wants the main thread (its signal handling, its shutdown on the way out).
    return run_command(args.fn, args, server=args.cmd in SERVERS, in_main_thread=getattr(args, "engine", None) == "ray")


def main(argv=None) -> int:
    """The exit code of `kcc ARGV` (kcc.speech.cli.exits): Ctrl-C while the parser or a command's
    modules are still loading ends quietly too."""
    guard_standard_fds()
    try:
        return _main(argv)
    except KeyboardInterrupt:
        end_now(Exit.INTERRUPTED)


if __name__ == "__main__":
    raise SystemExit(main())
