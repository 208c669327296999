"""Every normalisation rule's own cases (kcc.speech.g2p.normalize_rules), per language: the table
is the specification, each case a (written, spoken) pair read through the whole stage."""
from __future__ import annotations

import pytest

pytest.importorskip("num2words", reason="num2words (a runtime dependency) is not installed")

from kcc.speech.g2p.normalize import normalize  # noqa: E402
from kcc.speech.g2p.normalize_rules import tables  # noqa: E402

TABLES = tables()

CASES = [pytest.param(lang, rule.name, written, spoken, "lexicon" in rule.paths,
                      id=f"{lang}:{rule.name}:{written}")
         for lang, rules in TABLES.items() if lang != "en-gb" for rule in rules for written, spoken in rule.cases]


@pytest.mark.parametrize("language, name, written, spoken, lexicon", CASES)
def test_rule_case(language, name, written, spoken, lexicon):
    """English cases read on kcc's default path (misaki's lexicon) unless the rule serves espeak-ng only."""
    assert normalize(written, lexicon=lexicon, language=language) == spoken


def test_every_rule_has_cases():
    bare = [(lang, r.name, r.pattern.pattern[:40]) for lang, rules in TABLES.items() for r in rules if not r.cases]
    assert bare == []


@pytest.mark.parametrize("written, british, spoken", [
    ("Call 555-0143 now.", True, "Call 5 5 5, oh 1 4 3 now."),            # British "oh" for zero
    ("Call 555-0143 now.", False, "Call 5 5 5, 0 1 4 3 now."),
    ("on 1/2/2025.", True, "on February first, twenty twenty five."),    # day first
    ("on 1/2/2025.", False, "on January second, twenty twenty five."),
    ("run 10 km", True, "run 10 kilometres"), ("run 10 km", False, "run 10 kilometers"),
])
def test_english_by_locale(written, british, spoken):
    assert normalize(written, british=british, lexicon=True) == spoken


@pytest.mark.parametrize("text", ["Plain prose with no digits, names or symbols.", "I went home; then I slept."])
def test_prose_is_left_alone_in_every_language(text):
    for language in TABLES:
        assert normalize(text, language=language) == text


def test_no_text_makes_a_rule_raise():
    """Digits, separators, currency and unit symbols, ordinal marks, roman letters and counters in
    any mix and length: every language's table returns text (huge numbers read digit by digit)."""
    hypothesis = pytest.importorskip("hypothesis")
    from hypothesis import strategies as st
    pieces = st.sampled_from(list("0123456789,.:/-%$€£₹¥ ºª°CkmgMBIVXLher'’@分点") + [
        "km/h", "XIX", "Henry ", "Chapter ", " siècle", "www.", "://", "th", " of ", "March ", "9" * 30])

    @hypothesis.settings(max_examples=300, deadline=None, derandomize=True)
    @hypothesis.given(st.lists(pieces, min_size=1, max_size=30).map("".join))
    def check(text):
        for language in TABLES:
            for lexicon in (True, False):
                assert isinstance(normalize(text, lexicon=lexicon, language=language), str)
    check()


def test_every_language_with_rules_is_listed():
    from kcc.speech.g2p.normalize_rules import LANGUAGES, intl
    assert set(intl.SPEECH) <= set(LANGUAGES) and all(TABLES[language] for language in LANGUAGES)
