"""Export upstream KModel (seeded test weights) to ONNX with torch.onnx, for the ORT baseline.

Usage: python bench/export_onnx.py --config full -o .cache/kokoro-full.onnx
Same weights as the kcc run (the seeded checkpoint); the legacy TorchScript exporter handles
the data-dependent alignment (repeat_interleave) with dynamic token and frame axes.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def export(config: str, out: Path, seed: int = 0) -> Path:
    import torch
    from oracle.capture import load_kmodel
    from oracle.upstream import kokoro_modules
    model_mod, _, _ = kokoro_modules()
    kmodel, _ = load_kmodel(config, seed, disable_complex=True)
    wrapper = model_mod.KModelForONNX(kmodel).eval()
    ids = torch.randint(1, 170, (1, 24))
    ids[0, 0] = ids[0, -1] = 0
    style = torch.randn(1, 256) * 0.1
    speed = torch.tensor([1.0])
    out.parent.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(wrapper, (ids, style, speed), str(out), input_names=["input_ids", "style", "speed"],
                      output_names=["waveform", "duration"], opset_version=17, dynamo=False,
                      dynamic_axes={"input_ids": {1: "tokens"}, "waveform": {0: "samples"}})
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", default="full")
    ap.add_argument("-o", "--out", required=True)
    a = ap.parse_args()
    print(export(a.config, Path(a.out)))
