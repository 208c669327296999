"""What the voice design's search space can reach, and which way its guided steps point.

Usage: python bench/voice_design_reach.py [--out bench/results/voice_design_reach.json]

The held-out design (bench/voice_design.py's held_out_bf_emma): bf_emma's speech is the target and
only the American voices may be blended. Here bf_emma's own pack is known, so this measures,
with no search at all:
  1. reach: the best a candidate of the search's form (a blend of pool packs plus one offset on
     every row) can score, fitted to bf_emma's pack by least squares (non-negative blend weights,
     the offset the rows' mean difference), heard on the held-out sentences; with the offset's
     decoder half only (STYLE_DEC, what the search moves) and its predictor half only.
  2. direction: at the search's start blend (the top three voices equally), the cosine between
     the step that reaches bf_emma (the fitted offset's decoder half, in the search's standardised
     units) and the uphill direction of (a) a linear model fitted on the pool's voices (the
     search's guide before the local model), (b) the local model (search.local_direction) fitted
     on N random steps around the start, each heard against the start on 3 rotating sentences
     drawn at random, as the search hears its candidates. A random direction scores ~1/sqrt(128).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import cpu_label  # noqa: E402
from bench.voice_design import TARGET_TEXT, TARGETS, held_out  # noqa: E402
from kcc.model import load  # noqa: E402
from kcc.model.kokoro import STYLE_DEC, STYLE_PRED  # noqa: E402
from kcc.speech.g2p.g2p import G2P  # noqa: E402
from kcc.speech.voice_design.encoder import SpeakerEncoder, unit  # noqa: E402
from kcc.speech.voice_design.search import ROTATE_K, Scorer, local_direction, mean_similarity  # noqa: E402
from kcc.speech.voice_design.sentences import sentences_of  # noqa: E402
from kcc.speech.voice_design.target import embed_target  # noqa: E402
from kcc.speech.voices import load_voice, voice_catalog  # noqa: E402

START = ("af_jessica", "af_river", "af_sarah")      # the search's start blend for this target (top 3)


def nonnegative_lstsq(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min |a w - b| over w >= 0, by dropping the negative weights until none is left."""
    active = list(range(a.shape[1]))
    while True:
        w = np.linalg.lstsq(a[:, active], b, rcond=None)[0]
        if (w >= 0).all():
            break
        active = [i for i, x in zip(active, w) if x > 0]
    out = np.zeros(a.shape[1])
    out[active] = w
    return out


def fitted(target: np.ndarray, packs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(blend weights, blend, offset): the rows' deviations from their mean fitted by the blend,
    the mean by the offset."""
    rows = target.shape[0]
    a = np.stack([p.reshape(rows, -1) for p in packs], axis=-1)          # rows x 256 x voices
    centred = (a - a.mean(axis=0, keepdims=True)).reshape(-1, len(packs))
    b = target.reshape(rows, -1)
    w = nonnegative_lstsq(centred, (b - b.mean(axis=0, keepdims=True)).reshape(-1))
    w /= w.sum()
    blend = (a @ w).reshape(target.shape)
    return w, blend, (target - blend).reshape(rows, -1).mean(axis=0)


def with_offset(blend: np.ndarray, offset: np.ndarray, part: slice | None = None) -> np.ndarray:
    o = np.zeros_like(offset)
    o[part or slice(None)] = offset[part or slice(None)]
    return (blend + o.reshape(1, 1, -1)).astype(np.float32)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=48, help="random steps the local model is fitted on")
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    voice, lang, in_pool = TARGETS["held_out_bf_emma"]
    synth, encoder, g2p = load(None), SpeakerEncoder(), G2P(lang)
    held = Scorer.speaking(synth, g2p, sentences_of(lang).held_out, encoder)
    emma = load_voice(voice)
    target = embed_target([(Scorer.speaking(synth, g2p, (TARGET_TEXT,), encoder).audio(emma), 24_000, voice)],
                          encoder).embedding.astype(np.float64)
    pool = sorted(n for n in voice_catalog() if in_pool(n))
    packs = {n: load_voice(n).astype(np.float64) for n in pool}

    def heard(pack) -> float:
        return round(held_out(held, pack, target, None)[0], 3)

    reach = {"ceiling (bf_emma's own pack)": heard(emma)}
    for name, basis in (("the start's three voices", list(START)), ("the pool", pool)):
        w, blend, offset = fitted(emma.astype(np.float64), [packs[n] for n in basis])
        reach[f"{name}: blend alone"] = heard(blend.astype(np.float32))
        reach[f"{name}: blend + offset"] = heard(with_offset(blend, offset))
        reach[f"{name}: blend + offset's decoder half"] = heard(with_offset(blend, offset, STYLE_DEC))
        reach[f"{name}: blend + offset's predictor half"] = heard(with_offset(blend, offset, STYLE_PRED))
        reach[f"{name}: weights"] = {n: round(float(x), 3) for n, x in zip(basis, w) if x > 0.005}
        print(json.dumps({k: v for k, v in reach.items() if k.startswith(name)}), flush=True)

    # 2. directions at the start blend, in the search's units (the pool's spread per style dim)
    means = np.stack([p.reshape(-1, 256).mean(axis=0) for p in packs.values()])
    scale = np.maximum(means.std(axis=0), 1e-3)
    start = sum(packs[n] for n in START) / len(START)
    ideal = (emma - start).reshape(emma.shape[0], -1).mean(axis=0) / scale
    ideal[STYLE_PRED] = 0.0
    ideal /= np.linalg.norm(ideal)
    scorer = Scorer.speaking(synth, g2p, sentences_of(lang).scoring, encoder)
    pool_emb = np.stack([scorer.embed(scorer.audio(p.astype(np.float32))) for p in packs.values()])
    z, e = (means - means.mean(axis=0)) / scale, pool_emb - pool_emb.mean(axis=0)
    z[:, STYLE_PRED] = 0.0
    g = (z.T @ np.linalg.solve(z @ z.T + np.eye(len(z)), e)) @ target       # the pool-fitted linear model's uphill
    directions = {"pool-fitted model": round(float(g @ ideal / np.linalg.norm(g)), 3)}
    rotation = Scorer.speaking(synth, g2p, sentences_of(lang).rotating, encoder)
    start32 = start.astype(np.float32)
    at_start = [emb for _, emb in rotation.sentences([(start32, i) for i in range(len(rotation.groups))])]
    rng = np.random.default_rng(args.seed)
    u, d = [], []
    for k in range(args.steps):
        step = np.zeros(256)
        step[STYLE_DEC] = 0.3 * rng.standard_normal(STYLE_DEC.stop)
        idx = sorted(int(i) for i in rng.choice(len(rotation.groups), ROTATE_K, replace=False))
        cand = [emb for _, emb in rotation.sentences([(with_offset(start, step * scale), i) for i in idx])]
        u.append(step)
        d.append(unit(np.mean(cand, axis=0)) - unit(np.mean([at_start[i] for i in idx], axis=0)))
        if k + 1 in (16, 32, args.steps):
            g = local_direction(np.array(u), np.array(d), target, unit(np.mean(at_start, axis=0)))
            directions[f"local model, {k + 1} steps"] = round(float(g @ ideal), 3)
    directions["random (expected |cosine|)"] = round(1 / np.sqrt(STYLE_DEC.stop), 3)
    print(json.dumps(directions), flush=True)
    start_sim = mean_similarity(at_start, target)
    result = {"machine": cpu_label(), "start_rotating": round(start_sim, 3), "reach": reach, "directions": directions}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
