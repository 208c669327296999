"""Voice packs: 510 x 1 x 256 style tables, one row per phoneme count.

Upstream picks `pack[len(phonemes) - 1]` and splits the 256 floats into the decoder style
(first 128) and the prosody style (last 128). A pack loads from a torch .pt (restricted
reader, no code runs), a .npy, a raw float32 .bin (kokoro-js's format, the official voices'),
or one member of a .npz ('voices.npz:name'). Names come from the catalog: the 54 official
voices (kcc.weights.official_voices; without them, the real model's 5 Japanese ones) and the
--voices-dir directories. One blend grammar for every front-end (parse_blend): 'a:0.6,b:0.4',
'a(2)+b(1)', plain 'a,b' (upstream's equal-weight mean), at most MAX_BLEND_PARTS voices.
"""
from __future__ import annotations

import difflib
import json
import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kcc.model import kokoro
from kcc.speech.g2p.scripts import detect_language
from kcc.speech.languages import DEFAULT_LANGUAGE, default_voice, pick_language, voice_gender, voice_language
from kcc.weights import official_voices, real_model
from kcc.weights.bounded_read import npz_members
from kcc.weights.checkpoint import CheckpointError, load_torch_zip, read_npy, read_npz

PACK_ROWS, STYLE_DIM = kokoro.VOICE_PACK_ROWS, kokoro.REF_S_DIM   # a pack: 510 rows of ref_s


class VoiceError(Exception):
    """A voice cannot be used; the message says which voice and why."""


class UnknownVoiceError(VoiceError):
    """A voice named that is neither in the catalog nor a file; the message offers the closest names."""


class ImplausibleVoiceError(VoiceError):
    """A pack of the right shape and range that is not a voice (negated, constant, ...)."""


# Every front-end's cap on the voices in one blend: each part is a 0.5 MiB pack in f64 while blending
# (uncapped, a 1500-part line of 13 KB took 3.1 GB).
MAX_BLEND_PARTS = 8
MAX_BLEND_WEIGHT = 1e6               # weights are normalised; a bound keeps their sum finite
MAX_SPEC_CHARS = 600
# Spoken when the official voices are missing and the language's own voice with them: the real
# model's Japanese voice, which speaks English well too.
FALLBACK_VOICE = "jf_alpha"
OFFICIAL_ORIGIN = f"official ({official_voices.TABLE.package})"


@dataclass(frozen=True)
class VoiceInfo:
    name: str
    language: str                    # e.g. 'ja', 'en-us'; '' when the name does not say
    gender: str                      # 'female' / 'male' / ''
    spec: str                        # what load_voice loads: 'path.npz:member' or a file path
    origin: str                      # 'official (kokoro-js@...)', 'real model', or its directory


def _info(name: str, spec: str, origin: str) -> VoiceInfo:
    return VoiceInfo(name, voice_language(name), voice_gender(name), spec, origin)


def builtin_voices() -> dict[str, VoiceInfo]:
    """The 54 official voices (fetched on first use); the real model's 5 Japanese voices when they
    cannot be had (kcc.weights.official_voices says why, once)."""
    official = official_voices.official_voices()
    if official is not None:
        return {name: _info(name, str(path), OFFICIAL_ORIGIN) for name, path in sorted(official.items())}
    voices = real_model.fetch()["voices"]
    return {m: _info(m, f"{voices}:{m}", "real model") for m in npz_members(voices)}


def voice_catalog(search: list[Path] | tuple = (), real: bool = True) -> dict[str, VoiceInfo]:
    """Every voice known by name: the built-in voices (builtin_voices) and, from each directory in
    `search`, its .pt / .npy / .bin files (by stem) and the members of its .npz files.
    A directory's voice shadows a built-in one of the same name."""
    out: dict[str, VoiceInfo] = dict(builtin_voices()) if real else {}
    for d in search:
        d = Path(d)
        if not d.is_dir():
            continue
        for f in sorted(d.iterdir()):
            if f.suffix in (".pt", ".npy", ".bin") and f.is_file():
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


