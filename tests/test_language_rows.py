"""ARCHITECTURE.md's "how to add a language": every row of kcc.speech.languages is complete in every
table that names languages (voices, G2P backend, normalisation, README, held-out corpus)."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench.languages_corpus import LANGUAGES as CORPUS, SENTENCES
from kcc.speech.g2p import intl
from kcc.speech.g2p.normalize_rules import LANGUAGES as NORMALISED, table
from kcc.speech.languages import ALIASES, LANGUAGES
from kcc.weights.official_voices import TABLE

ROOT = Path(__file__).resolve().parents[1]
ENGLISH = ("en-us", "en-gb")          # g2p/en.py; en-us's held-out set is tests/test_g2p_upstream.py's
README = (ROOT / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("code", list(LANGUAGES))
def test_every_language_row_is_complete_in_every_table(code):
    lang = LANGUAGES[code]
    voices = [n for n in TABLE.voices if n[0] == lang.letter]
    assert voices, f"{code}: no official voice starts with {lang.letter!r}"
    assert lang.default_voice in voices, f"{code}: default {lang.default_voice} is not one of its voices"
    assert ALIASES[lang.letter] == code and all(ALIASES[a] == code for a in lang.aliases)
    assert code in ENGLISH or code in intl.BACKENDS, f"{code}: no G2P backend"
    assert code in NORMALISED, f"{code}: no normalisation table in kcc/speech/g2p/normalize_rules"
    assert code == "hi" or table(code), f"{code}: an empty normalisation table"   # hi: num2words has none; espeak-ng reads digits
    row = next((line for line in README.splitlines() if f"| {code}, {lang.letter} |" in line), "")
    assert f"| {lang.default_voice} |" in row, f"{code}: README's language table row"
    if code != "en-us":
        assert CORPUS[code][:2] == (lang.letter, lang.default_voice), f"{code}: bench corpus disagrees"
        assert len(SENTENCES[code]) >= 5


def test_no_table_names_a_language_the_language_table_lacks():
    known = set(LANGUAGES)
    assert set(intl.BACKENDS) <= known and set(NORMALISED) <= known and set(CORPUS) <= known
    assert {n[0] for n in TABLE.voices} == {lang.letter for lang in LANGUAGES.values()}
