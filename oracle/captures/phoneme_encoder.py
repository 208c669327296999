"""Captures of the ALBERT phoneme encoder: embeddings (and later, every layer)."""
from __future__ import annotations

import numpy as np

from oracle.captures import capture

# The pinned reference utterance: 36 token ids (boundary 0s included), vocabulary 178.
PINNED_IDS_36 = [0, 50, 83, 54, 156, 57, 135, 16, 65, 156, 87, 158, 54, 46, 16, 102, 56, 16, 62,
                 83, 123, 156, 102, 47, 16, 44, 156, 51, 158, 16, 53, 156, 76, 158, 4, 0]


def pinned_ids() -> np.ndarray:
    return np.array([PINNED_IDS_36], dtype=np.int32)


@capture("embedding")
def embedding(kmodel, config):
    import torch
    ids = pinned_ids()
    types = np.zeros_like(ids)
    emb = kmodel.bert.embeddings(input_ids=torch.from_numpy(ids).long(),
                                 token_type_ids=torch.from_numpy(types).long())
    return {"inputs": {"input_ids": ids, "token_type_ids": types},
            "checkpoints": {"kokoro.phoneme_encoder.embeddings": emb.numpy()}}