def unknown_voice(spec: str, search: list[Path] | tuple = (), catalog: dict | None = None) -> UnknownVoiceError:
    """The error for a voice that is nowhere: a name is named as an unknown voice with the closest
    known names (difflib); a path (it has a '/' or an extension) as a file that does not exist."""
    where = ", ".join(str(d) for d in search)
    if not _is_name(spec):
        return UnknownVoiceError(f"voice file '{spec}' does not exist"
                                 + (f" (nor in {where})" if where else ""))
    names = list(catalog if catalog is not None else voice_catalog(search))
    close = difflib.get_close_matches(spec, names, n=3, cutoff=0.6) or \
        difflib.get_close_matches(spec.lower(), names, n=3, cutoff=0.4)
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    return UnknownVoiceError(f"unknown voice '{spec}'{hint} (`kcc voices` lists the {len(names)} voices; "
                             "a .pt/.npy/.bin/.npz path works too)")


def load_pack(spec: str, search: list[Path] | tuple = ()) -> np.ndarray:
    """One pack from 'path', 'file.npz:member' or 'name' (searched in `search`): no blend syntax, so
    a path may hold commas and colons (the server's catalog entries; blends are VoiceSet's)."""
    catalog = None
    if _is_name(spec) and not _is_file(Path(spec)):
        catalog = voice_catalog(search)
        found = catalog.get(spec)
        if found is not None:
            spec = found.spec
    path_part, member = spec, ""
    if ".npz:" in spec:
        head, member = spec.split(".npz:", 1)
        path_part = head + ".npz"
    candidates = [Path(path_part)] + [d / path_part for d in search] + [d / f"{path_part}.pt" for d in search]
    path = next((c for c in candidates if _is_file(c)), None)
    if path is None:
        raise unknown_voice(spec, search, catalog)
    try:
        # The capped readers: np.load sizes its allocation from the file's header first.
        if path.suffix == ".npy":
            arr = read_npy(path, what="voice")
        elif path.suffix == ".bin":
            arr = _read_bin(path)
        elif path.suffix == ".npz":
            arr = read_npz(path, what="voices", members=[member])[member]
        else:
            arr = load_torch_zip(path, what="voice")
    except (CheckpointError, ValueError, OSError) as exc:
        raise VoiceError(f"voice '{spec}': unreadable: {exc}")
    return check_plausible(validate_pack(np.asarray(arr), spec), spec)


_BIN_BYTES = PACK_ROWS * STYLE_DIM * 4


def _read_bin(path: Path) -> np.ndarray:
    """kokoro-js's raw little-endian float32 pack; an official voice in the cache is checked
    against its pinned digest first (once per process)."""
    if path.parent.resolve() == official_voices.voices_dir().resolve():
        try:
            official_voices.verify(path)
        except official_voices.VoiceFetchError as exc:
            raise VoiceError(str(exc)) from None
    with open(path, "rb") as fh:
        data = fh.read(_BIN_BYTES + 1)
    if len(data) != _BIN_BYTES:
        raise VoiceError(f"voice '{path}': {len(data) if len(data) <= _BIN_BYTES else 'more than ' + str(_BIN_BYTES)} "
                         f"bytes, a .bin pack is {_BIN_BYTES} (float32 {PACK_ROWS} x 1 x {STYLE_DIM})")
    return np.frombuffer(data, dtype="<f4").reshape(PACK_ROWS, 1, STYLE_DIM).copy()


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


_PAREN = re.compile(r"(.*?)\s*\(\s*([^()]*?)\s*\)")


