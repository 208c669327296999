"""Captures of the middle of Kokoro: text encoder, duration encoder + predictor, alignment
expansion and prosody (F0 / N), run exactly as KModel.forward_with_tokens runs them.

Every tensor is saved time-major ([B, T, C] / [B, F, C]). Each capture is one utterance
(B = 1): a prefix of PINNED_IDS_36 closed by a boundary 0, and a seeded ref_s [1, 256] of
realistic scale (N(0, 0.1)). `middle_t{T}` holds the text-encoder and duration checkpoints at
speed 1.0, plus `kokoro.predictor.durations_by_speed` [3, T] for the speeds in `speeds`;
`middle_t12` also holds the expansion and prosody checkpoints (kept to one short utterance:
frame-rate tensors are large). The capture re-derives pred_dur through forward_with_tokens
itself and refuses to save if the two disagree.
"""
from __future__ import annotations

import numpy as np

from oracle.captures import capture
from oracle.captures.phoneme_encoder import PINNED_IDS_36

SPEEDS = (0.8, 1.0, 1.3)
STYLE_SEED = 20240


def ids_of_length(n: int) -> np.ndarray:
    """[1, n] ids: the first n-1 of the pinned utterance, closed by the boundary token 0."""
    if not 3 <= n <= len(PINNED_IDS_36):
        raise ValueError(f"length {n} outside [3, {len(PINNED_IDS_36)}]")
    return np.array([PINNED_IDS_36[:n - 1] + [0]], dtype=np.int32)


def ref_style() -> np.ndarray:
    return (0.1 * np.random.default_rng(STYLE_SEED).standard_normal((1, 256))).astype(np.float32)


def _tm(x):
    """[B, C, T] torch -> time-major numpy [B, T, C]."""
    return x.transpose(1, 2).contiguous().numpy().copy()


