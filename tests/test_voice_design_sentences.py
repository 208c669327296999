"""What a voice design speaks: every language kcc speaks has its scoring, rotating and held-out
sentences, disjoint, each one chunk its G2P reads."""
from __future__ import annotations

import re

import pytest

from kcc.speech.engine import plan
from kcc.speech.g2p.g2p import G2P
from kcc.speech.languages import LANGUAGES
from kcc.speech.voice_design.sentences import SENTENCES, sentences_of


def test_every_language_has_its_sentences():
    assert {code.split("-")[0] for code in LANGUAGES} == set(SENTENCES)
    assert sentences_of("en-gb") is sentences_of("en-us") is SENTENCES["en"]
    assert sentences_of("pt-br") is SENTENCES["pt"] and sentences_of("fr-fr") is SENTENCES["fr"]


@pytest.mark.parametrize("key", sorted(SENTENCES))
def test_scoring_rotating_and_held_out_are_disjoint_and_sized(key):
    from bench.voice_design import TARGET_TEXT
    s = SENTENCES[key]
    assert (len(s.scoring), len(s.more), len(s.held_out)) == (3, 12, 3)
    assert s.rotating[:3] == s.scoring and len(set(s.rotating)) == 15
    assert not set(s.held_out) & set(s.rotating) and len(set(s.held_out)) == 3
    assert all(not re.search(r"\d", t) for t in (*s.rotating, *s.held_out))     # numbers read as words
    assert TARGET_TEXT not in s.rotating + s.held_out


@pytest.mark.parametrize("code", sorted(LANGUAGES))
def test_each_sentence_is_one_chunk_its_language_reads(code):
    g2p = G2P(code)
    s = sentences_of(code)
    for text in (*s.rotating, *s.held_out):
        chunks = list(plan(text, g2p))
        assert len(chunks) == 1, (text, [c.phonemes for c in chunks])
        assert 12 <= len(chunks[0].phonemes) <= 175, (text, chunks[0].phonemes)
