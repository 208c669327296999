"""X-Ray every shipped stage circuit against its pinned captures; print the README status rows.

Usage: python scripts/xray_all.py [--plot docs/xray.png]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kcc.weights.checkpoint import load_checkpoint  # noqa: E402
from kcc.circuits import load_circuit, shipped_circuits  # noqa: E402
from kcc.compiler.driver import compile_circuit  # noqa: E402
from kcc.compiler.xray import FIXTURES, load_pinned, xray_compiled  # noqa: E402
from oracle.checkpoints import test_checkpoint  # noqa: E402


# Ill-conditioned tensors after which a circuit is also X-Rayed teacher-forced (the STFT phase
# of the harmonic source: see README "Why the end-to-end waveform cannot meet a 60 dB bar").
TEACHER_FORCED = {"kokoro_generator": ["kokoro.generator.har"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plot")
    ap.add_argument("--json", default=str(Path(__file__).resolve().parent.parent / "bench" / "results" / "xray.json"),
                    help="also write the rows as JSON (scripts/update_readme.py renders them)")
    args = ap.parse_args(argv)
    manifest = json.loads((FIXTURES / "MANIFEST.json").read_text())
    rows, all_results = [], []
    for name in sorted(shipped_circuits()):
        doc = load_circuit(name)
        if "capture" not in doc:
            continue
        for config in ("small", "full"):
            if f"{doc['capture']}.{config}.npz" not in manifest:
                continue
            ckpt = load_checkpoint(test_checkpoint(config, 0))
            compiled = compile_circuit(doc, ckpt)
            pinned = load_pinned(doc["capture"], config)
            for inject in ([], TEACHER_FORCED.get(name)):
                if inject is None:
                    continue
                report = xray_compiled(compiled, pinned, inject=inject)
                judged = [r for r in report.results if r.status != "INJECTED"]
                worst = max(judged, key=lambda r: r.max_abs)
                label = f"{config}, {', '.join(inject)} injected" if inject else config
                rows.append((name, label, report.passed, len(judged), worst.name, worst.max_abs,
                             min(r.snr_db for r in judged)))
                if not inject and name in TEACHER_FORCED:
                    continue          # the plot shows the teacher-forced generator evidence
                if config == "full" or f"{doc['capture']}.full.npz" not in manifest:
                    all_results.extend(judged)
    for name, config, ok, n, wname, wabs, snr in rows:
        print(f"| {name} | {config} | {'PASS' if ok else 'FAIL'} | {n} | {wname} | {wabs:.2e} | {snr:.1f} |")
    if args.json:
        keys = ("circuit", "config", "passed", "checkpoints", "worst", "worst_max_abs", "min_snr_db")
        Path(args.json).write_text(json.dumps([dict(zip(keys, r)) for r in rows], indent=1) + "\n")
    if args.plot:
        from kcc.compiler.plot import plot_results
        print(plot_results(all_results, args.plot, "X-Ray per checkpoint, every stage circuit vs pinned upstream captures"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
