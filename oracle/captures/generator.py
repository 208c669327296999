"""Captures of the iSTFTNet generator (istftnet.Generator) and its signal ops.

`generator`: upstream Decoder on seeded inputs with 2F = N_FRAMES f0 frames; the generator's
input, its random draws (torch.rand -> rand_ini, the first torch.randn_like -> sine_noise;
the second randn_like, SourceModuleHnNSF's unused noise branch, is not an input) and its
intermediate tensors, all time-major. `signal_ops`: a long voiced source (phase accumulation
over 5 s, zero noise) and a polar iSTFT, for the kernel unit tests.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from oracle.captures import capture

N_FRAMES = 8          # f0 frames (2F); 2400 samples. The resblock checkpoints are 128 x 481.


def f0_contour(n: int, rng, unvoiced=(0, 5)) -> np.ndarray:
    """A voiced 100..250 Hz contour with a few unvoiced (0) frames."""
    t = np.linspace(0.0, 1.0, n)
    f0 = 175.0 + 60.0 * np.sin(2 * np.pi * 0.8 * t + 0.3) + rng.normal(0.0, 4.0, n)
    f0[list(unvoiced)] = 0.0
    return f0.astype(np.float32)[None]


@contextmanager
def recorded_draws(rec: dict):
    """Record upstream's torch.rand / torch.randn_like results (and pass them through)."""
    import torch
    rand, randn_like = torch.rand, torch.randn_like

    def rec_rand(*a, **k):
        r = rand(*a, **k)
        rec.setdefault("rand", []).append(r.clone())
        return r

    def rec_randn_like(x, *a, **k):
        r = randn_like(x, *a, **k)
        rec.setdefault("randn_like", []).append(r.clone())
        return r

    torch.rand, torch.randn_like = rec_rand, rec_randn_like
    try:
        yield rec
    finally:
        torch.rand, torch.randn_like = rand, randn_like


def _tm(t):
    """[B, C, T] torch -> time-major [B, T, C] numpy."""
    return t.transpose(1, 2).contiguous().numpy()


@capture("generator")
def generator(kmodel, config):
    import torch
    rng = np.random.default_rng(20240607)
    dec = kmodel.decoder
    gen = dec.generator
    f = N_FRAMES // 2
    asr = torch.from_numpy(rng.normal(0.0, 1.0, (1, 512, f)).astype(np.float32))
    f0 = f0_contour(N_FRAMES, rng)
    n_curve = rng.normal(0.0, 1.0, (1, N_FRAMES)).astype(np.float32)
    style = rng.normal(0.0, 0.1, (1, 128)).astype(np.float32)

    seen: dict = {}
    hooks = [gen.register_forward_pre_hook(lambda m, a: seen.__setitem__("gen_in", a[0].clone()))]
    for i, up in enumerate(gen.ups):
        hooks.append(up.register_forward_hook(lambda m, a, o, i=i: seen.__setitem__(f"ups{i}", o.clone())))
    for j, rb in enumerate(gen.resblocks):
        hooks.append(rb.register_forward_hook(lambda m, a, o, j=j: seen.__setitem__(f"rb{j}", o.clone())))
    hooks.append(gen.conv_post.register_forward_hook(lambda m, a, o: seen.__setitem__("post", o.clone())))
    hooks.append(gen.m_source.register_forward_hook(lambda m, a, o: seen.__setitem__("source", o[0].clone())))
    transform = gen.stft.transform

    def rec_transform(x):
        mag, phase = transform(x)
        seen["har"] = torch.cat([mag, phase], dim=1).clone()
        return mag, phase

    gen.stft.transform = rec_transform
    rec: dict = {}
    try:
        with recorded_draws(rec):
            wave = dec(asr, torch.from_numpy(f0), torch.from_numpy(n_curve), torch.from_numpy(style))
    finally:
        gen.stft.transform = transform
        for h in hooks:
            h.remove()
    assert len(rec["rand"]) == 1 and rec["randn_like"][0].shape[-1] == 9, "upstream drew differently"

    cks = {"kokoro.generator.source": seen["source"][..., 0].numpy(),
           "kokoro.generator.har": _tm(seen["har"])}
    cks.update({f"kokoro.generator.ups{i}": _tm(seen[f"ups{i}"]) for i in range(len(gen.ups))})
    cks.update({f"kokoro.generator.resblocks.{j}": _tm(seen[f"rb{j}"]) for j in range(len(gen.resblocks))})
    cks["kokoro.generator.conv_post"] = _tm(seen["post"])
    cks["kokoro.waveform"] = wave[:, 0].numpy()
    return {"inputs": {"gen_in": _tm(seen["gen_in"]), "f0": f0, "style_dec": style,
                       "rand_ini": rec["rand"][0].numpy(), "sine_noise": rec["randn_like"][0].numpy()},
            "checkpoints": cks}


@capture("signal_ops")
def signal_ops(kmodel, config):
    import torch
    rng = np.random.default_rng(7)
    gen = kmodel.decoder.generator
    # Long, fully voiced source with zero noise: 200 frames = 60000 samples (2.5 s); the phase
    # reaches ~2*pi*9*250*2.5 rad, the f32 accumulation case.
    n_long = 200
    f0_long = f0_contour(n_long, rng, unvoiced=())
    rand_ini = torch.rand(1, 9)
    zero = torch.zeros

    def randn_zero(x, *a, **k):
        return zero(x.shape, dtype=x.dtype)

    saved = torch.randn_like, torch.rand
    torch.randn_like, torch.rand = randn_zero, (lambda *a, **k: rand_ini.clone())
    try:
        up = gen.f0_upsamp(torch.from_numpy(f0_long)[:, None]).transpose(1, 2)
        src = gen.m_source(up)[0][..., 0]
    finally:
        torch.randn_like, torch.rand = saved
    # Polar iSTFT of a random spectrum (magnitudes > 0, phases in (-pi, pi]), 97 frames.
    frames = 97
    mag = rng.uniform(0.05, 2.0, (1, 11, frames)).astype(np.float32)
    phase = rng.uniform(-np.pi, np.pi, (1, 11, frames)).astype(np.float32)
    m, p = torch.from_numpy(mag), torch.from_numpy(phase)
    wave = gen.stft.inverse(m, p)[:, 0]
    spec = np.concatenate([mag, phase], axis=1).transpose(0, 2, 1)
    return {"inputs": {"f0_long": f0_long, "rand_ini_long": rand_ini.numpy(), "istft_polar_in": spec},
            "checkpoints": {"signal.source_long": src.numpy(), "signal.istft_polar": wave.numpy()}}
