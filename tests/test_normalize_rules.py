"""Every normalisation rule's own cases (kcc.speech.g2p.normalize_rules), per language: the table
is the specification, each case a (written, spoken) pair read through the whole stage."""
from __future__ import annotations

import pytest

pytest.importorskip("num2words", reason="num2words (a runtime dependency) is not installed")

from kcc.speech.g2p.normalize import normalize  # noqa: E402
from kcc.speech.g2p.normalize_rules import TABLES  # noqa: E402

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
