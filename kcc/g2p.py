"""English text -> Kokoro phonemes -> vocab ids, remembering which word each phoneme came from.

Two backends, both misaki==0.9.4 (the G2P upstream Kokoro ships with):
- 'misaki': misaki.en.G2P (lexicon + spaCy tagger, espeak fallback for unknown words), exactly
  what upstream KPipeline uses; needs spaCy and its en_core_web_sm model installed.
- 'espeak': espeak-ng (phonemizer-fork + the espeakng-loader wheel) run over the whole
  paragraph, each word's IPA then mapped to Kokoro's phoneme set by misaki's EspeakFallback
  table (the mapping upstream uses for out-of-lexicon English words).
'auto' picks misaki when its spaCy model is installed, else espeak. Symbols the Kokoro vocab
lacks are reported (a G2PWarning naming each symbol and where), never dropped silently.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import threading
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace

LANGUAGES = {"en-us": False, "en-gb": True, "a": False, "b": True}    # value: British?
# Punctuation Kokoro has ids for; peeled off espeak words into their own tokens, as misaki does.
PUNCTUATION = frozenset(';:,.!?—…"“”()')
_VOCAB_PATH = Path(__file__).with_name("data") / "vocab.json"


class G2PError(ValueError):
    """Text cannot be turned into phonemes; the message says what and where."""


class G2PWarning(UserWarning):
    """Phoneme symbols outside the Kokoro vocab were left out of the ids."""


@dataclass
class Word:
    text: str
    phonemes: str
    whitespace: bool = True          # a space follows it in the phoneme string


@dataclass(frozen=True)
class Unknown:
    symbol: str
    position: int                    # index in the chunk's phoneme string
    word: int                        # index into the chunk's words (-1: a joining space)
    text: str


@dataclass
class Encoded:
    words: list[Word]
    phonemes: str                    # upstream's tokens_to_ps string; its length picks the style row
    ids: list[int]                   # without the boundary 0s
    word_of: list[int]               # per id: index into words, -1 for a joining space
    unknown: list[Unknown] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(w.text + (" " if w.whitespace else "") for w in self.words).strip()


@functools.lru_cache(maxsize=1)
def load_vocab() -> dict[str, int]:
    with open(_VOCAB_PATH, encoding="utf-8") as fh:
        return json.load(fh)["vocab"]


def decode_text(data: bytes | str, source: str = "input") -> str:
    """UTF-8 text, or a G2PError naming the first bad byte (str may carry surrogate escapes)."""
    if isinstance(data, str):
        bad = next((i for i, c in enumerate(data) if 0xD800 <= ord(c) <= 0xDFFF), None)
        if bad is None:
            return data
        data = data.encode("utf-8", "surrogateescape")
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise G2PError(f"{source} is not valid UTF-8: byte 0x{data[exc.start]:02x} at offset {exc.start} "
                       f"({exc.reason})") from None


def encode(words: list[Word], vocab: dict[str, int] | None = None, where: str = "") -> Encoded:
    """Join words as upstream does (phonemes + ' ' where whitespace follows, stripped) and map
    each symbol to its id; symbols missing from the vocab are reported and left out."""
    vocab = vocab or load_vocab()
    chars: list[tuple[str, int]] = []
    for wi, w in enumerate(words):
        chars += [(c, wi) for c in w.phonemes]
        if w.whitespace:
            chars.append((" ", -1))
    lo, hi = 0, len(chars)
    while lo < hi and chars[lo][0].isspace():
        lo += 1
    while hi > lo and chars[hi - 1][0].isspace():
        hi -= 1
    chars = chars[lo:hi]
    ids, word_of, unknown = [], [], []
    for pos, (c, wi) in enumerate(chars):
        if c in vocab:
            ids.append(vocab[c])
            word_of.append(wi)
        else:
            unknown.append(Unknown(c, pos, wi, words[wi].text if wi >= 0 else " "))
    if unknown:
        listed = ", ".join(f"{u.symbol!r} (U+{ord(u.symbol):04X}) at {u.position} in word {u.text!r}"
                           for u in unknown[:20])
        more = f" and {len(unknown) - 20} more" if len(unknown) > 20 else ""
        warnings.warn(G2PWarning(f"{where or 'phonemes'}: {len(unknown)} symbol(s) not in the Kokoro vocab, "
                                 f"left out of the ids: {listed}{more}"), stacklevel=2)
    return Encoded(words, "".join(c for c, _ in chars), ids, word_of, unknown)


def misaki_available() -> tuple[bool, str]:
    """(usable, why not) for the misaki.en backend."""
    if importlib.util.find_spec("misaki") is None:
        return False, "misaki is not installed (pip install 'kcc[g2p]')"
    if importlib.util.find_spec("spacy") is None:
        return False, "spaCy is not installed (misaki[en] needs it)"
    import spacy.util
    if not spacy.util.is_package("en_core_web_sm"):
        return False, "spaCy's en_core_web_sm model is not installed"
    return True, ""


def espeak_available() -> tuple[bool, str]:
    for mod, pkg in (("misaki", "misaki==0.9.4"), ("phonemizer", "phonemizer-fork==3.3.2"),
                     ("espeakng_loader", "espeakng-loader==0.2.4")):
        if importlib.util.find_spec(mod) is None:
            return False, f"{pkg} is not installed (pip install 'kcc[g2p]')"
    return True, ""


class _Echo:
    """Stands in for EspeakFallback's backend so its mapping table runs on IPA we already have."""
    @staticmethod
    def phonemize(texts):
        return [texts[0]]


