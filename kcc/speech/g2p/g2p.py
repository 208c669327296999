"""Text -> Kokoro phonemes -> vocab ids, remembering which word each phoneme came from.

G2P picks a language's backend, the one upstream KPipeline uses for it (misaki==0.9.4):
- English (en-us, en-gb): kcc.speech.g2p.en ('lexicon': misaki's gold/silver lexicons, espeak-ng for
  unknown words; 'misaki' with spaCy's tagger model; 'espeak'), after kcc.speech.g2p.normalize.
- Japanese (ja): kcc.speech.g2p.ja, pyopenjtalk-plus readings through misaki's cutlet romaniser.
- es, fr-fr, hi, it, pt-br: espeak-ng through misaki's EspeakG2P mapping (kcc.speech.g2p.intl).
- Mandarin (zh): misaki's ZHG2P (jieba + pypinyin), as upstream runs it for Kokoro-82M v1.0.
'auto' detects the language per paragraph where the script makes it obvious (kcc.speech.g2p.scripts).
Letters in a script the language cannot speak are left out with a ScriptWarning; symbols the
Kokoro vocab lacks are reported (a G2PWarning naming each symbol and where), never dropped silently.
"""
from __future__ import annotations

import re
import threading
import warnings
from dataclasses import dataclass, field

from kcc.speech.g2p import en as g2p_en
from kcc.speech.g2p import intl as g2p_intl
from kcc.speech.g2p.base import (PUNCTUATION, Encoded, G2PError, G2PWarning, Unknown, Word, load_vocab, peel,
                                 words_from_phonemes)
from kcc.speech.g2p.scripts import detect_language as _detect, keep_speakable, warn_dropped
from kcc.speech.g2p.normalize import normalize
from kcc.speech.g2p.overrides import Override, UserLexicon, load_lexicon, split_overrides

# Public names of kcc.speech.g2p.g2p (the backends and kcc.speech.g2p.base share the types).
__all__ = ["ALIASES", "G2P", "G2P_BACKENDS", "LANGUAGE_CHOICES", "PUNCTUATION", "Encoded", "G2PError", "G2PWarning",
           "Unknown", "Word", "canonical_language", "decode_text", "detect_language", "encode", "espeak_available",
           "G2PFactory", "load_vocab", "misaki_available", "peel", "words_from_phonemes"]

# Upstream KPipeline's language codes; one-letter codes and short forms are aliases.
# The English backends (kcc.speech.g2p.en): each other language has one backend; a server started with
# --g2p espeak still speaks Japanese, so an English choice does not refuse another language.
from kcc.speech.languages import ALIASES, LANGUAGE_CHOICES  # noqa: E402  (the one language table)
from kcc.speech.g2p import G2P_BACKENDS  # noqa: E402  (the names a user can give)


def decode_text(data: bytes | str, source: str = "input") -> str:
    """UTF-8 text, or a G2PError naming the first bad byte (str may carry surrogate escapes)."""
    if isinstance(data, str):
        bad = next((i for i, c in enumerate(data) if 0xD800 <= ord(c) <= 0xDFFF), None)
        if bad is None:
            return data
        try:
            data = data.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError as exc:   # a lone surrogate that is no escaped byte
            raise G2PError(f"{source} is not valid Unicode: lone surrogate U+{ord(data[exc.start]):04X} "
                           f"at offset {exc.start}") from None
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



def canonical_language(language: str) -> str:
    lang = ALIASES.get(str(language).lower(), str(language).lower())
    if lang not in LANGUAGE_CHOICES:
        raise G2PError(f"language {language!r} is not supported; use one of {', '.join(LANGUAGE_CHOICES)}")
    return lang


misaki_available = g2p_en.misaki_available
espeak_available = g2p_en.espeak_available


def detect_language(text: str, default: str = "en-us") -> str:
    """ja / zh where kana / Han outweigh Latin letters (zh: Han without kana), hi where Devanagari
    does, else `default` (kcc.speech.g2p.scripts)."""
    return _detect(text, default)


