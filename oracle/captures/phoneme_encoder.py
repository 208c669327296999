"""Captures of the ALBERT phoneme encoder: embeddings, and every stage of the whole encoder."""
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


# -- the whole encoder: every X-Ray checkpoint of kcc/circuits/kokoro_phoneme_encoder.json ------

PREFIX = "kokoro.phoneme_encoder."


def boundary_prefix(n: int) -> list[int]:
    """The first n - 1 pinned ids closed by a boundary 0: a shorter, still well-formed utterance."""
    return PINNED_IDS_36[:n - 1] + [0]


def _run_encoder(kmodel, ids: np.ndarray, lengths: np.ndarray) -> dict[str, np.ndarray]:
    """Upstream KModel.forward_with_tokens' encoder path (bert + bert_encoder) with hooks on every
    stage; time-major [B, T, C] throughout (upstream's own layout before its transpose)."""
    import torch
    ids_t = torch.from_numpy(ids).long()
    lens_t = torch.from_numpy(lengths).long()
    text_mask = torch.arange(ids.shape[1]).unsqueeze(0) >= lens_t.unsqueeze(1)   # as KModel: True at padding
    seen: list[tuple[str, np.ndarray]] = []
    enc = kmodel.bert.encoder
    layer = enc.albert_layer_groups[0].albert_layers[0]
    hooks = [
        kmodel.bert.embeddings.register_forward_hook(lambda m, a, o: seen.append(("embeddings", o))),
        enc.embedding_hidden_mapping_in.register_forward_hook(lambda m, a, o: seen.append(("projection", o))),
        layer.attention.register_forward_hook(lambda m, a, o: seen.append(("attention", o[0]))),
        layer.register_forward_hook(lambda m, a, o: seen.append(("ffn", o[0] if isinstance(o, tuple) else o))),
    ]
    try:
        bert_dur = kmodel.bert(ids_t, attention_mask=(~text_mask).int())
        d_en = kmodel.bert_encoder(bert_dur)
    finally:
        for h in hooks:
            h.remove()
    out, count = {}, {"attention": 0, "ffn": 0}
    for kind, t in seen:
        if kind in count:
            out[f"{PREFIX}layer{count[kind]}.{kind}"] = t.detach().numpy()
            count[kind] += 1
        else:
            out[PREFIX + kind] = t.detach().numpy()
    out[PREFIX + "bert_encoder"] = d_en.detach().numpy()
    if count != {"attention": 12, "ffn": 12}:
        raise RuntimeError(f"expected 12 shared-layer calls, hooks saw {count}")
    order = ["embeddings", "projection"] + [f"layer{i}.{k}" for i in range(12) for k in ("attention", "ffn")]
    return {PREFIX + k: out[PREFIX + k] for k in order + ["bert_encoder"]}


@capture("phoneme_encoder")
def phoneme_encoder(kmodel, config):
    # Full width (768) keeps the fixture small with a 16-token prefix (26 checkpoints x 49 KB);
    # the small config uses the whole 36-token pinned utterance.
    n = 36 if config["plbert"]["hidden_size"] <= 64 else 16
    ids = np.array([boundary_prefix(n) if n < 36 else PINNED_IDS_36], dtype=np.int32)
    lengths = np.array([n], dtype=np.int32)
    return {"inputs": {"input_ids": ids, "token_type_ids": np.zeros_like(ids), "lengths": lengths},
            "checkpoints": _run_encoder(kmodel, ids, lengths)}


@capture("phoneme_encoder_padded")
def phoneme_encoder_padded(kmodel, config):
    """A padded batch of three utterances (36, 20 and 7 tokens; pad id 0), masked as KModel masks."""
    lens = [36, 20, 7]
    ids = np.zeros((3, 36), dtype=np.int32)
    for b, n in enumerate(lens):
        ids[b, :n] = PINNED_IDS_36 if n == 36 else boundary_prefix(n)
    lengths = np.array(lens, dtype=np.int32)
    return {"inputs": {"input_ids": ids, "token_type_ids": np.zeros_like(ids), "lengths": lengths},
            "checkpoints": _run_encoder(kmodel, ids, lengths)}
