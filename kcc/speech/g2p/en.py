"""English G2P backends; each turns one paragraph into kcc.speech.g2p.g2p.Word's.

- 'lexicon': misaki.en.G2P (upstream Kokoro's English G2P: gold/silver lexicons shipped in the
  misaki wheel, its number, currency and stress rules, espeak-ng for out-of-lexicon words) with
  spaCy's rule-based English tokenization (run without spaCy by kcc.speech.g2p.en_tokenizer) and
  kcc.speech.g2p.tagger's tags in place of en_core_web_sm's tagger (spaCy's start-up would cost
  more than a warm `kcc say`; see kcc.speech.g2p.tagger).
- 'misaki': misaki.en.G2P with en_core_web_sm, exactly upstream's path, when that model is installed.
- 'espeak': espeak-ng over the whole paragraph, IPA mapped by misaki's EspeakFallback table.
"""
from __future__ import annotations

import importlib
import importlib.util
import logging
import sys
import types
import warnings
from dataclasses import dataclass
from types import SimpleNamespace

from kcc.speech.g2p.en_tokenizer import english
from kcc.speech.g2p.base import PUNCTUATION, G2PError, Word, align_groups, peel
from kcc.speech.g2p.en_cache import LazyEspeakFallback, lexicon
from kcc.speech.g2p.heteronyms import SenseTable, senses
from kcc.speech.g2p.tagger import tag
from kcc.speech.g2p.normalize import num2words

_SPACY_MODEL = "en_core_web_sm"


def _missing(*modules: tuple[str, str]) -> str:
    for mod, pkg in modules:
        if importlib.util.find_spec(mod) is None:
            return f"{pkg} is not installed (a runtime dependency: reinstall kcc)"
    return ""


# num2words: kcc.speech.g2p.normalize spells dates with it (and misaki.en reads numbers with it).
ESPEAK_MODULES = (("misaki", "misaki==0.9.4"), ("phonemizer", "phonemizer-fork==3.3.2"),
                  ("espeakng_loader", "espeakng-loader==0.2.4"), ("num2words", "num2words==0.5.14"))
LEXICON_MODULES = ESPEAK_MODULES


def espeak_available() -> tuple[bool, str]:
    why = _missing(*ESPEAK_MODULES)
    return not why, why


def lexicon_available() -> tuple[bool, str]:
    why = _missing(*LEXICON_MODULES)
    return not why, why


def misaki_available() -> tuple[bool, str]:
    """(usable, why not) for misaki.en with spaCy's tagger model (not imported to find out: spaCy
    takes 0.6-1.8 s to import)."""
    ok, why = lexicon_available()
    if not ok:
        return ok, why
    if importlib.util.find_spec("spacy") is None or importlib.util.find_spec(_SPACY_MODEL) is None:
        return False, f"spaCy's {_SPACY_MODEL} model is not installed"
    return True, ""


class _SpacyOnDemand(types.ModuleType):
    """What misaki.en's module-level `import spacy` binds while kcc imports it: spaCy itself is
    imported only if misaki reaches for it (its own tagger model, or `[word](/phonemes/)` links)."""

    def __getattr__(self, name):
        try:
            real = importlib.import_module("spacy")
        except ImportError as e:
            raise G2PError(f"this needs spaCy (spacy.{name}), which is not installed") from e
        return getattr(real, name)


def misaki_en():
    """misaki.en without paying for spaCy's import, nor num2words' (~30 ms) before a number is read."""
    if "misaki.en" in sys.modules or "spacy" in sys.modules:
        from misaki import en
        return en
    stand_ins = {"spacy": _SpacyOnDemand("spacy"), "num2words": types.ModuleType("num2words")}
    stand_ins["num2words"].num2words = num2words      # misaki.en: `from num2words import num2words`
    real = {name: sys.modules.get(name) for name in stand_ins}
    sys.modules.update(stand_ins)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            from misaki import en
    finally:
        for name, module in real.items():
            if module is None:
                del sys.modules[name]
            else:
                sys.modules[name] = module
    return en


def pick_backend(backend: str) -> str:
    if backend == "auto":
        return "misaki" if misaki_available()[0] else "lexicon" if lexicon_available()[0] else "espeak"
    if backend not in ("lexicon", "misaki", "espeak"):
        raise G2PError(f"G2P backend {backend!r} is unknown; use auto, lexicon, misaki or espeak")
    ok, why = {"lexicon": lexicon_available, "misaki": misaki_available, "espeak": espeak_available}[backend]()
    if not ok:
        raise G2PError(f"G2P backend {backend!r} is unavailable: {why}")
    return backend


def _from_mtokens(tokens) -> list[Word]:
    """misaki's tokens as Words. A token misaki does not speak ("=", "😀") keeps its space only
    where the word before has none: two spaces in a row would be two pause tokens."""
    words: list[Word] = []
    spaced = False                                   # a space is already due before the next phoneme
    for t in tokens:
        w = Word(t.text, t.phonemes or "", bool(t.whitespace))
        if not w.phonemes and spaced:
            w.whitespace = False
        spaced = w.whitespace or (spaced and not w.phonemes)
        words.append(w)
    return words


@dataclass
class _Token:
    """The three fields misaki reads from a spaCy token."""
    text: str
    whitespace_: str
    tag_: str