def parse_blend(spec: str, search: list[Path] | tuple = ()) -> list[tuple[str, float]]:
    """The one voice grammar of every front-end -> [(voice, weight), ...], weights as given.

    A voice is a name or a path ('file.npz:member' too); a blend joins voices with ',' or '+',
    each optionally weighted 'name:0.6' or 'name(0.6)'; no weight is 1 (upstream's plain mean).
    A spec that is an existing file is one voice, whatever it holds."""
    spec = spec.strip() if isinstance(spec, str) else ""
    if not spec:
        raise VoiceError("voice: empty voice specification")
    if len(spec) > MAX_SPEC_CHARS:
        raise VoiceError(f"voice: {len(spec)} characters, more than the {MAX_SPEC_CHARS} a name or a blend may have")
    if Path(spec).is_file():
        return [(spec, 1.0)]
    pieces = re.split(r"[,+]", spec)
    if len(pieces) > MAX_BLEND_PARTS:
        raise VoiceError(f"voice: a blend has at most {MAX_BLEND_PARTS} voices, got {len(pieces)}")
    out: list[tuple[str, float]] = []
    for piece in (p.strip() for p in pieces):
        m = _PAREN.fullmatch(piece)
        head, sep, tail = piece.rpartition(":")
        if m:
            name, weight = m.group(1).strip(), _weight(m.group(2), piece)
        elif sep and head and _is_number(tail):
            name, weight = head.strip(), _weight(tail, piece)
        else:
            name, weight = piece, 1.0     # 'file.npz:member' has no weight
        if not name:
            raise VoiceError(f"voice {spec!r}: an empty part in the blend")
        out.append((name, weight))
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _weight(text: str, piece: str) -> float:
    try:
        w = float(text)
    except ValueError:
        w = float("nan")
    if not (np.isfinite(w) and 0 < w <= MAX_BLEND_WEIGHT):
        raise VoiceError(f"voice {piece!r}: a blend weight must be a number in (0, {MAX_BLEND_WEIGHT:g}]")
    return w


def load_voice(spec: str, search: list[Path] | None = None) -> np.ndarray:
    """A pack from 'path', 'name' (searched in `search`), or a blend (parse_blend)."""
    search = search or []
    parts = parse_blend(spec, search)
    if len(parts) == 1:
        return load_pack(parts[0][0], search)
    return blend_packs([load_pack(name, search) for name, _ in parts], [w for _, w in parts], spec)


def blend_packs(packs: list[np.ndarray], weights: list[float], what: str) -> np.ndarray:
    """The weighted mean of packs of one row count (weights normalised here), in f64, as f32;
    refused unless finite and plausible (check_plausible)."""
    rows = {p.shape[0] for p in packs}
    if len(rows) != 1:
        raise VoiceError(f"voice '{what}': blended packs have different row counts {sorted(rows)}")
    if len(packs) > MAX_BLEND_PARTS:
        raise VoiceError(f"voice '{what}': a blend has at most {MAX_BLEND_PARTS} voices, got {len(packs)}")
    w = np.asarray(weights, dtype=np.float64)
    with np.errstate(over="ignore"):
        total = float(w.sum())
    if not (np.isfinite(w).all() and (w > 0).all() and np.isfinite(total)):
        raise VoiceError(f"voice '{what}': blend weights must be positive finite numbers with a finite sum")
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.tensordot(w / total, np.stack(packs).astype(np.float64), axes=1).astype(np.float32)
    if not np.isfinite(out).all():
        raise VoiceError(f"voice '{what}': the blend is not finite")
    return check_plausible(out, what)


# -- what a voice looks like -------------------------------------------------------------------
# Measured on the 54 official packs (kcc/data/voice_style_mean.json holds their mean row, checked
# against the cache by tests/test_voices_official.py):
#  - |value| <= 3.19 everywhere (af_kore); jf_alpha scaled 3x (peak 5.1) overflows to inf / NaN
#    audio on the real model, so PLAUSIBLE_ABS = 4.5: 41% above the largest real value.
#  - each row's std over its 256 values >= 0.134 (pf_dora); a constant or zero row has 0 and
#    speaks silence or a hum: ROW_STD_FLOOR = 0.02 (6.7x below the real minimum; kcc's seeded
#    stand-in pack, 0.1 * N(0, 1), has >= 0.087).
#  - the correlation of a pack's mean row with the 54 voices' mean row is 0.51..0.77 (tebukuro ..
#    heart); a negated voice has -0.51..-0.77 (clipped noise), a random stand-in ~N(0, 1/16):
#    MIN_CORRELATION = -0.3 refuses every negated voice with a 0.21 margin and a random one at
#    4.8 sigma, and keeps every real one with a 0.81 margin.
PLAUSIBLE_ABS = 4.5
ROW_STD_FLOOR = 0.02
MIN_CORRELATION = -0.3
_STYLE_MEAN_PATH = Path(__file__).resolve().parents[1] / "data" / "voice_style_mean.json"
_style_mean: np.ndarray | None = None


