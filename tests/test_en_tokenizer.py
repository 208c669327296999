"""kcc.speech.en_tokenizer splits English exactly as spaCy's rule tokenizer (spacy.blank("en")),
from the shipped table alone."""
from __future__ import annotations

import importlib.util
import json
import random
import sys
from pathlib import Path

import pytest

from kcc.speech.en_tokenizer import TABLE, english

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


def _corpus() -> list[str]:
    lines = []
    for f in ("README.md", "docs/ARCHITECTURE.md", "kcc/speech/normalize.py", "tests/test_g2p.py",
              "tests/test_normalize.py", "tests/test_languages.py"):
        lines += (ROOT / f).read_text(encoding="utf-8").splitlines()
    rnd = random.Random(0)
    alphabet = list("abcXYZ019 .,;:!?'\"()[]{}<>-–—…$€£%&/@#*+=_~`\n\t") + [
        "n't", "'s", "'re", "a.m.", "p.m.", "Dr.", "Mr.", ":)", ";-)", "e.g.", "U.S.", "http://a.b/c", "x@y.com",
        "5km", "3-4", "1,000", "O'Neil", "rock'n'roll", "...", "--"]
    lines += ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 24))) for _ in range(8000)]
    return lines


@pytest.mark.skipif(not HAVE_SPACY, reason="spacy==3.8.18 (dev extra) is not installed")
def test_splits_a_corpus_exactly_as_spacy():
    import spacy
    nlp, ours = spacy.blank("en"), english()
    bad = [(s, [(t.text, t.whitespace_) for t in nlp(s)], ours(s))
           for s in _corpus() if [(t.text, t.whitespace_) for t in nlp(s)] != ours(s)]
    assert not bad, bad[:3]


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
