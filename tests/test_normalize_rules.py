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
