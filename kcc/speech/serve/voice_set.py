"""The voices a server offers: catalog names, OpenAI aliases, blends; never file paths.

A request's voice is a NAME from the configured catalog (kcc.speech.voices.voice_catalog), an OpenAI
alias of one (DEFAULT_ALIASES, replaceable by --voice-alias / KCC_VOICE_ALIASES), or a blend of
up to MAX_BLEND_PARTS names: 'a:0.6,b:0.4', 'a,b' (equal weights), or Kokoro-FastAPI's
'a(2)+b(1)'. Anything else (a path, '../x', 'x.npy', a name not offered) is refused with a
message that names no directory and says nothing about which files exist. Packs are cached in a
bounded LRU, blends included, so a client cycling through blends cannot grow memory.
"""
from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Callable

import numpy as np

from kcc.speech.say import random_voice
from kcc.speech.voices import blend_packs

MAX_BLEND_PARTS = 8
CACHE_PACKS = 16                      # a pack is 510 x 256 float32 = 0.5 MiB
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")
_PART = re.compile(r"\s*([^:()\s]+)\s*(?::\s*([0-9.eE+-]{1,16})|\(\s*([0-9.eE+-]{1,16})\s*\))?\s*")

# OpenAI's voice names -> Kokoro v1.0 voices of a similar character (the American English set
# where Kokoro has a namesake: af_alloy, am_echo, bm_fable, af_nova, am_onyx). Where the catalog
# lacks a target (the real model kcc fetches ships the Japanese voices only) the alias names the
# default voice, so every OpenAI client works out of the box; a table given by the operator must
# name offered voices.
DEFAULT_ALIASES = {
    "alloy": "af_alloy", "ash": "am_adam", "ballad": "bm_george", "coral": "af_heart", "echo": "am_echo",
    "fable": "bm_fable", "onyx": "am_onyx", "nova": "af_nova", "sage": "af_sarah", "shimmer": "af_sky",
    "verse": "am_michael", "marin": "af_bella", "cedar": "am_eric",
}
# The stand-in offered when the catalog is empty (the seeded test checkpoint has no voices).
RANDOM_VOICE = "kcc_random"


class VoiceRequestError(ValueError):
    """The voice field names nothing this server offers; safe to show to the client."""


@dataclass(frozen=True)
class Offered:
    name: str
    language: str
    gender: str
    spec: object                      # what the loader loads; None: the seeded random pack


def parse_aliases(text: str) -> dict[str, str]:
    """'alloy=af_bella,echo=am_adam' -> dict (the flag / environment form)."""
    out = {}
    for item in filter(None, (s.strip() for s in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not NAME.fullmatch(key.strip()) or not NAME.fullmatch(value.strip()):
            raise ValueError(f"voice alias {item!r}: expected NAME=VOICE")
        out[key.strip()] = value.strip()
    return out


class VoiceSet:
    def __init__(self, catalog: dict, aliases: dict[str, str] | None = None, default: str | None = None,
                 loader: Callable[[object], np.ndarray] | None = None, cache_packs: int = CACHE_PACKS):
        self.voices = {name: Offered(name, getattr(v, "language", ""), getattr(v, "gender", ""),
                                     getattr(v, "spec", None)) for name, v in catalog.items() if NAME.fullmatch(name)}
        if not self.voices:
            self.voices[RANDOM_VOICE] = Offered(RANDOM_VOICE, "", "", None)
        self.aliases: dict[str, str] = {}
        self.default = default or next(iter(sorted(self.voices)))
        fallback = max(self.resolve(self.default), key=lambda p: p[1])[0]   # a bad default fails here
        if aliases is None:
            aliases = {a: t if t in self.voices else fallback for a, t in DEFAULT_ALIASES.items()}
        missing = [f"{a}={t}" for a, t in aliases.items() if t not in self.voices]
        if missing:
            raise VoiceRequestError(f"voice alias {', '.join(missing)}: not a voice this server offers")
        self.aliases = {a: t for a, t in aliases.items() if a not in self.voices}
        self._loader = loader
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_packs
        self._lock = threading.Lock()

    def listing(self) -> list[dict]:
        return [{"id": v.name, "name": v.name, "language": v.language, "gender": v.gender}
                for v in sorted(self.voices.values(), key=lambda v: v.name)]

    def resolve(self, spec: str | None) -> tuple[tuple[str, float], ...]:
        """The voice field -> ((catalog name, weight), ...), weights summing to 1."""
        if spec is None or not spec.strip():
            spec = self.default
        if len(spec) > 600:
            raise VoiceRequestError("'voice' is too long to be a voice name or a blend")
        pieces = re.split(r"[,+]", spec)
        if len(pieces) > MAX_BLEND_PARTS:
            raise VoiceRequestError(f"a blend has at most {MAX_BLEND_PARTS} voices, got {len(pieces)}")
        parts: dict[str, float] = {}
        for piece in pieces:
            m = _PART.fullmatch(piece)
            if not m or not NAME.fullmatch(m.group(1)):
                raise VoiceRequestError("'voice' must be a voice name or a blend of names like 'a:0.6,b:0.4'; "
                                        "GET /v1/audio/voices lists the names")
            name = self.aliases.get(m.group(1), m.group(1))
            if name not in self.voices:
                raise VoiceRequestError(f"voice {m.group(1)!r} is not offered by this server; "
                                        "GET /v1/audio/voices lists the names")
            weight_text = m.group(2) or m.group(3)
            try:
                weight = float(weight_text) if weight_text else 1.0
            except ValueError:
                weight = float("nan")
            if not (np.isfinite(weight) and 0 < weight <= 1e6):
                raise VoiceRequestError(f"voice {m.group(1)!r}: a blend weight must be a positive number")
            parts[name] = parts.get(name, 0.0) + weight
        total = sum(parts.values())
        return tuple(sorted((n, w / total) for n, w in parts.items()))

    def language(self, parts) -> str:
        """The heaviest voice's language (the first named among equals); '' when its name does not say."""
        return self.voices[max(parts, key=lambda p: p[1])[0]].language

    def pack(self, parts) -> np.ndarray:
        key = ",".join(f"{n}:{w:.6g}" for n, w in parts)
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        if len(parts) == 1:
            pack = self._load(parts[0][0])
        else:
            pack = blend_packs([self.pack(((n, 1.0),)) for n, _ in parts], [w for _, w in parts], key)
        with self._lock:
            self._cache[key] = pack
            self._cache.move_to_end(key)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return pack

    def cached(self) -> int:
        return len(self._cache)

    def _load(self, name: str) -> np.ndarray:
        spec = self.voices[name].spec
        if spec is None:
            return random_voice(0)
        if self._loader is not None:
            return self._loader(spec)
        from kcc.speech.voices import load_pack
        return load_pack(str(spec))
