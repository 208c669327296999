"""What chunking a sentence costs a listener: each sentence spoken whole and as the server
chunks it (the first chunk cut at 16 phonemes, then x3): every chunk as the model predicts an
utterance, a chunk that ends inside a sentence drawn as continuing (the default:
kcc.model.pipeline.continuing_durations), and that with the first chunk's leading silence cut
to 4 frames (the server's --first-lead-ms 100); Whisper tiny.en's word error rate and the audio
length against the whole sentence's.

    python bench/chunk_join_wer.py [--voice jf_alpha] [--precision fp32] [--seeds 2]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from asr_wer import SENTENCES, Whisper, spoken, wer  # noqa: E402

BENCH_SENTENCE = "The quick brown fox jumps over the lazy dog, and then it runs far away into the woods."


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voice", default="jf_alpha")
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--first", type=int, default=16, help="the first chunk's phoneme limit (the server's floor)")
    args = ap.parse_args(argv)

    from kcc.speech.serve.first_chunk import chunk_plan
    from kcc.speech.g2p.g2p import G2P
    from kcc.speech.engine import load_synthesizer, plan, synthesize_chunks
    from kcc.speech.voices import load_voice
    synth = load_synthesizer(None, threads=2, precision=args.precision, log=open(os.devnull, "w"))
    pack, g2p, whisper = load_voice(args.voice), G2P(), Whisper()
    ramp, min_rest = chunk_plan(args.first, 200)
    policies = {"whole sentence": (None, None, False, None),
                "chunked, each chunk an utterance": (ramp, min_rest, False, None),
                "chunked, continuing joins (default)": (ramp, min_rest, True, None),
                "chunked, default + first chunk's leading silence <= 4 frames": (ramp, min_rest, True, 4)}
    rows = {p: {"refs": [], "hyps": [], "seconds": [], "chunks": []} for p in policies}
    for text in [*SENTENCES, BENCH_SENTENCE]:
        for name, (first, rest, join, lead) in policies.items():
            chunks = plan(text, g2p, first_limit=first or 510, min_rest=rest or 0)
            for seed in range(args.seeds):
                audio = np.concatenate([c.audio for c in synthesize_chunks(
                    chunks, synth, pack, seed=seed, joins=join, first_lead_frames=lead)])
                r = rows[name]
                r["refs"].append(spoken(text))
                r["hyps"].append(spoken(whisper(audio)))
                r["seconds"].append(audio.size / 24000)
                r["chunks"].append(len(chunks))
    whole = np.array(rows["whole sentence"]["seconds"])
    print(f"| policy ({args.precision}, voice {args.voice}, {args.seeds} seeds) | Whisper WER | chunks per sentence "
          "| audio length / whole (min - max) |")
    print("| --- | --- | --- | --- |")
    for name, r in rows.items():
        import jiwer
        corpus = jiwer.wer([" ".join(x) for x in r["refs"]], [" ".join(x) for x in r["hyps"]])
        ratio = np.array(r["seconds"]) / whole
        print(f"| {name} | {100 * corpus:.1f}% | {np.mean(r['chunks']):.1f} | {np.median(ratio):.2f} "
              f"({ratio.min():.2f} - {ratio.max():.2f}) |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