class _TaggedTokenizer:
    """Stands in for misaki's spaCy pipeline: spaCy's English tokenization, kcc's tags."""

    def __init__(self):
        self._tokenize = english()

    def __call__(self, text: str) -> list[_Token]:
        pairs = self._tokenize(text)
        return [_Token(t, w, g) for (t, w), g in zip(pairs, senses(pairs, tag(pairs)))]


def _token_owners(words: list[str], tokens: list[str]) -> list[int]:
    """For each token, the index of the whitespace-split word its first character belongs to
    (both sequences cover the same non-space characters in order)."""
    ends, n = [], 0
    for w in words:
        n += len("".join(w.split()))
        ends.append(n)
    owners, pos, k = [], 0, 0
    for t in tokens:
        while k < len(ends) - 1 and pos >= ends[k]:
            k += 1
        owners.append(k)
        pos += len("".join(t.split()))
    return owners


def make_lexicon(british: bool, fallback):
    """misaki.en.G2P without spaCy (its __init__ would download a spaCy model)."""
    en = misaki_en()

    class LexiconG2P(en.G2P):
        def __init__(self):                                      # noqa: D107 (see make_lexicon)
            self.version, self.british, self.unk = None, british, ""
            self.nlp = _TaggedTokenizer()
            self.lexicon = lexicon(en, british)
            self.lexicon.golds = SenseTable(self.lexicon.golds)     # "lead" the metal, "row" the quarrel
            self.fallback = fallback

        def tokenize(self, text, tokens, features):
            """misaki's tokenize, with its spaCy alignment of `[word](/phonemes/)` features to
            tokens done by character position."""
            mtokens = super().tokenize(text, tokens, {})
            if not features:
                return mtokens
            owners = _token_owners(tokens, [t.text for t in mtokens])
            for k, v in features.items():
                for i, tk in enumerate(t for t, o in zip(mtokens, owners) if o == k):
                    if not isinstance(v, str):
                        tk._.stress = v
                    elif v.startswith("/"):
                        tk._.is_head = i == 0
                        tk.phonemes = v.lstrip("/") if i == 0 else ""
                        tk._.rating = 5
                    elif v.startswith("#"):
                        tk._.num_flags = v.lstrip("#")
            return mtokens

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)     # misaki's importlib.resources.open_text
        g2p = LexiconG2P()
    return lambda text: _from_mtokens(g2p(text)[1])


def make_misaki(british: bool, fallback):
    from misaki import en
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        g2p = en.G2P(trf=False, british=british, fallback=fallback, unk="")
    return lambda text: _from_mtokens(g2p(text)[1])


class _Echo:
    """Stands in for EspeakFallback's backend so its mapping table runs on IPA we already have."""
    @staticmethod
    def phonemize(texts):
        return [texts[0]]


class EspeakEnglish:
    """espeak-ng over the paragraph (context changes function words: 'a' is 'ɐ', not the letter
    name), each text token then given its espeak words. espeak joins some function words into
    one group ("of a" -> 'ʌvə'), so the groups are aligned to tokens by phoneme similarity:
    a token takes as many groups as it makes alone, or several tokens share one group."""

    def __init__(self, british: bool, fallback):
        from misaki import espeak
        from phonemizer.separator import Separator
        # phonemizer warns when espeak's word count differs from the text's ('123' -> three
        # words); the alignment below handles exactly that, so the warning is noise here.
        logging.getLogger("phonemizer").setLevel(logging.ERROR)
        self._backend = fallback.backend
        self._sep = Separator(word="|", syllable=None, phone=None)
        self._map = espeak.EspeakFallback.__new__(espeak.EspeakFallback)
        self._map.british, self._map.version, self._map.backend = british, None, _Echo()

    def _split(self, s: str) -> list[str]:
        return [w for w in (p.strip() for p in s.split("|")) if w]

    def __call__(self, text: str) -> list[Word]:
        tokens = text.split()
        context = self._split(self._backend.phonemize([" ".join(tokens)], separator=self._sep)[0])
        alone = [self._split(p) for p in self._backend.phonemize(tokens, separator=self._sep)]
        joins = [t.strip("".join(PUNCTUATION) + "'").lower() in CLITICS for t in tokens]
        groups = align_groups(alone, context, joins)
        words: list[Word] = []
        for token, group in zip(tokens, groups):
            ipa = " ".join(self._map(SimpleNamespace(text=g))[0] for g in group)
            words += peel(token, ipa)
            if words:
                words[-1].whitespace = bool(words[-1].phonemes)   # an empty word adds no space
        if words:
            words[-1].whitespace = False
        return words


# Unstressed function words espeak-ng may join to the word before ("of a" -> 'ʌvə').
CLITICS = frozenset("a an the of to and or as at in on it is for".split())


def make(british: bool, backend: str):
    """(paragraph -> list[Word], description) for the chosen backend ('auto' resolved)."""
    fallback = LazyEspeakFallback(british)
    lang = "en-gb" if british else "en-us"
    if backend == "misaki":
        return make_misaki(british, fallback), f"misaki.en.G2P ({lang}, spaCy {_SPACY_MODEL}, espeak-ng fallback)"
    if backend == "lexicon":
        return make_lexicon(british, fallback), (f"misaki.en lexicons ({lang}; spaCy tokenizer, kcc rule tagger, "
                                                 "espeak-ng for unknown words)")
    return EspeakEnglish(british, fallback), f"espeak-ng via misaki's EspeakFallback mapping ({lang})"
