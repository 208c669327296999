"""The kcc command line: compile a circuit, X-Ray it against its pinned capture."""
from __future__ import annotations

import argparse
import json
import os
import sys


def _checkpoint_arg(args) -> str:
    path = args.checkpoint or os.environ.get("KCC_CHECKPOINT")
    if not path:
        raise SystemExit("kcc: no checkpoint: pass --checkpoint PATH (or set KCC_CHECKPOINT)")
    return path


def cmd_compile(args) -> int:
    from kcc.build import BuildOptions
    from kcc.runtime import compile_circuit
    dims = dict(kv.split("=") for kv in args.max) if args.max else None
    c = compile_circuit(args.circuit, _checkpoint_arg(args), BuildOptions(native=args.native), dims=dims)
    print(f"circuit {c.graph.name}: {len(c.graph.ops)} ops, {len(c.graph.checkpoints)} checkpoints")
    print(f"plan: {c.plan.summary()}")
    print(f"library: {c.library_path} sha256 {c.built.sha256} ({'cached' if c.built.cached else 'built'})")
    print(f"source: {c.built.source}")
    return 0


def cmd_xray(args) -> int:
    from kcc.checkpoint import checkpoint_digest, load_checkpoint
    from kcc.circuits import load_circuit
    from kcc.runtime import compile_circuit
    from kcc.xray import find_capture, load_pinned, render, xray_compiled
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
    return 0 if report.passed else 1


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="kcc", description="Kokoro Circuit Compiler")
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("compile", help="lower, plan, emit and build a circuit")
    p.add_argument("circuit")
    p.add_argument("--checkpoint")
    p.add_argument("--max", nargs="*", metavar="DIM=N", help="raise a runtime dim's planned max")
    p.add_argument("--native", action="store_true", help="build with -march=native")
    p.set_defaults(fn=cmd_compile)
    p = sub.add_parser("xray", help="compare a compiled circuit with its pinned upstream capture")
    p.add_argument("circuit")
    p.add_argument("--checkpoint")
    p.add_argument("--config", help="capture config (default: the one made from this checkpoint)")
    p.add_argument("--json", help="also write the report as JSON")
    p.set_defaults(fn=cmd_xray)
    args = ap.parse_args(argv)
    try:
        return args.fn(args)
    except Exception as exc:  # every kcc error class carries a message naming what and where
        from kcc.checkpoint import CheckpointError
        from kcc.circuits import CircuitError
        from kcc.build import BuildError
        from kcc.emit import CheckedCallCodegenError
        from kcc.ops import LoweringError
        from kcc.runtime import KccRunError
        from kcc.xray import PinnedCaptureError
        known = (CheckpointError, CircuitError, BuildError, CheckedCallCodegenError, LoweringError,
                 KccRunError, PinnedCaptureError, ValueError)
        if isinstance(exc, known):
            print(f"kcc: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        raise


if __name__ == "__main__":
    raise SystemExit(main())
