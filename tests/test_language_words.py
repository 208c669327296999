"""Word timestamps and --lexicon pronunciations in every language (issue 44): each language's
words keep their written text (ja and zh by word group, from the backend's own tokens), so
timestamps name what was written; a lexicon word is said as the file says in every language."""
from __future__ import annotations

import functools
import warnings

import numpy as np
import pytest

from kcc.speech.audio.timestamps import SAMPLES_PER_FRAME, word_timestamps
from kcc.speech.g2p import intl
from kcc.speech.g2p.base import Word, words_from_tokens
from kcc.speech.g2p.en import lexicon_available
from kcc.speech.g2p.g2p import G2P, encode
from kcc.speech.g2p.overrides import UserLexicon
from kcc.speech.g2p.base import load_vocab

# language -> (sentence, the written words timestamps must name, in order; punctuation left out)
SENTENCES = {
    "en-us": ("The cat sat down.", ["The", "cat", "sat", "down"]),
    "en-gb": ("The cat sat down.", ["The", "cat", "sat", "down"]),
    "es": ("El gato duerme mucho.", ["El", "gato", "duerme", "mucho"]),
    "fr-fr": ("Le chat dort beaucoup.", ["Le", "chat", "dort", "beaucoup"]),
    "it": ("Il gatto dorme molto.", ["Il", "gatto", "dorme", "molto"]),
    "pt-br": ("O gato dorme muito.", ["O", "gato", "dorme", "muito"]),
    "hi": ("बिल्ली बहुत सोती है।", ["बिल्ली", "बहुत", "सोती", "है"]),
    "ja": ("東京は晴れです。", ["東京", "は", "晴れ", "です"]),
    "zh": ("今天天气很好。", ["今天天气", "很", "好"]),
}


def _available(language: str) -> tuple[bool, str]:
    return lexicon_available() if language.startswith("en") else intl.available(language)


@functools.lru_cache(maxsize=None)
def _g2p(language: str, lexicon: UserLexicon | None = None) -> G2P:
    return G2P(language, lexicon=lexicon)


@pytest.mark.parametrize("language", sorted(SENTENCES))
def test_word_timestamps_name_the_written_words(language):
    ok, why = _available(language)
    if not ok:
        pytest.skip(why)
    sentence, expected = SENTENCES[language]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enc = encode(_g2p(language)(sentence))
    durations = np.full(len(enc.ids) + 2, 3, np.int64)
    ts = word_timestamps(enc, durations)
    spoken = [w["word"] for w in ts if w["end_s"] > w["start_s"] and any(c.isalnum() for c in w["word"])]
    assert spoken == expected
    starts = [w["start_s"] for w in ts]
    assert starts == sorted(starts) and ts[0]["start_s"] == 0
    assert ts[-1]["end_s"] == pytest.approx(durations.sum() * SAMPLES_PER_FRAME / 24000)


@pytest.mark.parametrize("language", ["ja", "zh"])
def test_cjk_phonemes_unchanged_by_word_grouping(language):
    """The words are regrouped from the backend's tokens; the phoneme string is the backend's own."""
    ok, why = _available(language)
    if not ok:
        pytest.skip(why)
    fn, _, _ = intl.make(language)
    backend = intl.g2p_ja.make() if language == "ja" else intl._zh()
    for text in {"ja": ["東京は「晴れ」です。きっと、楽しいでしょう！", "私は学生です。"],
                 "zh": ["今天天气很好，我们去公园吧！", "他说：“你好”。"]}[language]:
        ps = backend(text)[0]
        words = fn(text)
        assert encode(words).phonemes == " ".join(ps.split())
        assert all(not any("\u0041" <= c <= "\u007a" for c in w.text) or w.text == w.phonemes for w in words)


@pytest.mark.parametrize("language, sentence, expected", [
    ("es", "Tengo 3497 euros hoy.", ["Tengo", "3497", "euros", "hoy"]),
    ("fr-fr", "Il a 1234 livres.", ["Il", "a", "1234", "livres"]),
    ("hi", "मेरे पास 3497 रुपये हैं।", ["मेरे", "पास", "3497", "रुपये", "हैं"]),
])
def test_a_number_read_as_several_words_keeps_its_text(language, sentence, expected):
    """espeak-ng reads "3497" as four words; the sentence's other words keep their text."""
    ok, why = _available(language)
    if not ok:
        pytest.skip(why)
    words = _g2p(language)(sentence)
    assert [w.text for w in words if any(c.isalnum() for c in w.text)] == expected
    number = next(w for w in words if w.text[:1].isdigit())
    assert len(number.phonemes.split()) >= 3


def test_words_from_tokens_joins_and_falls_back():
    words = words_from_tokens("ab c.", [("A", "a"), ("B", "b"), ("C", "c"), ("。", ".")])
    assert [(w.text, w.phonemes, w.whitespace) for w in words] == [("AB", "ab", True), ("C", "c", False),
                                                                  (".", ".", False)]
    assert words_from_tokens("ab", [("A", "a"), ("X", "x")]) is None       # tokens that do not spell it


# language -> (sentence, the lexicon word in it, its phonemes)
LEXICON = {
    "en-us": ("I met Kokoro today.", "Kokoro", "kˈOkəɹO"),
    "en-gb": ("I met Kokoro today.", "Kokoro", "kˈOkəɹO"),
    "es": ("Hola Kokoro, amigo.", "Kokoro", "kokˈoɾo"),
    "fr-fr": ("Bonjour Kokoro, ami.", "Kokoro", "kokoʁo"),
    "it": ("Ciao Kokoro, amico.", "Kokoro", "kokˈɔro"),
    "pt-br": ("Olá Kokoro, amigo.", "Kokoro", "kokˈɔɾʊ"),
    "hi": ("नमस्ते कोकोरो दोस्त।", "कोकोरो", "koːkoːɾoː"),
    "ja": ("こんにちは心さん。", "心", "kokoɾo"),
    "zh": ("你好心先生。", "心", "ɕi→n"),
}


@pytest.mark.parametrize("language", sorted(LEXICON))
def test_lexicon_word_is_said_as_the_file_says(language):
    ok, why = _available(language)
    if not ok:
        pytest.skip(why)
    sentence, word, phonemes = LEXICON[language]
    lexicon = UserLexicon({word: phonemes}, load_vocab(), "test lexicon")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        words = _g2p(language, lexicon)(sentence)
        plain = _g2p(language)(sentence)
    assert [w.phonemes for w in words if w.text == word] == [phonemes]
    assert encode(words).phonemes != encode(plain).phonemes or phonemes in encode(plain).phonemes
    assert isinstance(words[0], Word)
