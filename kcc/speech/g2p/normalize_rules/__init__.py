"""Normalisation rule tables, one module per language (kcc.speech.g2p.normalize runs them).
A language without a table of its own has no rules: its reader gets the text as written."""
from __future__ import annotations

from kcc.speech.g2p.normalize_rules import cjk, en, intl
from kcc.speech.g2p.normalize_rules.base import Rule

TABLES: dict[str, tuple[Rule, ...]] = {"en-us": en.RULES, "en-gb": en.RULES, **intl.TABLES, "ja": cjk.JA, "zh": cjk.ZH}


def table(language: str) -> tuple[Rule, ...]:
    return TABLES.get(language, ())
