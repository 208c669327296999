"""Normalisation rule tables, one module per language (kcc.speech.g2p.normalize runs them).
A language without a table of its own has no rules: its reader gets the text as written."""
from __future__ import annotations

from kcc.speech.g2p.normalize_rules import cjk, en, intl
from kcc.speech.g2p.normalize_rules.base import Rule

_BUILT: dict[str, tuple[Rule, ...]] = {"en-us": en.RULES, "en-gb": en.RULES, "ja": cjk.JA, "zh": cjk.ZH}


def table(language: str) -> tuple[Rule, ...]:
    """The language's rules; es, fr-fr, it, pt-br and hi are built when first asked for (an
    English reader never builds them)."""
    if language not in _BUILT and language in intl.SPEECH:
        _BUILT[language] = intl.build(intl.SPEECH[language])
    return _BUILT.get(language, ())


LANGUAGES = ("en-us", "en-gb", *intl.SPEECH, "ja", "zh")


def tables() -> dict[str, tuple[Rule, ...]]:
    """Every language's table (tests and reports)."""
    return {language: table(language) for language in LANGUAGES}
