"""Make pinned captures: run upstream kokoro==0.9.4 on a seeded checkpoint and save evidence.

Usage: python -m oracle.capture NAME [--config small|full] [--seed 0]

Each capture module in oracle/captures/ registers a function that takes the upstream KModel
and returns {"inputs": {...}, "checkpoints": {...}} of numpy arrays. The result is written to
fixtures/captures/NAME.CONFIG.npz and recorded in fixtures/captures/MANIFEST.json with its
SHA-256, the library versions, and a digest of the checkpoint it was made from. Captures are
made once and committed; tests verify the bytes before they compare anything.
"""
from __future__ import annotations

import argparse
import datetime
import fcntl
import hashlib
import io
import json
from pathlib import Path

import numpy as np

from oracle.captures import load_all
from oracle.checkpoints import test_checkpoint
from oracle.upstream import kmodel_from_path, load_config, versions

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "captures"
MANIFEST = FIXTURES / "MANIFEST.json"

def load_kmodel(config: str, seed: int, disable_complex: bool = False):
    """Upstream KModel on the seeded checkpoint (see kmodel_from_path), and that checkpoint's path.

    disable_complex selects upstream's CustomSTFT (real-valued, exportable to ONNX)."""
    path = test_checkpoint(config, seed)
    return kmodel_from_path(path, config, disable_complex), path


def write_capture(name: str, config: str, seed: int, data: dict, ckpt_path: Path) -> Path:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    arrays = {f"input/{k}": np.asarray(v) for k, v in data["inputs"].items()}
    arrays.update({f"checkpoint/{k}": np.asarray(v, dtype=np.float32) for k, v in data["checkpoints"].items()})
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    raw = buf.getvalue()
    out = FIXTURES / f"{name}.{config}.npz"
    out.write_bytes(raw)
    with open(FIXTURES / ".manifest.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _record(name, config, seed, raw, out, data, ckpt_path)
    return out


def _record(name, config, seed, raw, out, data, ckpt_path) -> None:
    from kcc.weights.checkpoint import checkpoint_digest, load_checkpoint
    manifest = json.loads(MANIFEST.read_text()) if MANIFEST.exists() else {}
    manifest[out.name] = {
        "sha256": hashlib.sha256(raw).hexdigest(),
        "capture": name, "config": config, "seed": seed,
        "checkpoint_digest": checkpoint_digest(load_checkpoint(ckpt_path)),
        "checkpoint_order": list(data["checkpoints"]),
        "versions": versions(),
        "backend": "pytorch", "source": "pinned_capture",
        "created": datetime.date.today().isoformat(),
    }
    MANIFEST.write_text(json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")


def main(argv=None) -> int:
    captures = load_all()
    ap = argparse.ArgumentParser(description="Make a pinned upstream capture.")
    ap.add_argument("name", choices=sorted(captures))
    ap.add_argument("--config", default="small")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    import torch
    torch.manual_seed(1234)
    kmodel, path = load_kmodel(args.config, args.seed)
    with torch.no_grad():
        data = captures[args.name](kmodel, load_config(args.config))
    out = write_capture(args.name, args.config, args.seed, data, path)
    print(f"{out} ({out.stat().st_size} B, {len(data['checkpoints'])} checkpoints)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