def _backend_for(language: str, backend: str):
    """(paragraph -> list[Word], backend name, description) for one concrete language."""
    if language in ("en-us", "en-gb"):
        name = g2p_en.pick_backend(backend)
        fn, description = g2p_en.make(language == "en-gb", name)
        return fn, name, description
    name = g2p_intl.BACKENDS[language]
    if backend not in G2P_BACKENDS and backend != name:
        raise G2PError(f"G2P backend {backend!r} is unknown; use one of {', '.join(G2P_BACKENDS)} "
                       f"({language} has one backend, {name!r})")
    return g2p_intl.make(language)


# espeak-ng and OpenJTalk keep process-wide state, and the English fallback and the espeak-ng
# languages share one libespeak-ng, so backend calls are serialised across all G2P instances
# (a server holds one per language); G2P is a small part of a request's time.
_BACKEND_LOCK = threading.Lock()


class G2P:
    """Callable: paragraph text -> list[Word]. Safe to share between threads."""

    def __init__(self, language: str = "en-us", backend: str = "auto", lexicon=None):
        """lexicon: a kcc.speech.g2p.overrides.UserLexicon (whole words -> phonemes), or None."""
        self.lexicon = lexicon
        self.language = canonical_language(language)
        self._backends: dict[str, tuple] = {}
        self._choice = backend
        if self.language == "auto":
            if backend not in G2P_BACKENDS:                 # checked now, not at the first English paragraph
                raise G2PError(f"G2P backend {backend!r} is unknown; use one of {', '.join(G2P_BACKENDS)}")
            self.backend = "auto"
            self.description = ("language detected per paragraph (kana with or without kanji: ja, "
                                "Han without kana: zh, Devanagari: hi, else en-us)")
            return
        with _BACKEND_LOCK:
            fn, self.backend, self.description = _backend_for(self.language, backend)
        self._backends[self.language] = (fn, self.backend, self.description)

    def _get(self, language: str):
        if language not in self._backends:
            self._backends[language] = _backend_for(language, self._choice)
        return self._backends[language][0]

    def __call__(self, text: str) -> list[Word]:
        """Inline `[word](/phonemes/)` overrides and lexicon words are said as written; the text
        between them goes through the language's G2P (the language detected from all of it)."""
        text = decode_text(text)
        if not text.strip():
            return []
        parts = split_overrides(text, load_vocab(), self.lexicon)
        plain = [p for p in parts if isinstance(p, str)]
        language = (detect_language(" ".join(plain)) if plain else "en-us") if self.language == "auto" else self.language
        if len(parts) == 1 and plain:
            return self._speak(text, language)
        words: list[Word] = []
        for i, p in enumerate(parts):
            if isinstance(p, Override):
                after = parts[i + 1] if i + 1 < len(parts) else ""
                words.append(Word(p.text, p.phonemes, isinstance(after, str) and after[:1].isspace()))
                continue
            got = self._speak(p, language)
            if got and p[-1:].isspace():
                got[-1].whitespace = True
            words += got
        return words

    def _speak(self, text: str, language: str) -> list[Word]:
        if not text.strip():
            return []
        with _BACKEND_LOCK:
            speak = self._get(language)
        # Normalised first: it says symbols the script filter would drop ("1º" -> "primero", "°C").
        text = normalize(text, language=language, lexicon=self._backends[language][1] in ("lexicon", "misaki"))
        text, dropped = keep_speakable(text, language)
        if dropped:
            warn_dropped(dropped, language)
            text = re.sub(r"[ \t]{2,}", " ", text).strip()
        if not text.strip():
            return []
        with _BACKEND_LOCK:
            return speak(text)


@dataclass(frozen=True)
class G2PFactory:
    """language -> G2P with one backend choice and an optional lexicon file; picklable, so batch
    workers (processes, Ray actors) build their own.

    The file is read and checked once, when the factory is made: a bad file fails there, not at
    the first item of some language, and every language (and every worker, which gets the parsed
    lexicon pickled) shares that one reading."""
    backend: str = "auto"
    lexicon_path: str | None = None
    lexicon: UserLexicon | None = field(init=False, default=None, repr=False, compare=False)

    def __post_init__(self):
        if self.lexicon_path:
            object.__setattr__(self, "lexicon", load_lexicon(self.lexicon_path))

    def __call__(self, language: str):
        return G2P(language, self.backend, lexicon=self.lexicon)
