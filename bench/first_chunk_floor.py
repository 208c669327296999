"""How soon can a stream's first audio be? Synthesis alone of a sentence's first n phonemes.

Usage: python bench/first_chunk_floor.py [--precisions fp32,int8] [--lengths 5,10,16,27,40] [--rounds 7]

The real model speaks the first n phonemes of one sentence (af_heart, cut as a stream's first
chunk: `continues=True`), best of --rounds, on every core and on one; no G2P, no HTTP, no
queue: the floor under bench_serve's first audio. Four listeners' first chunks on 2 cores take
at least two one-core syntheses each, one after the other (the floor under the 4-client p95).
Prints a Markdown table with each stage's share and the CPU.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import cpu_label  # noqa: E402
from kcc.compiler.threads import available_cores  # noqa: E402
from kcc.model.loader import load  # noqa: E402
from kcc.model.vocab import load_vocab  # noqa: E402
from kcc.speech.voices import load_voice, style_for  # noqa: E402

# "The quick brown fox jumps over the lazy dog, and then it runs into the forest." as misaki writes
# it; a chunk of n phonemes is its first n symbols (the frame count per phoneme is what matters).
SENTENCE = "ðə kwˈɪk bɹˈWn fˈɑks ʤˈʌmps ˈOvəɹ ðə lˈAzi dˈɔɡ, ænd ðˈɛn ɪt ɹˈʌnz ˈɪntu ðə fˈɔɹəst."


def best_of(synth, ids: list[int], style: np.ndarray, rounds: int):
    """(best seconds, that run's seconds per stage, audio seconds)."""
    best, stages, audio = float("inf"), {}, 0.0
    for _ in range(rounds):
        t0 = time.perf_counter()
        out = synth.synthesize(ids, style, continues=True)
        dt = time.perf_counter() - t0
        if dt < best:
            best, stages, audio = dt, dict(out.seconds), np.asarray(out.audio).size / 24_000
    return best, stages, audio


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--precisions", default="fp32,int8")
    ap.add_argument("--lengths", default="5,10,16,27,40")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    vocab = load_vocab()
    pack = load_voice("af_heart")
    cores = available_cores()
    print(f"CPU: {cpu_label()}\n")
    print(f"| precision | phonemes | audio s | {cores} threads ms | 1 thread ms | generator / decoder / "
          f"text side ms ({cores} threads) | 4 listeners on {cores} cores, floor ms |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for precision in args.precisions.split(","):
        synth = load(None, precision=precision)
        for n in (int(x) for x in args.lengths.split(",")):
            ids = [vocab[c] for c in SENTENCE[:n] if c in vocab]
            style = style_for(pack, len(ids))
            synth.set_threads(cores)
            both, stages, audio = best_of(synth, ids, style, args.rounds)
            synth.set_threads(1)
            one, _, _ = best_of(synth, ids, style, args.rounds)
            gen = sum(v for k, v in stages.items() if "generator" in k or "source" in k)
            dec = sum(v for k, v in stages.items() if "decoder" in k)
            front = sum(stages.values()) - gen - dec
            floor = one * -(-4 // cores)          # each core makes ceil(4 / cores) first chunks in turn
            print(f"| {precision} | {len(ids)} | {audio:.2f} | {1e3 * both:.0f} | {1e3 * one:.0f} | "
                  f"{1e3 * gen:.0f} / {1e3 * dec:.0f} / {1e3 * front:.0f} | {1e3 * floor:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
