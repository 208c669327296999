"""The voices a server offers: catalog names, OpenAI aliases, blends; never file paths.

A request's voice is a NAME from the configured catalog (kcc.speech.voices.voice_catalog), an OpenAI
alias of one (DEFAULT_ALIASES, replaceable by --voice-alias / KCC_VOICE_ALIASES), or a blend of up
to kcc.speech.voices.MAX_BLEND_PARTS names in the grammar every front-end shares
(kcc.speech.voices.parse_blend): 'a:0.6,b:0.4', 'a,b' (equal weights), or Kokoro-FastAPI's
'a(2)+b(1)'. No voice: the operator's --voice, else upstream's voice for the text's language.
Anything else (a path, '../x', 'x.npy', a name not offered) is refused with a
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

from kcc.speech.engine import random_voice
from kcc.speech.languages import LANGUAGES, default_voice
from kcc.speech.voices import VoiceError, blend_packs, default_voice_for, load_pack, parse_blend

CACHE_PACKS = 16                      # a pack is 510 x 256 float32 = 0.5 MiB
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")

# OpenAI's voice names -> Kokoro v1.0 voices. Kokoro's namesakes where it has one (af_alloy,
# am_echo, bm_fable, af_nova, am_onyx); the others by OpenAI's description (gender, accent) and,
# among those, the best-graded in upstream's VOICES.md: coral (warm, female) af_heart (A),
# shimmer (bright, female) af_bella (A-), sage (calm, female) af_sarah (C+), marin (female)
# af_kore (C+), ash and verse (male) am_michael and am_puck (C+), cedar (male) am_fenrir (C+),
# ballad (British, male) bm_george (C). Where the catalog lacks a target (the fallback: only the
# real model's Japanese voices) the alias names the default voice, so every OpenAI client works
# out of the box; a table given by the operator must name offered voices.
DEFAULT_ALIASES = {
    "alloy": "af_alloy", "ash": "am_michael", "ballad": "bm_george", "coral": "af_heart", "echo": "am_echo",
    "fable": "bm_fable", "onyx": "am_onyx", "nova": "af_nova", "sage": "af_sarah", "shimmer": "af_bella",
    "verse": "am_puck", "marin": "af_kore", "cedar": "am_fenrir",
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
                 loader: Callable[[object], np.ndarray] | None = None, cache_packs: int = CACHE_PACKS,
                 language: str = ""):
        """default: the operator's voice for every request without one; None: the voice of each
        text's language (`language`'s before any text is seen)."""
        self.voices = {name: Offered(name, getattr(v, "language", ""), getattr(v, "gender", ""),
                                     getattr(v, "spec", None)) for name, v in catalog.items() if NAME.fullmatch(name)}
        if not self.voices:
            self.voices[RANDOM_VOICE] = Offered(RANDOM_VOICE, "", "", None)
        self.aliases: dict[str, str] = {}
        self.fixed_default = default is not None
        if default is None:
            default = default_voice_for(language, self.voices)
            default = default if default in self.voices else next(iter(sorted(self.voices)))
        self.default = default
        fallback = max(self.resolve(self.default), key=lambda p: p[1])[0]   # a bad default fails here
        if aliases is None:
            aliases = {a: t if t in self.voices else fallback for a, t in DEFAULT_ALIASES.items()}
        missing = [f"{a}={t}" for a, t in aliases.items() if t not in self.voices]
        if missing:
            raise VoiceRequestError(f"voice alias {', '.join(missing)}: not a voice this server offers")
        self.aliases = {a: t for a, t in aliases.items() if a not in self.voices}
        self._loader = loader
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._loaded: dict[str, np.ndarray] = {}      # preload(): every offered voice, kept
        self._cache_size = cache_packs
        self._lock = threading.Lock()

    def listing(self) -> list[dict]:
        return [{"id": v.name, "name": v.name, "language": v.language, "gender": v.gender,
                 "language_name": LANGUAGES[v.language].name if v.language in LANGUAGES else ""}
                for v in sorted(self.voices.values(), key=lambda v: v.name)]

    def resolve(self, spec: str | None, language: str = "") -> tuple[tuple[str, float], ...]:
        """The voice field -> ((catalog name, weight), ...), weights summing to 1. No voice: the
        default, or with no operator default, upstream's voice for `language` where offered."""
        if spec is None or not spec.strip():
            spec = self.default
            if language and not self.fixed_default:
                own = default_voice(language)
                spec = own if own in self.voices else spec
        try:
            pieces = parse_blend(spec)
        except VoiceError as exc:
            raise VoiceRequestError(f"{exc}; GET /v1/audio/voices lists the names") from None
        parts: dict[str, float] = {}
        for name, weight in pieces:
            if not NAME.fullmatch(name):
                raise VoiceRequestError("'voice' must be a voice name or a blend of names like 'a:0.6,b:0.4'; "
                                        "GET /v1/audio/voices lists the names")
            target = self.aliases.get(name, name)
            if target not in self.voices:
                raise VoiceRequestError(f"voice {name!r} is not offered by this server; "
                                        "GET /v1/audio/voices lists the names")
            parts[target] = parts.get(target, 0.0) + weight
        total = sum(parts.values())
        return tuple(sorted((n, w / total) for n, w in parts.items()))

    def canonical(self, spec: str) -> str:
        """An OpenAI alias -> the catalog voice it names (so its language can be read from the
        name); anything else as given (resolve checks it)."""
        return self.aliases.get(spec.strip(), spec)

    def language(self, parts) -> str:
        """The heaviest voice's language (the first named among equals); '' when its name does not say."""
        return self.voices[max(parts, key=lambda p: p[1])[0]].language

    def preload(self) -> None:
        """Load every offered voice's pack now (a server's warm-up): each is kept for the
        server's life beside the LRU of blends, so a voice's first request reads no file."""
        for name in sorted(self.voices):
            pack = self._load(name)
            with self._lock:
                self._loaded[name] = pack

    def pack(self, parts) -> np.ndarray:
        key = ",".join(f"{n}:{w:.6g}" for n, w in parts)
        if len(parts) == 1 and parts[0][0] in self._loaded:
            return self._loaded[parts[0][0]]
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
        return load_pack(str(spec))
