"""Whole-graph capture: every stage boundary of KModel.forward_with_tokens, time-major.

The stage boundaries are recorded with forward hooks on the upstream modules while upstream's
own forward_with_tokens runs, so nothing is re-implemented here. SineGen draws torch.rand
(initial harmonic phases) and torch.randn_like (additive noise); both are redirected to a
torch.Generator seeded with NOISE_SEED so the test can regenerate the identical tensors
(`upstream_random_inputs`) and feed them to the C as inputs instead of pinning megabytes.
"""
from __future__ import annotations

import contextlib

import numpy as np

from oracle.captures import capture
from oracle.captures.phoneme_encoder import PINNED_IDS_36

NOISE_SEED = 20261202
# A short utterance keeps the waveform-stage fixture small: 8 tokens incl. the boundary 0s.
SHORT_IDS = PINNED_IDS_36[:7] + [0]


def style_vector(seed: int = 7) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal((1, 256))).astype(np.float32)


@contextlib.contextmanager
def seeded_sine_noise(istftnet, seed: int = NOISE_SEED):
    """Route SineGen's torch.rand / torch.randn_like through one seeded generator."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    drawn = {}
    real_rand, real_randn_like = torch.rand, torch.randn_like

    def rand(*shape, **kw):
        kw.pop("generator", None)
        out = real_rand(*shape, generator=gen, **kw)
        drawn.setdefault("rand_ini", out.clone())
        return out

    def randn_like(t, **kw):
        out = torch.randn(t.shape, generator=gen, dtype=t.dtype)
        drawn.setdefault("sine_noise" if t.shape[-1] > 1 else "uv_noise", out.clone())
        return out

    istftnet.torch.rand, istftnet.torch.randn_like = rand, randn_like
    try:
        yield drawn
    finally:
        istftnet.torch.rand, istftnet.torch.randn_like = real_rand, real_randn_like


def upstream_random_inputs(n_frames_f0: int, seed: int = NOISE_SEED) -> dict[str, np.ndarray]:
    """Regenerate SineGen's draws for an f0 of n_frames_f0 frames, in upstream's draw order."""
    import torch
    gen = torch.Generator().manual_seed(seed)
    rand_ini = torch.rand(1, 9, generator=gen)
    noise = torch.randn((1, n_frames_f0 * 300, 9), generator=gen)
    return {"rand_ini": rand_ini.numpy(), "sine_noise": noise.numpy()}


def run_full(kmodel, ids: list[int], ref_s: np.ndarray, speed: float):
    import torch
    from oracle.upstream import kokoro_modules
    _, _, istftnet = kokoro_modules()
    rec: dict[str, np.ndarray] = {}
    hooks = []

    def keep(name, fn):
        def hook(_mod, args, out):
            rec[name] = fn(args, out).detach().numpy().astype(np.float32)
        return hook

    T = lambda x: x.transpose(-1, -2)  # channel-major -> time-major  # noqa: E731
    hooks.append(kmodel.bert_encoder.register_forward_hook(keep("kokoro.phoneme_encoder.bert_encoder", lambda a, o: o)))
    hooks.append(kmodel.text_encoder.register_forward_hook(keep("kokoro.text_encoder.output", lambda a, o: T(o))))
    hooks.append(kmodel.predictor.text_encoder.register_forward_hook(keep("kokoro.predictor.d", lambda a, o: o)))
    hooks.append(kmodel.predictor.shared.register_forward_hook(
        keep("kokoro.predictor.expanded", lambda a, o: a[0])))
    hooks.append(kmodel.decoder.generator.register_forward_hook(
        keep("kokoro.decoder.generator_input", lambda a, o: T(a[0]))))
    hooks.append(kmodel.decoder.generator.conv_post.register_forward_hook(
        keep("kokoro.generator.conv_post", lambda a, o: T(o))))
    f0n = {}

    def grab_f0n(_mod, args, out):
        f0n["f0"], f0n["n"] = out

    real_f0n = kmodel.predictor.F0Ntrain

    def f0ntrain(x, s):
        out = real_f0n(x, s)
        grab_f0n(None, (x, s), out)
        return out

    kmodel.predictor.F0Ntrain = f0ntrain
    try:
        with seeded_sine_noise(istftnet) as drawn:
            audio, pred_dur = kmodel.forward_with_tokens(torch.tensor([ids]), torch.from_numpy(ref_s), speed)
    finally:
        kmodel.predictor.F0Ntrain = real_f0n
        for h in hooks:
            h.remove()
    rec["kokoro.predictor.durations"] = pred_dur.numpy().astype(np.float32).reshape(1, -1)
    rec["kokoro.predictor.f0"] = f0n["f0"].numpy().astype(np.float32)
    rec["kokoro.predictor.n"] = f0n["n"].numpy().astype(np.float32)
    rec["kokoro.waveform"] = audio.numpy().astype(np.float32).reshape(1, -1)
    return rec, drawn


@capture("full_model")
def full_model(kmodel, config):
    ids = SHORT_IDS
    ref_s = style_vector()
    rec, drawn = run_full(kmodel, ids, ref_s, 1.0)
    # The regenerated draws must be exactly what upstream consumed.
    frames = rec["kokoro.predictor.f0"].shape[-1]
    again = upstream_random_inputs(frames)
    np.testing.assert_array_equal(again["rand_ini"], drawn["rand_ini"].numpy())
    np.testing.assert_array_equal(again["sine_noise"], drawn["sine_noise"].numpy())
    order = ["kokoro.phoneme_encoder.bert_encoder", "kokoro.text_encoder.output", "kokoro.predictor.d",
             "kokoro.predictor.durations", "kokoro.predictor.expanded", "kokoro.predictor.f0",
             "kokoro.predictor.n", "kokoro.decoder.generator_input", "kokoro.generator.conv_post",
             "kokoro.waveform"]
    ids_arr = np.array([ids], dtype=np.int32)
    return {"inputs": {"input_ids": ids_arr, "token_type_ids": np.zeros_like(ids_arr),
                       "lengths": np.array([len(ids)], dtype=np.int32), "ref_s": ref_s,
                       "speed": np.array([1.0], dtype=np.float32),
                       "noise_seed": np.array([NOISE_SEED], dtype=np.int64)},
            "checkpoints": {k: rec[k] for k in order}}
