"""Captures of the decoder (istftnet.Decoder.forward up to, not including, its generator).

The decoder runs on seeded inputs of a realistic scale rather than the whole model: asr
[1, 512, F] ~ N(0, 0.5^2), an F0 curve in Hz (voiced 90..260 Hz with unvoiced zero runs),
N ~ N(0, 0.3^2), style ~ N(0, 0.2^2). Upstream's own Decoder.forward runs with its generator
swapped for a stub that keeps the generator's input; forward hooks keep each stage. Everything
is saved time-major ([B, T, C]; f0 and n stay [1, 2F] rows).

The decoder needs hidden_dim 512 (its asr_res is fixed at 512 -> 64 while encode takes
hidden_dim + 2 channels); both shipped configs have it, and their decoders are the same size.
"""
from __future__ import annotations

import numpy as np

from oracle.captures import capture

FRAMES = 10   # F: decode blocks are [1, F, 1024]; keeps the fixture ~0.5 MB


def decoder_inputs(frames: int = FRAMES, seed: int = 5):
    rng = np.random.default_rng(seed)
    t = np.arange(2 * frames)
    f0 = 175.0 + 85.0 * np.sin(2 * np.pi * t / (1.7 * frames)) + rng.normal(0, 4.0, 2 * frames)
    f0[(t % 7) >= 5] = 0.0                                     # unvoiced stretches
    return {
        "asr": (rng.standard_normal((1, frames, 512)) * 0.5).astype(np.float32),       # time-major
        "f0": f0[None].astype(np.float32),
        "n": (rng.standard_normal((1, 2 * frames)) * 0.3).astype(np.float32),
        "style_dec": (rng.standard_normal((1, 128)) * 0.2).astype(np.float32),
    }


@capture("decoder")
def decoder(kmodel, config):
    import torch
    if config["hidden_dim"] != 512:
        raise ValueError(f"the decoder capture needs hidden_dim 512 (asr_res is 512 -> 64), "
                         f"this config has {config['hidden_dim']}")
    dec = kmodel.decoder
    ins = decoder_inputs()
    kept: dict[str, np.ndarray] = {}

    def keep(name):
        def hook(_mod, _inp, out):
            kept[name] = out.detach().transpose(1, 2).contiguous().numpy()   # [B, C, T] -> [B, T, C]
        return hook

    class KeepInput(torch.nn.Module):
        def forward(self, x, s, f0):
            kept["kokoro.decoder.generator_input"] = x.detach().transpose(1, 2).contiguous().numpy()
            return x

    hooks = [dec.F0_conv.register_forward_hook(keep("kokoro.decoder.f0_conv")),
             dec.N_conv.register_forward_hook(keep("kokoro.decoder.n_conv")),
             dec.encode.register_forward_hook(keep("kokoro.decoder.encode")),
             dec.asr_res.register_forward_hook(keep("kokoro.decoder.asr_res"))]
    hooks += [b.register_forward_hook(keep(f"kokoro.decoder.decode.{i}")) for i, b in enumerate(dec.decode)]
    generator = dec.generator
    dec.generator = KeepInput()
    try:
        dec(torch.from_numpy(ins["asr"]).transpose(1, 2), torch.from_numpy(ins["f0"]),
            torch.from_numpy(ins["n"]), torch.from_numpy(ins["style_dec"]))
    finally:
        dec.generator = generator
        for h in hooks:
            h.remove()
    order = ["kokoro.decoder.f0_conv", "kokoro.decoder.n_conv", "kokoro.decoder.encode", "kokoro.decoder.asr_res",
             *[f"kokoro.decoder.decode.{i}" for i in range(len(dec.decode))], "kokoro.decoder.generator_input"]
    return {"inputs": ins, "checkpoints": {k: kept[k] for k in order}}
