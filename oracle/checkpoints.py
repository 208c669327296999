"""Seeded test checkpoints, built once per (config, seed) into the cache and reused."""
from __future__ import annotations

from pathlib import Path

from kcc.files import cache_dir
from oracle.build_checkpoint import BUILDER_VERSION, build_checkpoint


def checkpoint_cache() -> Path:
    p = cache_dir() / "checkpoints"
    p.mkdir(parents=True, exist_ok=True)
    return p


def test_checkpoint(config: str = "small", seed: int = 0) -> Path:
    """Path of the seeded checkpoint for `config`, building it (upstream modules) if absent."""
    path = checkpoint_cache() / f"kokoro-{config}-seed{seed}-b{BUILDER_VERSION}.pth"
    if not path.exists():
        build_checkpoint(config, seed, path)
    return path
