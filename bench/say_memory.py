#!/usr/bin/env python3
"""Peak memory of `kcc say` by the length of its text: one sentence, one long sentence, and a
whole text of --kb kilobytes (bench/front_door_wer.py's sentences, in paragraphs, repeated), each
written to a WAV file by a fresh process (peak RSS from wait4; the artifact warm in the cache).

Usage: python bench/say_memory.py [--kb 50] [--runs 2] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.front_door_wer import CORPUS  # noqa: E402
from bench.machine import cpu_label  # noqa: E402
from bench.warm_cli import run  # noqa: E402


def long_text(kb: int) -> str:
    paragraphs, size, i = [], 0, 0
    while size < kb * 1024:
        para = " ".join(CORPUS[(i + k) % len(CORPUS)] for k in range(4))
        paragraphs.append(para)
        size += len(para.encode()) + 2
        i += 4
    return "\n\n".join(paragraphs)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", type=int, default=50)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    cases = {"a sentence": "Hello from generated C.", "a long sentence": CORPUS[1], f"{a.kb} KB of prose": long_text(a.kb)}
    out = {"cpu": cpu_label(), "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, text in cases.items():
            src = Path(tmp) / "text.txt"
            src.write_text(text, encoding="utf-8")
            runs = [run(ROOT, ["-m", "kcc.cli", "say", "--text-file", str(src), "-o", str(Path(tmp) / "out.wav")])
                    for _ in range(a.runs)]
            out["cases"][name] = {"chars": len(text), "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
                                  "wall_s": min(r["wall_s"] for r in runs)}
    base = out["cases"]["a sentence"]["peak_rss_mb"]
    print(f"{out['cpu']}; kcc say, fresh process per run, max peak RSS of {a.runs} runs")
    print("| text | characters | peak RSS MB | / a sentence's | wall s (min) |")
    print("| --- | --- | --- | --- | --- |")
    for name, c in out["cases"].items():
        print(f"| {name} | {c['chars']} | {c['peak_rss_mb']:.0f} | {c['peak_rss_mb'] / base:.2f} | {c['wall_s']:.1f} |")
    if a.json:
        a.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
