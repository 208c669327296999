"""Voice packs: 510 x 1 x 256 style tables, one row per phoneme count.

Upstream picks `pack[len(phonemes) - 1]` and splits the 256 floats into the decoder style
(first 128) and the prosody style (last 128). A pack loads from a torch .pt (restricted
reader, no code runs), a .npy, or one member of a .npz ('voices.npz:name'); blends are
'a:0.6,b:0.4' (weights normalised to 1; plain 'a,b' is upstream's equal-weight mean).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kcc.model import kokoro
from kcc.weights.bounded_read import npz_members
from kcc.weights.checkpoint import CheckpointError, load_torch_zip, read_npy, read_npz

PACK_ROWS, STYLE_DIM = kokoro.VOICE_PACK_ROWS, kokoro.REF_S_DIM   # a pack: 510 rows of ref_s


class VoiceError(Exception):
    """A voice cannot be used; the message says which voice and why."""


# Kokoro's voice names start with a language letter and a gender letter ('jf_alpha': Japanese,
# female), the convention of upstream's VOICES.md.
_LANG_OF = {"a": "en-us", "b": "en-gb", "j": "ja", "z": "zh", "e": "es", "f": "fr-fr", "h": "hi", "i": "it",
            "p": "pt-br"}
_GENDER_OF = {"f": "female", "m": "male"}
DEFAULT_VOICE = "jf_alpha"          # one of the real model's voices; speaks English well too


@dataclass(frozen=True)
class VoiceInfo:
    name: str
    language: str                    # e.g. 'ja', 'en-us'; '' when the name does not say
    gender: str                      # 'female' / 'male' / ''
    spec: str                        # what load_voice loads: 'path.npz:member' or a file path
    origin: str                      # 'real model' or the directory it was found in


def _info(name: str, spec: str, origin: str) -> VoiceInfo:
    lang = _LANG_OF.get(name[:1], "") if len(name) > 2 and name[2] == "_" else ""
    gender = _GENDER_OF.get(name[1:2], "") if lang else ""
    return VoiceInfo(name, lang, gender, spec, origin)


def voice_catalog(search: list[Path] | tuple = (), real: bool = True) -> dict[str, VoiceInfo]:
    """Every voice known by name: the real model's packs (fetched on first use) and, from each
    directory in `search`, its .pt / .npy files (by stem) and the members of its .npz files.
    A directory's voice shadows a real one of the same name."""
    out: dict[str, VoiceInfo] = {}
    if real:
        from kcc.weights.real_model import fetch
        voices = fetch()["voices"]
        for member in npz_members(voices):
            out[member] = _info(member, f"{voices}:{member}", "real model")
    for d in search:
        d = Path(d)
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir()):
            if f.suffix in (".pt", ".npy") and f.is_file():
                out[f.stem] = _info(f.stem, str(f), str(d))
            elif f.suffix == ".npz" and f.is_file():
                try:
                    members = npz_members(f)
                except CheckpointError as exc:   # listed, not fatal: the other voices still work
                    warnings.warn(f"voices: skipping {f}: {exc}", stacklevel=2)
                    continue
                for m in members:
                    out[m] = _info(m, f"{f}:{m}", str(d))
    return out


def _is_name(spec: str) -> bool:
    return bool(spec) and all(c.isalnum() or c in "_-" for c in spec)


def _is_file(p: Path) -> bool:
    """p.is_file(), False where the name cannot be a path (over NAME_MAX: ENAMETOOLONG)."""
    try:
        return p.is_file()
    except OSError:
        return False


def load_pack(spec: str, search: list[Path] | tuple = ()) -> np.ndarray:
    """One pack from 'path', 'file.npz:member' or 'name' (searched in `search`): no blend syntax, so
    a path may hold commas and colons (the server's catalog entries; blends are VoiceSet's)."""
    if _is_name(spec) and not _is_file(Path(spec)):
        found = voice_catalog(search).get(spec)
        if found is not None:
            spec = found.spec
    path_part, member = spec, ""
    if ".npz:" in spec:
        head, member = spec.split(".npz:", 1)
        path_part = head + ".npz"
    candidates = [Path(path_part)] + [d / path_part for d in search] + [d / f"{path_part}.pt" for d in search]
    path = next((c for c in candidates if _is_file(c)), None)
    if path is None:
        raise VoiceError(f"voice '{spec}': no such file (looked in {', '.join(str(d) for d in search) or 'cwd'})")
    try:
        # The capped readers: np.load sizes its allocation from the file's header first.
        if path.suffix == ".npy":
            arr = read_npy(path, what="voice")
        elif path.suffix == ".npz":
            arr = read_npz(path, what="voices", members=[member])[member]
        else:
            arr = load_torch_zip(path, what="voice")
    except (CheckpointError, ValueError, OSError) as exc:
        raise VoiceError(f"voice '{spec}': unreadable: {exc}")
    return validate_pack(np.asarray(arr), spec)


# Real Kokoro style vectors stay within |x| < 20 (the Japanese packs within 3). The bound refuses
# what cannot be a style vector (1e30, bytes read as the wrong type: half of random float32 bit
# patterns exceed it) before any synthesis. It cannot promise finite audio: measured on the real
# model, jf_alpha scaled to a peak of 5 (3x) or negated already overflows to inf / NaN audio,
# so synthesis must check its own output.
MAX_STYLE_ABS = 1e3


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
    big = np.abs(arr) > MAX_STYLE_ABS
    if big.any():
        row = int(np.argwhere(big)[0][0])
        raise VoiceError(f"voice '{name}': |value| up to {float(np.abs(arr).max()):.3g} (first in row {row}), "
                         f"beyond the {MAX_STYLE_ABS:g} a style vector may have (real packs stay within 20)")
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
        packs.append(load_pack(name, search))
        weights.append(weight)
    return blend_packs(packs, weights, spec)


def blend_packs(packs: list[np.ndarray], weights: list[float], what: str) -> np.ndarray:
    """The weighted mean of packs of one row count (weights normalised here), in f64, as f32."""
    rows = {p.shape[0] for p in packs}
    if len(rows) != 1:
        raise VoiceError(f"voice '{what}': blended packs have different row counts {sorted(rows)}")
    w = np.asarray(weights, dtype=np.float64) / sum(weights)
    return np.tensordot(w, np.stack(packs).astype(np.float64), axes=1).astype(np.float32)


def style_for(pack: np.ndarray, n_phonemes: int) -> np.ndarray:
    """The [1, 256] ref_s row upstream uses for an utterance of n phonemes."""
    if n_phonemes < 1:
        raise VoiceError("voice: an utterance needs at least one phoneme")
    if n_phonemes > pack.shape[0]:
        raise VoiceError(f"voice: {n_phonemes} phonemes exceed the pack's {pack.shape[0]} rows")
    return pack[n_phonemes - 1].reshape(1, STYLE_DIM).copy()
