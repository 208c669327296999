"""Build a kokoro-v1_0.pth-layout checkpoint from the upstream modules with seeded random weights.

Usage: python -m oracle.build_checkpoint --config small|full|PATH --seed 0 -o model.pth

The layout is the real one: a dict of five state dicts (bert, bert_encoder, predictor,
text_encoder, decoder), keys prefixed 'module.' as in the released file, weight-normed layers
stored as weight_g / weight_v. Default initialisation leaves every norm at gamma=1, beta=0 and
every Snake alpha at 1, which would hide a swapped or ignored parameter, so those are perturbed
from the same seed. Same torch version + same seed -> bit-identical tensors.
"""
from __future__ import annotations

import os

import argparse
from pathlib import Path

from oracle.upstream import kokoro_modules, load_config

# Bump when the weights a seed produces change, so cached checkpoints are rebuilt.
BUILDER_VERSION = 4


def build_modules(config: dict, seed: int):
    """Instantiate exactly what KModel.__init__ builds, seeded, in eval mode."""
    import torch
    from transformers import AlbertConfig

    _, modules, istftnet = kokoro_modules()
    torch.manual_seed(seed)
    bert = modules.CustomAlbert(AlbertConfig(vocab_size=config["n_token"], **config["plbert"]))
    parts = {
        "bert": bert,
        "bert_encoder": torch.nn.Linear(bert.config.hidden_size, config["hidden_dim"]),
        "predictor": modules.ProsodyPredictor(
            style_dim=config["style_dim"], d_hid=config["hidden_dim"], nlayers=config["n_layer"],
            max_dur=config["max_dur"], dropout=config["dropout"]),
        "text_encoder": modules.TextEncoder(
            channels=config["hidden_dim"], kernel_size=config["text_encoder_kernel_size"],
            depth=config["n_layer"], n_symbols=config["n_token"]),
        "decoder": istftnet.Decoder(
            dim_in=config["hidden_dim"], style_dim=config["style_dim"], dim_out=config["n_mels"],
            **config["istftnet"]),
    }
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for part in parts.values():
            part.eval()
            for name, p in part.named_parameters():
                leaf = name.split(".")[-1]
                if leaf in ("gamma", "beta") or "LayerNorm" in name or ".norm." in name \
                        or "layer_norm" in name:
                    if leaf in ("weight", "gamma"):
                        p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
                    elif leaf in ("bias", "beta"):
                        p.copy_(0.1 * torch.randn(p.shape, generator=gen))
                elif leaf == "weight_g":
                    p.mul_(0.8 + 0.4 * torch.rand(p.shape, generator=gen))
                elif "alpha" in name:
                    p.copy_(0.5 + torch.rand(p.shape, generator=gen))
        # Random heads are uninformative: durations would be ~25 frames for every token and F0
        # ~0 Hz (all unvoiced). Shift them to speech-like ranges (~2-12 frames a token, F0 near
        # 150 Hz with per-frame variation) so rounding and the voiced source path are exercised.
        dur = parts["predictor"].duration_proj.linear_layer
        dur.weight.mul_(6.0)
        dur.bias.sub_(3.0)
        f0 = parts["predictor"].F0_proj
        f0.weight.mul_(40.0)
        f0.bias.add_(150.0)
    return parts


def state_dicts(parts) -> dict:
    return {name: {f"module.{k}": v.detach().clone().contiguous() for k, v in part.state_dict().items()}
            for name, part in parts.items()}


def build_checkpoint(config_name: str, seed: int, out: str | Path) -> Path:
    import torch

    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    parts = build_modules(load_config(config_name), seed)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")     # two builders (pytest -n 2) never share one
    torch.save(state_dicts(parts), tmp)
    tmp.replace(out)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="small", help="small, full, or a config JSON path")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--out", required=True)
    args = ap.parse_args(argv)
    print(build_checkpoint(args.config, args.seed, args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
