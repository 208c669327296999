#!/usr/bin/env python3
"""Where a warm server's memory goes: /proc/self/smaps_rollup (Rss, Pss, anonymous, file-backed)
after each step a `kcc serve` warm-up takes, then with 1 and 2 synthesis threads busy on a long
chunk, then idle again. One process, the real model, the default voice.

Usage: python bench/serve_memory.py [--languages en-us,ja,...] [--idle-trim] [--release-weights] [--json OUT]

The busy steps run the long text's chunks through the server's ChunkScheduler (2 synthesis
threads, as `kcc serve --workers 2`) from 1 or 2 request threads; --idle-trim passes it the
service's on_idle (an idle thread drops its arena); --release-weights turns on
Synthesizer.release_weights_after_use (weight pages leave the resident set after each stage).

Rss counts the weights' file-backed pages (shared through the page cache, reclaimable: the
kernel drops them under pressure and every worker maps the same ones); anonymous memory (the
arenas, the G2P's dictionaries and models, Python's heap) is what the process alone holds.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.machine import cpu_label  # noqa: E402
from kcc.speech.engine import load_synthesizer, plan, resolve_voice, synthesize_chunks  # noqa: E402
from kcc.speech.g2p.g2p import G2P  # noqa: E402
from kcc.speech.serve.scheduler import ChunkScheduler  # noqa: E402
from kcc.speech.serve.warmup import SAMPLE_TEXT  # noqa: E402

LONG = ("The quick brown fox jumps over the lazy dog, and then it runs far away into the woods, where the "
        "tall trees stand quiet in the evening light and the river carries the last leaves of autumn "
        "down towards the sea, past the old mill and the sleeping town.")
FIELDS = ("Rss", "Pss", "Anonymous", "Pss_Anon", "Pss_File")


def rollup() -> dict[str, float]:
    """MB of each field of /proc/self/smaps_rollup (file-backed = Rss - Anonymous)."""
    out = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        parts = line.split()
        if parts and parts[0].rstrip(":") in FIELDS:
            out[parts[0].rstrip(":")] = int(parts[1]) / 1024
    out["File"] = out["Rss"] - out["Anonymous"]
    return {k: round(v, 1) for k, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--languages", default=",".join(SAMPLE_TEXT))
    ap.add_argument("--idle-trim", action="store_true")
    ap.add_argument("--release-weights", action="store_true")
    ap.add_argument("--malloc-trim", action="store_true", help="on_idle also returns the C heap's free memory (glibc)")
    ap.add_argument("--json")
    args = ap.parse_args()
    steps: list[tuple[str, dict]] = [("imported", rollup())]
    synth = load_synthesizer(None, log=None)
    synth.set_threads(1)
    if args.release_weights:
        synth.release_weights_after_use()
    libc = ctypes.CDLL(None)

    def on_idle():
        synth.trim_arena(0)
        if args.malloc_trim:
            libc.malloc_trim(0)
    sched = ChunkScheduler(2, on_idle=on_idle if args.idle_trim else None)
    steps.append(("model mapped", rollup()))
    g2p = G2P("en-us", "auto")
    pack = resolve_voice(None)
    long_chunks = plan(LONG, g2p, first_limit=None)
    list(synthesize_chunks(plan("Hello there.", g2p, first_limit=None), synth, pack))
    steps.append(("one short synthesis (weights paged in)", rollup()))
    for lang in args.languages.split(","):
        G2P(lang, "auto")(SAMPLE_TEXT[lang])
        steps.append((f"+ G2P {lang}", rollup()))
    steps.append(("idle (warm)", rollup()))
    seconds: dict[int, float] = {}
    for workers in (1, 2):
        peak: dict[str, float] = {}
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                for k, v in rollup().items():
                    peak[k] = max(peak.get(k, 0), v)
                time.sleep(0.05)
        s = threading.Thread(target=sample)
        s.start()
        def request():
            for c in long_chunks:
                sched.run((0, 0.0), lambda c=c: list(synthesize_chunks([c], synth, pack)))
        ts = [threading.Thread(target=request) for _ in range(workers)]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        seconds[workers] = round(time.perf_counter() - t0, 2)
        stop.set()
        s.join()
        time.sleep(0.5)                      # the synthesis threads go idle
        steps.append((f"{workers} busy (peak)", peak))
        steps.append((f"after {workers} busy", rollup()))
    sched.close()
    print(f"CPU: {cpu_label()}; long chunk(s): {[len(c.ids) for c in long_chunks]} phonemes; "
          f"idle trim {args.idle_trim}, malloc_trim {args.malloc_trim}, release weights {args.release_weights}; seconds for 1 / 2 requests: {seconds}")
    print("| step | " + " | ".join(k + " MB" for k in (*FIELDS, "File")) + " |")
    print("|---" * (len(FIELDS) + 2) + "|")
    for name, r in steps:
        print(f"| {name} | " + " | ".join(str(r.get(k, "")) for k in (*FIELDS, "File")) + " |")
    if args.json:
        Path(args.json).write_text(json.dumps({"cpu": cpu_label(), "idle_trim": args.idle_trim,
                                               "release_weights": args.release_weights, "malloc_trim": args.malloc_trim, "seconds": seconds,
                                               "steps": steps}, indent=1) + "\n")


if __name__ == "__main__":
    main()
