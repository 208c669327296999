"""Text normalisation before G2P: one table-driven stage that rewrites what people write
("3/4", "Henry VIII", "60 km/h", "bob@example.org", "12/25/2024") into what a careful narrator
says, leaving everything else exactly as it was.

Each language's rules live in one table (kcc.speech.g2p.normalize_rules.<lang>): an ordered
tuple of Rule's, each one pattern, one replacement and the cases it must read (tests/
test_normalize_rules.py and bench/normalization_report.py run every case). A rule sees the text
the rules before it left, so the order is part of the table (URLs before decimals, dates before
fractions).

English has two readers: misaki's lexicon (kcc's default, upstream's reader, which reads money,
decimals and thousands groups itself) and espeak-ng (which needs them spelled); a Rule says which
it serves. es, fr-fr, it, pt-br and hi go to espeak-ng, ja to pyopenjtalk, zh to misaki's ZHG2P:
they read plain digits in their own words, and their tables spell what those readers miss.
"""
from __future__ import annotations

from kcc.speech.g2p.normalize_rules import table
from kcc.speech.g2p.normalize_rules.base import Context, Rule, num2words  # noqa: F401  (re-exported)
from kcc.speech.g2p.normalize_rules.en import fold_rare_diacritics  # noqa: F401  (re-exported)


def normalize(text: str, british: bool = False, lexicon: bool = False, language: str | None = None) -> str:
    """The text as spoken, by the language's rule table (see the module doc).

    language: kcc's language code (default en-gb if british else en-us).
    lexicon: (English) misaki's lexicon reads what follows, so what it reads itself as upstream
    does (money, decimals, thousands groups) is left to it."""
    ctx = Context(language or ("en-gb" if british else "en-us"), lexicon)
    for rule in table(ctx.language):
        text = rule.apply(text, ctx)
    return text
