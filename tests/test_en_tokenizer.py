"""kcc.speech.g2p.en_tokenizer splits English exactly as spaCy's rule tokenizer (spacy.blank("en")),
from the shipped table alone."""
from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

from kcc.speech.g2p.en_tokenizer import TABLE, ByAlphabet, EnglishTokenizer, ascii_pattern, english

ROOT = Path(__file__).resolve().parent.parent
HAVE_SPACY = importlib.util.find_spec("spacy") is not None


@pytest.mark.parametrize("text, want", [
    ("I'm sure it's fine, isn't it?", [("I", ""), ("'m", " "), ("sure", " "), ("it", ""), ("'s", " "),
                                       ("fine", ""), (",", " "), ("is", ""), ("n't", " "), ("it", ""), ("?", "")]),
    ("(a.m.)", [("(", ""), ("a.m.", ""), (")", "")]),                       # special case inside affixes
    ("well-known", [("well", ""), ("-", ""), ("known", "")]),                  # an infix
    ("a  b", [("a", " "), (" ", ""), ("b", "")]),                             # an extra space is a token
    ("end \n", [("end", " "), ("\n", "")]),
    (" lead", [(" ", ""), ("lead", "")]),
    ("$5.00!", [("$", ""), ("5.00", ""), ("!", "")]),
    ("see http://example.com/a?b=1 now", [("see", " "), ("http://example.com/a?b=1", " "), ("now", "")]),
    ("", []),
])
def test_known_splits(text, want):
    assert english()(text) == want


def test_every_character_is_kept_once():
    """Tokens and their spaces rebuild the text exactly (the G2P's word offsets rely on it)."""
    rnd = random.Random(7)
    alphabet = list("abcXYZ019 .,;:!?'\"()-–—$%&/@#*\n\t") + ["n't", "'s", "a.m.", "Dr.", ":)", "e.g."]
    tok = english()
    for _ in range(3000):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 24)))
        assert "".join(t + w for t, w in tok(text)) == text, text


PIECES = list("abcXYZ019 .,;:!?'\"()[]{}<>-–—…$€£%&/@#*+=_~`\n\t") + [
    "n't", "'s", "'re", "a.m.", "p.m.", "Dr.", "Mr.", ":)", ";-)", "e.g.", "U.S.", "http://a.b/c", "x@y.com",
    "5km", "3-4", "1,000", "O'Neil", "rock'n'roll", "...", "--"]


def _random_strings(pieces: list[str], n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(pieces) for _ in range(rnd.randint(1, 24))) for _ in range(n)]


def _corpus() -> list[str]:
    lines = []
    for f in ("README.md", "docs/ARCHITECTURE.md", "kcc/speech/g2p/normalize.py", "tests/test_g2p.py",
              "tests/test_normalize.py", "tests/test_languages.py"):
        lines += (ROOT / f).read_text(encoding="utf-8").splitlines()
    return lines + _random_strings(PIECES, 8000, seed=0)


@pytest.mark.skipif(not HAVE_SPACY, reason="spacy==3.8.18 (dev extra) is not installed")
def test_splits_a_corpus_exactly_as_spacy():
    import spacy
    nlp, ours = spacy.blank("en"), english()
    bad = [(s, [(t.text, t.whitespace_) for t in nlp(s)], ours(s))
           for s in _corpus() if [(t.text, t.whitespace_) for t in nlp(s)] != ours(s)]
    assert not bad, bad[:3]


@pytest.mark.parametrize("pattern, want", [
    ("[a-z\\u00e0-\\u00ff]x", "[a-z]x"),                  # non-ASCII range dropped
    ("[\\u0020-\\u00ff]", "[\\u0020-\\x7f]"),                # a range across 0x7F is cut there
    ("[\\u00e0\\u00e9]$", "[\\x80]$"),                     # emptied: matches no ASCII character
    ("[^\\u00e0\\u00e9]", "[^\\x80]"),                     # negated and emptied: any ASCII character
    ("[\\w\\-\\]…|…|,]+", "[\\w\\-\\]|,]+"),                # escapes kept, repeats meet once
    ("[]é]", "[]]"),                                     # ']' first in a class is a member
    ("…$|\\[x", "…$|\\[x"),                               # outside classes: unchanged
    ("(?i)[\\u017f]", "(?i)[\\u017f]"),                     # case folding: 's' matches U+017F
])
def test_ascii_pattern(pattern, want):
    assert ascii_pattern(pattern) == want


def test_ascii_rules_split_ascii_text_as_the_full_rules():
    """The ASCII rules (ascii_pattern of every rule) are what ASCII text is split with: on every
    ASCII string of the corpus they must give what the full rules give."""
    table = json.loads(TABLE.read_text(encoding="utf-8"))
    fast, full = EnglishTokenizer(table, ascii_only=True), EnglishTokenizer(table)
    texts = [s for s in _corpus() if s.isascii()] + _random_strings([p for p in PIECES if p.isascii()], 6000, seed=1)
    assert len(texts) > 10000
    bad = [(s, full(s), fast(s)) for s in texts if full(s) != fast(s)]
    assert not bad, bad[:3]


def test_ascii_text_never_builds_the_full_rules():
    tok = ByAlphabet(json.loads(TABLE.read_text(encoding="utf-8")))
    tok("Hello from generated C., it's 5:30pm (e.g. U.S.A.)")
    assert list(tok._rules) == [True]
    assert tok("Café au lait.") == [("Café", " "), ("au", " "), ("lait", ""), (".", "")]
    assert sorted(tok._rules) == [False, True]


@pytest.mark.skipif(not HAVE_SPACY, reason="spacy==3.8.18 (dev extra) is not installed")
def test_shipped_table_equals_what_spacy_gives():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from make_en_tokenizer_table import spacy_table
    finally:
        sys.path.pop(0)
    shipped = json.loads(TABLE.read_text(encoding="utf-8"))
    assert shipped == spacy_table()
    assert len(shipped["special"]) > 1000 and "n't" in shipped["special"]["can't"][1]
