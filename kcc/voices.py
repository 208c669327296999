"""Voice packs: 510 x 1 x 256 style tables, one row per phoneme count.

Upstream picks `pack[len(phonemes) - 1]` and splits the 256 floats into the decoder style
(first 128) and the prosody style (last 128). A pack loads from a torch .pt (restricted
reader, no code runs), a .npy, or one member of a .npz ('voices.npz:name'); blends are
'a:0.6,b:0.4' (weights normalised to 1; plain 'a,b' is upstream's equal-weight mean).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kcc.checkpoint import CheckpointError, load_torch_zip

PACK_ROWS, STYLE_DIM = 510, 256


class VoiceError(Exception):
    """A voice cannot be used; the message says which voice and why."""


def _load_one(spec: str, search: list[Path]) -> np.ndarray:
    path_part, member = spec, ""
    if ".npz:" in spec:
        head, member = spec.split(".npz:", 1)
        path_part = head + ".npz"
    candidates = [Path(path_part)] + [d / path_part for d in search] + [d / f"{path_part}.pt" for d in search]
    path = next((c for c in candidates if c.is_file()), None)
    if path is None:
        raise VoiceError(f"voice '{spec}': no such file (looked in {', '.join(str(d) for d in search) or 'cwd'})")
    try:
        if path.suffix == ".npy":
            arr = np.load(path, allow_pickle=False)
        elif path.suffix == ".npz":
            with np.load(path, allow_pickle=False) as z:
                if member not in z.files:
                    raise VoiceError(f"voice '{spec}': {path} has no member '{member}' (has {', '.join(z.files)})")
                arr = z[member]
        else:
            arr = load_torch_zip(path, what="voice")
    except (CheckpointError, ValueError, OSError) as exc:
        raise VoiceError(f"voice '{spec}': unreadable: {exc}")
    return validate_pack(np.asarray(arr), spec)


def validate_pack(arr: np.ndarray, name: str) -> np.ndarray:
    if not isinstance(arr, np.ndarray) or arr.dtype.kind != "f":
        raise VoiceError(f"voice '{name}': expected a float array, got {type(arr).__name__} {getattr(arr, 'dtype', '')}")
    if arr.ndim == 2:
        arr = arr[:, None, :]
    if arr.ndim != 3 or arr.shape[1] != 1 or arr.shape[2] != STYLE_DIM or arr.shape[0] < 1:
        raise VoiceError(f"voice '{name}': shape {arr.shape}, expected ({PACK_ROWS}, 1, {STYLE_DIM})")
    if not np.isfinite(arr).all():
        bad = int(np.argwhere(~np.isfinite(arr))[0][0])
        raise VoiceError(f"voice '{name}': non-finite values (first in row {bad})")
    return arr.astype(np.float32)


def load_voice(spec: str, search: list[Path] | None = None) -> np.ndarray:
    """A pack from 'path', 'name' (searched in `search`), or a blend 'a:0.6,b:0.4'."""
    search = search or []
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    if not parts:
        raise VoiceError("voice: empty voice specification")
    packs, weights = [], []
    for part in parts:
        name, weight = part, 1.0
        head, sep, tail = part.rpartition(":")
        if sep and head:
            try:
                weight, name = float(tail), head
            except ValueError:
                pass  # 'file.npz:member' without a weight
        if not np.isfinite(weight) or weight <= 0:
            raise VoiceError(f"voice '{part}': blend weight must be a positive number")
        packs.append(_load_one(name, search))
        weights.append(weight)
    rows = {p.shape[0] for p in packs}
    if len(rows) != 1:
        raise VoiceError(f"voice '{spec}': blended packs have different row counts {sorted(rows)}")
    w = np.asarray(weights, dtype=np.float64) / sum(weights)
    return np.tensordot(w, np.stack(packs).astype(np.float64), axes=1).astype(np.float32)


def style_for(pack: np.ndarray, n_phonemes: int) -> np.ndarray:
    """The [1, 256] ref_s row upstream uses for an utterance of n phonemes."""
    if n_phonemes < 1:
        raise VoiceError("voice: an utterance needs at least one phoneme")
    if n_phonemes > pack.shape[0]:
        raise VoiceError(f"voice: {n_phonemes} phonemes exceed the pack's {pack.shape[0]} rows")
    return pack[n_phonemes - 1].reshape(1, STYLE_DIM).copy()
