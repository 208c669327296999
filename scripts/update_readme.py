#!/usr/bin/env python3
"""Regenerate the generated sections of the README (and docs/LIMITS.md) from the code and the
measured results.

Usage: python scripts/update_readme.py [--check]

  LIMITS  docs/LIMITS.md, from the constants the code enforces (kcc.limits)
  STATUS  README.md, from bench/results/xray.json (python scripts/xray_all.py writes it)
  BENCH   README.md, from the round robins in ROUND_ROBINS and bench/results/WARM_SAY
--check exits 1 when a file differs from what this script would write (a test runs it).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "bench" / "results"


def limits_section() -> str:
    from kcc.limits import LIMITS
    rows = "\n".join(f"| {surface} | {what} | {value} |" for surface, what, value in LIMITS)
    return ("Every input is bounded; past a bound kcc refuses with a named error and writes "
            "nothing.\n\n| surface | limit | value |\n| --- | --- | --- |\n" + rows)


def status_section() -> str:
    rows = json.loads((RESULTS / "xray.json").read_text())
    by_circuit: dict[str, dict] = {}
    for r in rows:
        config, _, injected = r["config"].partition(", ")
        c = by_circuit.setdefault(r["circuit"], {"runs": {}, "notes": []})
        if injected:       # teacher-forced after an ill-conditioned tensor: this run is the gate
            c["notes"].append(f"teacher-forced ({injected}); free-running "
                              f"{c['runs'][config]['min_snr_db']:.0f} dB at {c['runs'][config]['worst']}")
        c["runs"][config] = r
    lines = ["## Status", "",
             "Each stage's generated C against pinned upstream captures (kokoro 0.9.4 on torch 2.13.0; "
             "`fixtures/captures`, SHA-256 manifest checked), seeded checkpoints of the `small` and `full` "
             "(82M) configs; FP32 gate: cosine >= 0.99999, RMSE / max-abs <= 2e-5 (per-checkpoint "
             "overrides documented in the circuits). Regenerate: `python scripts/xray_all.py && python "
             "scripts/update_readme.py`.", "",
             "| stage circuit | X-Ray | checkpoints | worst max-abs small / full | note |",
             "| --- | --- | --- | --- | --- |"]
    for name, c in by_circuit.items():
        runs = c["runs"]
        ok = all(r["passed"] for r in runs.values())
        worst = " / ".join(f"{runs[k]['worst_max_abs']:.1e}" if k in runs else "-" for k in ("small", "full"))
        n = max(r["checkpoints"] for r in runs.values())
        lines.append(f"| {name} | {'PASS' if ok else 'FAIL'} | {n} | {worst} | {'; '.join(c['notes'])} |")
    lines += ["", "The end-to-end waveform from phoneme ids is not held to 60 dB: the harmonic source's STFT "
              "phase is ill-conditioned (upstream's own waveform moves to 21 dB under a 1e-7 F0 nudge); the "
              "generator is checked teacher-forced at the STFT instead, and on the real weights Whisper hears "
              "kcc as it hears torch (`tests/test_asr.py`)."]
    return "\n".join(lines)


# The round robins the README's one speed table shows: one per CPU, each with its dispatch levels.
ROUND_ROBINS = ("bench_synth_levels.json", "bench_synth_zen3.json")
# The newest warm `kcc say` run: the code that ships now (per-weight release of the mapped pages).
WARM_SAY = "bench_say_warm_zen3.json"
ENGINE_NAMES = {"torch": "torch 2.13 eager", "ort": "onnxruntime 1.31 (FP32 export)",
                "kcc-native": "kcc -march=native", "kcc-avx2fma": "kcc portable, AVX2 + FMA level",
                "kcc-avx512": "kcc portable, AVX-512 level"}


def bench_section() -> str:
    """The round robins (bench_synth.py --isa ..., engines side by side, a ratio per round, median
    of rounds) as the one current table: a column per CPU and length, a row per engine."""
    from bench.bench_synth import amd_core
    runs = [json.loads((RESULTS / f).read_text()) for f in ROUND_ROBINS if (RESULTS / f).exists()]
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    label = lambda m: amd_core(m) or m["cpu"]  # noqa: E731
    cpus = []
    for r in runs:
        m = r["machine"]
        isa = "AVX-512" if m["avx512f"] else "AVX2 + FMA, no AVX-512"
        o2 = any(k.startswith("kcc-O2") for k in r["runs"])     # recorded before the portable build went -O3
        cpus.append(f"**{label(m)}**: {m['cpu']} family {m['cpu_family']} model {m['cpu_model']}, {isa}, "
                    f"{m['date'][:10]}, {m['git_commit'][:7]}{' (portable -O2 then)' if o2 else ''}")
    lines = ["## Speed", "",
             f"`bench/bench_synth.py` round robin, {runs[0]['threads']} threads per engine, 2-core machines, seeded "
             "full-config weights: median ms of a full synthesis (ratio to torch / onnxruntime within each round). "
             + "; ".join(cpus) + ". Lower levels: forced (`KCC_ISA`).", ""]
    cols = [(r, n) for r in runs for n in map(str, r["round_robin"]["lengths"])]
    lines += ["| engine | " + " | ".join(f"{label(r['machine'])}, {n} ids" for r, n in cols) + " |",
              "| --- |" + " --- |" * len(cols)]
    engines = [e for e in ENGINE_NAMES if any(e in r["round_robin"]["engines"] for r in runs)]
    for e in engines:
        cells = []
        for r, n in cols:
            rr = r["round_robin"]
            if e not in rr["engines"]:
                cells.append("-")
                continue
            ms = med(rr["ms"][e][n])
            if e in ("torch", "ort"):
                cells.append(f"{ms:.0f}")
                continue
            rt = med([a / b for a, b in zip(rr["ms"][e][n], rr["ms"]["torch"][n])])
            ro = med([a / b for a, b in zip(rr["ms"][e][n], rr["ms"]["ort"][n])])
            cells.append(f"{ms:.0f} ({rt:.2f} / {ro:.2f})")
        lines.append(f"| {ENGINE_NAMES[e]} | " + " | ".join(cells) + " |")
    warm = RESULTS / WARM_SAY
    if warm.exists():
        w = json.loads(warm.read_text())
        ph = w["phases_median"]
        lines += ["", f"Warm `kcc say` of one sentence (`bench/bench_say_warm.py`, {w['cpu']}; kcc includes its "
                  "G2P, onnxruntime (int8 export) and torch get its phoneme ids), wall / peak RSS: "
                  + ", ".join(f"{k.removesuffix(' (process)')} {v['wall_s']:.2f} s / {v['peak_rss_mb']:.0f} MB"
                              for k, v in w["rows"].items())
                  + f"; in kcc: imports {ph['imports_s']:.2f} s, load {ph['model_load_s']:.2f} s, "
                    f"G2P {ph['g2p_s']:.2f} s, synthesis {ph['synthesis_s']:.2f} s."]
    lines += ["", "More (rooflines, levels, server, batch): `bench/results/`."]
    return "\n".join(lines)


# Each generated file and the sections it holds (the README keeps to a user's first read; the
# limits table, long and for operators, lives beside the architecture notes).
SECTIONS = {"README.md": {"STATUS": status_section, "BENCH": bench_section},
            "docs/LIMITS.md": {"LIMITS": limits_section}}


def render(text: str, sections: dict, name: str = "README.md") -> str:
    for key, make in sections.items():
        pattern = re.compile(rf"(<!-- {key}:BEGIN -->\n).*?(<!-- {key}:END -->)", re.S)
        if not pattern.search(text):
            raise SystemExit(f"{name} has no {key} markers")
        text = pattern.sub(lambda mt: mt.group(1) + make() + "\n" + mt.group(2), text)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    stale = 0
    for name, sections in SECTIONS.items():
        path = ROOT / name
        old = path.read_text(encoding="utf-8")
        new = render(old, sections, name)
        if args.check:
            if new != old:
                print(f"{name} is stale: run python scripts/update_readme.py", file=sys.stderr)
                stale = 1
            continue
        path.write_text(new, encoding="utf-8")
        print(f"{name}: {len(new.encode())} bytes")
    return stale


if __name__ == "__main__":
    raise SystemExit(main())