def _middle(kmodel, n_tok: int, prosody: bool) -> dict:
    import torch
    ids_np = ids_of_length(n_tok)
    ref_np = ref_style()
    input_ids = torch.from_numpy(ids_np).long()
    ref_s = torch.from_numpy(ref_np)
    ck: dict[str, np.ndarray] = {}
    hooks = []

    def grab(module, fn):
        hooks.append(module.register_forward_hook(lambda m, i, o: fn(i, o)))

    te, pred = kmodel.text_encoder, kmodel.predictor
    for j, block in enumerate(te.cnn):
        grab(block, lambda i, o, j=j: ck.__setitem__(f"kokoro.text_encoder.cnn.{j}", _tm(o)))
    for i in range(len(pred.text_encoder.lstms) // 2):
        ada = pred.text_encoder.lstms[2 * i + 1]
        grab(ada, lambda inp, o, i=i: ck.__setitem__(f"kokoro.predictor.text_encoder.ada_norm.{i}", o.numpy().copy()))
        if i == 0:  # the first LSTM's padded output is the AdaLayerNorm's input, [B, T, C]
            grab(ada, lambda inp, o: ck.__setitem__("kokoro.predictor.text_encoder.lstm.0", inp[0].numpy().copy()))
    if prosody:
        grab(pred.shared, lambda i, o: ck.__setitem__("kokoro.predictor.shared", o[0].numpy().copy()))
        for j, block in enumerate(pred.F0):
            grab(block, lambda i, o, j=j: ck.__setitem__(f"kokoro.predictor.F0.{j}", _tm(o)))
        for j, block in enumerate(pred.N):
            grab(block, lambda i, o, j=j: ck.__setitem__(f"kokoro.predictor.N.{j}", _tm(o)))
    try:
        # --- exactly the statements of KModel.forward_with_tokens (kokoro 0.9.4) ---
        input_lengths = torch.full((input_ids.shape[0],), input_ids.shape[-1], dtype=torch.long)
        text_mask = torch.arange(input_lengths.max()).unsqueeze(0).expand(input_lengths.shape[0], -1).type_as(input_lengths)
        text_mask = torch.gt(text_mask + 1, input_lengths.unsqueeze(1))
        bert_dur = kmodel.bert(input_ids, attention_mask=(~text_mask).int())
        d_en = kmodel.bert_encoder(bert_dur).transpose(-1, -2)
        s = ref_s[:, 128:]
        d = pred.text_encoder(d_en, s, input_lengths, text_mask)
        x, _ = pred.lstm(d)
        logits = pred.duration_proj(x)
        durs = {}
        for speed in SPEEDS:
            duration = torch.sigmoid(logits).sum(axis=-1) / speed
            durs[speed] = torch.round(duration).clamp(min=1).long().squeeze()
        pred_dur = durs[1.0]
        indices = torch.repeat_interleave(torch.arange(input_ids.shape[1]), pred_dur)
        pred_aln_trg = torch.zeros((input_ids.shape[1], indices.shape[0]))
        pred_aln_trg[indices, torch.arange(indices.shape[0])] = 1
        pred_aln_trg = pred_aln_trg.unsqueeze(0)
        en = d.transpose(-1, -2) @ pred_aln_trg
        if prosody:
            F0_pred, N_pred = pred.F0Ntrain(en, s)
        t_en = kmodel.text_encoder(input_ids, input_lengths, text_mask)
        asr = t_en @ pred_aln_trg
    finally:
        for h in hooks:
            h.remove()
    for speed in SPEEDS:   # the capture's own replay must agree with upstream's entry point
        _, upstream_dur = kmodel.forward_with_tokens(input_ids, ref_s, speed)
        if not torch.equal(upstream_dur, durs[speed]):
            raise RuntimeError(f"replayed durations differ from forward_with_tokens at speed {speed}")

    inputs = {"input_ids": ids_np, "lengths": np.array([n_tok], dtype=np.int32), "ref_s": ref_np,
              "style_pred": ref_np[:, 128:].copy(), "d_en": _tm(d_en),
              "speed": np.array([1.0], dtype=np.float32), "speeds": np.array(SPEEDS, dtype=np.float32)}
    ck["kokoro.text_encoder.output"] = _tm(t_en)
    ck["kokoro.predictor.text_encoder.output"] = d.numpy().copy()
    ck["kokoro.predictor.lstm"] = x.numpy().copy()
    ck["kokoro.predictor.duration_logits"] = logits.numpy().copy()
    ck["kokoro.predictor.durations"] = pred_dur.reshape(1, -1).numpy().astype(np.float32)
    ck["kokoro.predictor.durations_by_speed"] = np.stack([durs[v].reshape(-1).numpy() for v in SPEEDS]).astype(np.float32)
    if prosody:
        inputs.update({"d": d.numpy().copy(), "durations": pred_dur.reshape(1, -1).numpy().astype(np.int32),
                       "t_en": _tm(t_en)})
        ck["kokoro.predictor.expanded"] = _tm(en)
        ck["kokoro.asr"] = _tm(asr)
        ck["kokoro.predictor.f0"] = F0_pred.numpy().copy()
        ck["kokoro.predictor.n"] = N_pred.numpy().copy()
        for name in ("kokoro.predictor.F0.0", "kokoro.predictor.F0.2", "kokoro.predictor.N.0",
                     "kokoro.predictor.N.1", "kokoro.predictor.N.2"):
            del ck[name]     # size (< 1 MB): keep F0's upsampling block and both finals
    return {"inputs": inputs, "checkpoints": ck}


@capture("middle_t12")
def middle_t12(kmodel, config):
    return _middle(kmodel, 12, prosody=True)


@capture("middle_t24")
def middle_t24(kmodel, config):
    return _middle(kmodel, 24, prosody=False)


@capture("middle_t36")
def middle_t36(kmodel, config):
    return _middle(kmodel, 36, prosody=False)
