"""G2P for the languages other than English: Japanese (kcc.speech.g2p.ja), the espeak-ng languages
Kokoro v1.0 was trained on (misaki.espeak.EspeakG2P, language-switch flags removed, exactly as
upstream KPipeline builds it) and Mandarin (misaki.zh.ZHG2P in its v1.0 'legacy' mode, as
KPipeline runs it for Kokoro-82M). Each gives one phoneme string per paragraph; kcc.speech.g2p.g2p splits
it into words.
"""
from __future__ import annotations

import functools
import importlib.util
import logging
import re
import warnings

from kcc.speech.g2p import ja as g2p_ja
from kcc.speech.g2p.base import (G2PError, G2PWarning, Word, words_by_alignment, words_from_phonemes,
                                  words_from_tokens)

ESPEAK_LANGUAGES = ("es", "fr-fr", "hi", "it", "pt-br")
BACKENDS = {"ja": "pyopenjtalk", "zh": "pypinyin", **{lang: "espeak" for lang in ESPEAK_LANGUAGES}}
ESPEAK_MODULES = (("misaki", "misaki==0.9.4"), ("phonemizer", "phonemizer-fork==3.3.2"),
                  ("espeakng_loader", "espeakng-loader==0.2.4"))
ZH_MODULES = (("misaki", "misaki==0.9.4"), ("jieba", "jieba==0.42.1"), ("pypinyin", "pypinyin==0.55.0"),
              ("cn2an", "cn2an==0.5.24"), ("ordered_set", "ordered-set==4.1.0"))


def _missing(modules, extra: str = "") -> str:
    """extra: the kcc extra that installs them ('' : the runtime's own)."""
    for mod, pkg in modules:
        if importlib.util.find_spec(mod) is None:
            return (f"{pkg} is not installed: Mandarin needs kcc's {extra} extra (pip install 'kcc[{extra}]')"
                    if extra and mod != "misaki" else f"{pkg} is not installed (a runtime dependency: reinstall kcc)")
    return ""


def available(language: str) -> tuple[bool, str]:
    why = (g2p_ja.missing() if language == "ja" else _missing(ZH_MODULES, "zh") if language == "zh"
           else _missing(ESPEAK_MODULES))
    return not why, why


def _espeak(language: str):
    from misaki import espeak
    logging.getLogger("phonemizer").setLevel(logging.ERROR)
    g2p = espeak.EspeakG2P(language=language)
    # Spanish's inverted marks pass through espeak; Kokoro's vocab has no id for them (upstream
    # drops them silently) and they carry no sound, so they go here rather than warn each question.
    return lambda text: g2p(text)[0].replace("¿", "").replace("¡", "")


_LONG_DIGITS = re.compile(r"(?<!\d)\d{17,}(?!\d)")


def _zh():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # jieba's pkg_resources deprecation
        import jieba
        from misaki import zh
    jieba.setLogLevel(logging.ERROR)
    g2p = zh.ZHG2P(version=None)

    @functools.lru_cache(maxsize=4096)
    def readable(ch: str) -> bool:
        try:
            g2p(ch)
            return True
        except ValueError:
            return False

    def tokens(text: str, ps: str) -> list[tuple[str, str]]:
        """The (word, phonemes) pairs ZHG2P's v1.0 ('legacy') reading made ps from: the text
        after its number and punctuation mapping, Han runs cut by jieba, each word read alone."""
        mapped = zh.ZHG2P.map_punctuation(zh.cn2an.transform(text, "an2cn"))
        out = []
        for run in re.findall("[\u4E00-\u9FFF]+|[^\u4E00-\u9FFF]+", mapped):
            if re.match("[\u4E00-\u9FFF]", run):
                out += [(w, zh.ZHG2P.word2ipa(w).replace(chr(815), "")) for w in jieba.lcut(run, cut_all=False)]
            else:
                out += [(t, t) for t in run.split()]
        return out

    def speak(text: str) -> tuple[str, list[tuple[str, str]]]:
        ps = read(text)
        try:
            return ps, tokens(_LONG_DIGITS.sub(lambda m: " ".join(m[0]), text), ps)
        except (ValueError, KeyError):
            return ps, []

    def read(text: str) -> str:
        """misaki's ZHG2P raises ValueError on a character whose pinyin it cannot split ('鿂',
        found by fuzz/fuzz_text.py); such characters are left out, each named in a G2PWarning.
        A number past its reader's range (17+ digits, left as digits: no sound) is read digit by digit."""
        text = _LONG_DIGITS.sub(lambda m: " ".join(m[0]), text)
        try:
            return g2p(text)[0]
        except ValueError:
            dropped = sorted({c for c in text if not c.isspace() and not readable(c)})
            if not dropped:
                raise
            warnings.warn(G2PWarning(f"zh: {len(dropped)} character(s) the Mandarin G2P cannot read, left out: "
                                     + ", ".join(f"{c!r} (U+{ord(c):04X})" for c in dropped[:20])), stacklevel=2)
            return g2p("".join(c for c in text if c not in dropped))[0]
    return speak


def make(language: str):
    """(paragraph -> list[Word], backend name, description)."""
    ok, why = available(language)
    if not ok:
        raise G2PError(f"{language} G2P is unavailable: {why}")
    if language == "ja":
        phonemize, description = g2p_ja.make(), g2p_ja.DESCRIPTION
    elif language == "zh":
        phonemize, description = _zh(), "misaki ZHG2P (zh; jieba + pypinyin, Kokoro v1.0 mode)"
    else:
        phonemize, description = _espeak(language), f"espeak-ng via misaki's EspeakG2P mapping ({language})"

    def words(text: str) -> list[Word]:
        """ja, zh: words keep their written text (word timestamps), from the backend's tokens."""
        got = phonemize(text)
        if isinstance(got, tuple):
            ps, tokens = got
            return words_from_tokens(ps, tokens) or words_from_phonemes(text, ps)
        return words_by_alignment(text, got, phonemize)           # es, fr-fr, it, pt-br, hi
    return words, BACKENDS[language], description
