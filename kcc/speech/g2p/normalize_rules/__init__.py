"""Normalisation rule tables, one module per language (kcc.speech.g2p.normalize runs them).
A language without a table of its own has no rules: its reader gets the text as written."""
from __future__ import annotations

from kcc.speech.g2p.normalize_rules import cjk, en
from kcc.speech.g2p.normalize_rules.base import Rule

_BUILT: dict[str, tuple[Rule, ...]] = {"en-us": en.RULES, "en-gb": en.RULES, "ja": cjk.JA, "zh": cjk.ZH}
# The languages of kcc.speech.g2p.normalize_rules.intl, imported and built when first read.
INTL = ("es", "fr-fr", "it", "pt-br", "hi")
LANGUAGES = ("en-us", "en-gb", *INTL, "ja", "zh")


def table(language: str) -> tuple[Rule, ...]:
    """The language's rules."""
    if language not in _BUILT and language in INTL:
        from kcc.speech.g2p.normalize_rules.intl import SPEECH, build
        _BUILT[language] = build(SPEECH[language])
    return _BUILT.get(language, ())


def tables() -> dict[str, tuple[Rule, ...]]:
    """Every language's table (tests and reports)."""
    return {language: table(language) for language in LANGUAGES}