class G2P:
    """Callable: paragraph text -> list[Word]. One instance serialises its backend calls
    (espeak-ng keeps global state), so it is safe to share between threads."""

    def __init__(self, language: str = "en-us", backend: str = "auto"):
        if language.lower() not in LANGUAGES:
            raise G2PError(f"language {language!r} is not supported; use one of en-us, en-gb")
        self.language = {"a": "en-us", "b": "en-gb"}.get(language.lower(), language.lower())
        self.british = LANGUAGES[self.language]
        self._lock = threading.Lock()
        if backend == "auto":
            backend = "misaki" if misaki_available()[0] else "espeak"
        if backend not in ("misaki", "espeak"):
            raise G2PError(f"G2P backend {backend!r} is unknown; use auto, misaki or espeak")
        ok, why = misaki_available() if backend == "misaki" else espeak_available()
        if not ok:
            raise G2PError(f"G2P backend {backend!r} is unavailable: {why}")
        self.backend = backend
        from misaki import espeak
        self._fallback = espeak.EspeakFallback(british=self.british)
        if backend == "misaki":
            from misaki import en
            self._misaki = en.G2P(trf=False, british=self.british, fallback=self._fallback, unk="")
        else:
            import logging
            from phonemizer.separator import Separator
            # phonemizer warns when espeak's word count differs from the text's ('123' -> three
            # words); _espeak_words handles exactly that, so the warning is noise here.
            logging.getLogger("phonemizer").setLevel(logging.ERROR)
            self._sep = Separator(word="|", syllable=None, phone=None)
            self._map = espeak.EspeakFallback.__new__(espeak.EspeakFallback)
            self._map.british, self._map.version, self._map.backend = self.british, None, _Echo()

    @property
    def description(self) -> str:
        if self.backend == "misaki":
            return f"misaki.en.G2P ({self.language}, spaCy en_core_web_sm, espeak-ng fallback)"
        return f"espeak-ng via misaki's EspeakFallback mapping ({self.language}; no spaCy model installed)"

    def __call__(self, text: str) -> list[Word]:
        text = decode_text(text)
        if not text.strip():
            return []
        with self._lock:
            if self.backend == "misaki":
                _, tokens = self._misaki(text)
                return [Word(t.text, t.phonemes or "", bool(t.whitespace)) for t in tokens]
            return self._espeak_words(text.split())

    # -- espeak ---------------------------------------------------------------------------
    def _espeak_words(self, tokens: list[str]) -> list[Word]:
        """Phonemize the paragraph in one pass (context changes function words: 'a' is 'ɐ', not
        the letter name), then give each text token its espeak words. A token may yield several
        ('123' -> three); the per-token counts come from phonemizing each token alone, and when
        they do not add up to the paragraph's words the isolated phonemes are used instead."""
        backend = self._fallback.backend
        split = lambda s: [w for w in (p.strip() for p in s.split("|")) if w]   # noqa: E731
        context = split(backend.phonemize([" ".join(tokens)], separator=self._sep)[0])
        alone = [split(p) for p in backend.phonemize(tokens, separator=self._sep)]
        if sum(map(len, alone)) == len(context):
            groups, at = [], 0
            for a in alone:
                groups.append(context[at:at + len(a)])
                at += len(a)
        else:
            groups = alone
        words: list[Word] = []
        for token, group in zip(tokens, groups):
            ipa = " ".join(self._map(SimpleNamespace(text=g))[0] for g in group)
            words += _peel(token, ipa)
            if words:
                words[-1].whitespace = bool(words[-1].phonemes)   # an empty word adds no space
        if words:
            words[-1].whitespace = False
        return words


def _peel(token: str, ipa: str) -> list[Word]:
    """Split leading/trailing punctuation off a token's phonemes into one-symbol words."""
    lo, hi = 0, len(ipa)
    while lo < hi and ipa[lo] in PUNCTUATION:
        lo += 1
    while hi > lo and ipa[hi - 1] in PUNCTUATION:
        hi -= 1
    core = token.strip("".join(PUNCTUATION) + "'‘’") or token
    out = [Word(c, c, False) for c in ipa[:lo]]
    if ipa[lo:hi] or not ipa:
        out.append(Word(core, ipa[lo:hi], False))
    out += [Word(c, c, False) for c in ipa[hi:]]
    return out
