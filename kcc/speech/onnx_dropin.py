"""What kcc.Kokoro needs to answer kokoro-onnx's calls: its language codes (espeak-ng's), its
voices file (voices-v1.0.bin: an npz of float32 (510, 1, 256) packs), phonemes given in place
of text (create(..., is_phonemes=True)) and the calls kcc cannot honour, refused by name."""
from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kcc.speech.g2p.base import load_vocab, words_from_phonemes
from kcc.speech.voices import VoiceError, load_voice, validate_pack, voice_catalog

# espeak-ng codes kokoro-onnx's examples pass that kcc's language table does not spell.
_ESPEAK_CODES = {"cmn": "zh", "cmn-latn-pinyin": "zh", "en": "en-us"}


class KokoroOnnxError(TypeError):
    """A kokoro-onnx call with no kcc equivalent (an onnxruntime session, a provider); the
    message names what to do in kcc instead."""


FROM_SESSION = ("kcc.Kokoro.from_session: kcc runs Kokoro compiled to C, not an onnxruntime session. "
                "Pass the session's model file instead: kcc.Kokoro('kokoro-v1.0.onnx', 'voices-v1.0.bin'), "
                "and threads=N for its intra-op thread count (providers do not apply: kcc runs on the CPU)")


def onnx_language(lang: str) -> str:
    """kokoro-onnx's lang ('en-us', 'fr-fr', 'cmn', 'ja', ...) -> kcc's code: the espeak-ng codes
    kcc's table lacks are mapped, every other code goes to kcc's own check unchanged (which
    names the codes there are)."""
    return _ESPEAK_CODES.get(str(lang).strip().lower(), lang)


def read_voice_file(path: str | Path) -> dict[str, np.ndarray]:
    """kokoro-onnx's voices file: name -> float32 (510, 1, 256) pack, each checked."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Voices file not found at {path} (kcc.Kokoro() with no voices_path speaks kcc's "
                                "54 built-in voices)")
    try:
        with np.load(path, allow_pickle=False) as doc:
            if not isinstance(doc, np.lib.npyio.NpzFile):
                raise VoiceError(f"{path}: a voices file is an .npz of named packs (kokoro-onnx's voices-v1.0.bin); "
                                 "this holds one bare array")
            return {name: validate_pack(np.asarray(doc[name], dtype=np.float32)
                                        if doc[name].dtype.kind == "f" else doc[name], f"{path.name}:{name}")
                    for name in doc.files}
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        if isinstance(exc, VoiceError):
            raise
        raise VoiceError(f"{path}: not a voices file (an .npz of (510, 1, 256) float32 packs): {exc}") from None


def read_vocab_config(config: dict | str | Path | None) -> dict[str, int] | None:
    """kokoro-onnx's vocab_config (a config.json path, or its dict): its 'vocab', checked against
    the model's: a symbol the model maps to another id (another model's vocabulary) is refused."""
    if config is None:
        return None
    if not isinstance(config, dict):
        with open(config, encoding="utf-8") as fh:             # FileNotFoundError naming it, as kokoro-onnx
            config = json.load(fh)
    vocab = config.get("vocab") if isinstance(config, dict) else None
    if not isinstance(vocab, dict):
        raise KokoroOnnxError("vocab_config: expected a config.json with a 'vocab' table (symbol -> id)")
    model = load_vocab()
    wrong = next((sym for sym, i in vocab.items() if model.get(sym) != i), None)
    if wrong is not None:
        raise KokoroOnnxError(f"vocab_config: symbol {wrong!r} is id {vocab[wrong]} there but "
                              f"{model.get(wrong)} in Kokoro v1.0, which kcc speaks; leave vocab_config out")
    return dict(vocab)


class CatalogVoices(Mapping):
    """kokoro-onnx's Kokoro.voices (an npz: name -> pack) over kcc's voices when no voices file
    was given: each pack is read when asked for, not all 54 at once."""

    def __init__(self, search):
        self._search = list(search)

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in voice_catalog(self._search):
            raise KeyError(name)
        return load_voice(name, self._search)

    def __iter__(self):
        return iter(sorted(voice_catalog(self._search)))

    def __len__(self) -> int:
        return len(voice_catalog(self._search))


@dataclass(frozen=True)
class Timing:
    """kokoro-onnx's Timing: when a phoneme is spoken, in seconds from the start of the audio."""
    phoneme: str
    start: float
    end: float


def phoneme_timings(chunks, vocab: dict[str, int], sample_rate: int, shift: int = 0,
                    length: int | None = None) -> list["Timing"]:
    """One Timing per spoken phoneme (the symbols in the vocabulary, spaces included) of each
    chunk (kcc.api.SpeechChunk: its durations have the two boundary tokens around them), placed
    at the chunk's offset; `shift` samples are cut from the start, times clipped to `length`."""
    out = []
    for c in chunks:
        known = [p for p in c.phonemes if p in vocab]
        frames = np.concatenate([[0], np.cumsum(np.asarray(c.durations, dtype=np.int64))])
        edges = frames * (c.audio.size / frames[-1]) if frames[-1] else frames.astype(np.float64)
        base = round(c.offset_s * sample_rate) - shift
        end = length if length is not None else None
        for i, p in enumerate(known):
            if i + 2 >= len(edges):
                break
            a, b = base + edges[i + 1], base + edges[i + 2]
            if end is not None:
                a, b = min(max(a, 0), end), min(max(b, 0), end)
            out.append(Timing(p, round(float(a) / sample_rate, 6), round(float(b) / sample_rate, 6)))
    return out


class PhonemeInput:
    """A G2P stand-in for text that is phonemes already: each piece is its own phonemes, split
    into words at spaces (punctuation peeled), so kcc's chunking and timing work as for text."""
    language = "phonemes"
    backend = "phonemes"
    description = "phonemes given by the caller (is_phonemes=True)"

    def __call__(self, text: str):
        return words_from_phonemes(text, text) if text.strip() else []
