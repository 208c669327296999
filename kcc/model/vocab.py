"""Kokoro's phoneme vocabulary (kcc/data/vocab.json, from upstream's config.json): phoneme -> id.
A property of the model, so it lives here; G2P (kcc.speech.g2p.g2p) and `kcc export` both read it."""
from __future__ import annotations

import functools
import json
from pathlib import Path

VOCAB_PATH = Path(__file__).resolve().parents[1] / "data" / "vocab.json"


@functools.lru_cache(maxsize=1)
def load_vocab() -> dict[str, int]:
    with open(VOCAB_PATH, encoding="utf-8") as fh:
        return json.load(fh)["vocab"]
