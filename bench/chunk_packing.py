#!/usr/bin/env python3
"""What packing whole sentences up to kcc.speech.text.PACK_PHONEMES costs and saves, against
filling chunks to the model's 510 phonemes (pack=None): for one text, each mode in a fresh
process (the real model, released weights as `kcc say`), rounds interleaved: chunks, the longest
chunk's phonemes, synthesis seconds (G2P excluded: both modes share it), audio seconds, xRT and
the process's peak RSS (wait4).

Usage: python bench/chunk_packing.py [--kb 5] [--rounds 2] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.machine import cpu_label  # noqa: E402
from bench.say_memory import long_text  # noqa: E402
from bench.warm_cli import run  # noqa: E402

CHILD = r"""
import json, sys, time
from kcc.model.loader import load
from kcc.speech.engine import plan
from kcc.speech.g2p.g2p import G2P
from kcc.speech.text import PACK_PHONEMES
from kcc.speech.voices import default_voice_for, load_voice, style_for
mode, path = sys.argv[1], sys.argv[2]
pack = None if mode == "fill" else PACK_PHONEMES
synth = load(release_weights=True, log=None)
chunks = plan(open(path, encoding="utf-8").read(), G2P("en-us"), pack=pack, max_frames=synth.max_frames)
voice = load_voice(default_voice_for("en-us"))
t0, audio = time.perf_counter(), 0
for c in chunks:
    audio += synth.synthesize(c.ids, style_for(voice, len(c.ids))).audio.size
print(json.dumps({"chunks": len(chunks), "longest": max(len(c.ids) for c in chunks),
                  "synth_s": time.perf_counter() - t0, "audio_s": audio / 24000}))
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kb", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    modes = {"pack": [], "fill": []}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "text.txt"
        src.write_text(long_text(a.kb), encoding="utf-8")
        for _ in range(a.rounds):
            for mode in modes:
                modes[mode].append(run(ROOT, ["-c", CHILD, mode, str(src)]))
    print(f"{cpu_label()}; {a.kb} KB of prose (bench/say_memory.py's), {a.rounds} rounds interleaved, medians")
    print("| mode | chunks | longest chunk (ids) | synthesis s | audio s | xRT | peak RSS MB |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for mode, runs in modes.items():
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        label = "whole sentences up to PACK_PHONEMES" if mode == "pack" else "filled to 510 (pack=None)"
        print(f"| {label} | {med['chunks']:.0f} | {med['longest']:.0f} | {med['synth_s']:.1f} | {med['audio_s']:.1f} "
              f"| {med['audio_s'] / med['synth_s']:.1f} | {med['peak_rss_mb']:.0f} |")
    if a.json:
        a.json.write_text(json.dumps({"cpu": cpu_label(), "kb": a.kb, "runs": modes}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