def style_mean() -> np.ndarray:
    global _style_mean
    if _style_mean is None:
        _style_mean = np.asarray(json.loads(_STYLE_MEAN_PATH.read_text())["mean"], dtype=np.float64)
    return _style_mean


def check_plausible(pack: np.ndarray, name: str) -> np.ndarray:
    """`pack` if it looks like a Kokoro voice (the envelope above), else ImplausibleVoiceError."""
    rows = pack.reshape(pack.shape[0], -1).astype(np.float64)
    peak = float(np.abs(rows).max())
    if peak > PLAUSIBLE_ABS:
        raise ImplausibleVoiceError(f"voice '{name}': |value| up to {peak:.3g}, real voices stay within 3.2 "
                                    f"(the limit is {PLAUSIBLE_ABS:g}: louder packs overflow the model)")
    row_std = rows.std(axis=1)
    flat = int(np.argmin(row_std))
    if row_std[flat] < ROW_STD_FLOOR:
        raise ImplausibleVoiceError(f"voice '{name}': row {flat} is (nearly) constant (std {row_std[flat]:.3g}; real "
                                    f"voices have >= 0.13): not a voice")
    mean_row = rows.mean(axis=0)
    corr = float(np.corrcoef(mean_row, style_mean())[0, 1]) if mean_row.std() > 0 else 0.0
    if not corr >= MIN_CORRELATION:
        raise ImplausibleVoiceError(f"voice '{name}': its style runs against every real voice's (correlation "
                                    f"{corr:.2f}; real voices 0.51..0.77, a negated voice below -0.5): not a voice")
    return pack


def default_voice_for(language: str, offered=None) -> str:
    """The voice spoken when none is asked for: upstream's voice for `language` ('' / 'auto': the
    default language's); when `offered` (names; None: the built-in voices) lacks it, the first
    offered voice whose name says that language, else FALLBACK_VOICE."""
    name = default_voice(language)
    names = offered if offered is not None else builtin_voices()
    if name in names:
        return name
    code = voice_language(name)
    return next((n for n in sorted(names) if voice_language(n) == code), FALLBACK_VOICE)


def spec_language(spec: str) -> str:
    """The language a voice spec names: its heaviest voice's ('' when the name says none)."""
    try:
        parts = parse_blend(spec)
    except VoiceError:
        return ""
    best = max(parts, key=lambda p: p[1])[0] if parts else ""
    return voice_language(best.rpartition(".npz:")[2] if ".npz:" in best else Path(best).stem)


def speaking(voice, language: str, text: str = "") -> tuple[str, object]:
    """(the G2P's language, the voice) for a text, as every front-end picks them: no voice: the
    default of the language (asked for, else detected from the text); a voice and no language
    ('auto'): the voice's language reads Latin-script text (`--voice bm_george` speaks British
    English; a blend, its heaviest voice's), the script decides the rest."""
    auto = language in ("", "auto", None)
    if voice is None:
        return language, default_voice_for(detect_language(text, DEFAULT_LANGUAGE) if auto else language)
    if auto and isinstance(voice, str):
        return pick_language(text, spec_language(voice), "auto"), voice
    return language, voice


def style_for(pack: np.ndarray, n_phonemes: int) -> np.ndarray:
    """The [1, 256] ref_s row upstream uses for an utterance of n phonemes."""
    if n_phonemes < 1:
        raise VoiceError("voice: an utterance needs at least one phoneme")
    if n_phonemes > pack.shape[0]:
        raise VoiceError(f"voice: {n_phonemes} phonemes exceed the pack's {pack.shape[0]} rows")
    return pack[n_phonemes - 1].reshape(1, STYLE_DIM).copy()
