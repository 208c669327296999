"""Penn Treebank part-of-speech tags from word lists and a token's neighbours, standing in for
spaCy's en_core_web_sm tagger (which is not on PyPI) where misaki's lexicon reads a tag.

misaki.en reads the tag in few places, and only those are decided with care here:
- punctuation and currency tags, which pick how a token is spoken ('$' then a number is money;
  a spaced '-' is a dash; '"' opens or closes a quote);
- 'CD' for numbers; 'DT' for "a" (else it is the letter name "ˈA": "a well" must not be "A well"),
  'PRP' for "I", 'IN' / 'TO' for "in", "to", "vs.", 'NN' for "AM" after a number (spelled A M);
- the ~790 heteronyms whose lexicon entry is keyed by tag: VERB after "to", a modal or a subject
  pronoun ("to record", "they record"), NOUN after a determiner, possessive or preposition
  ("the record"), ADJ after a form of "be" or an intensifier; VBN for "read"/"wound" after "have"
  or "be". Anything undecided gets the lexicon's DEFAULT reading, as an unknown tag does in misaki.
"""
from __future__ import annotations

import re

DETERMINERS = frozenset("a an the this these those every each some any no another either neither all both".split())
POSSESSIVES = frozenset("my your his its our their her".split())
SUBJECTS = frozenset("i you he she it we they".split())
OBJECTS = frozenset("me him us them myself yourself himself herself itself ourselves themselves".split())
MODALS = frozenset("can could will would shall should may might must 'll 'd do does did n't not".split())
PREPOSITIONS = frozenset(("of in on at by for with from into onto about as than over under after before between "
                          "through during without within upon against among across behind beyond near since "
                          "until toward towards via per like because although though if whether while").split())
BE_HAVE = frozenset("am is are was were be been being 's 're 'm 've have has had having".split())
INTENSIFIERS = frozenset("very so too more most quite rather less least really".split())
CONJUNCTIONS = frozenset("and or but nor yet".split())

_OPEN = {"(": "-LRB-", "[": "-LRB-", "{": "-LRB-", ")": "-RRB-", "]": "-RRB-", "}": "-RRB-",
         "“": "``", "”": "''", "‘": "``", "’": "''"}
_CLAUSE = frozenset([":", ";", "…", "...", "--", "–", "—"])
_CURRENCY = frozenset("$£€")
_SPOKEN_SYMBOLS = {"%": "NN", "&": "CC", "+": "CC", "@": "IN"}


def _word_like(text: str | None) -> bool:
    return bool(text) and any(c.isalnum() for c in text)


def _punct_tag(text: str, space_before: bool, space_after: bool, next_text: str | None) -> str | None:
    if text in _CURRENCY:
        return "$"
    if text in _OPEN:
        return _OPEN[text]
    if text == '"' or text == "'":
        return "``" if space_before and not space_after and _word_like(next_text) else "''"
    if re.fullmatch(r"[.!?]+", text):
        return "."
    if text == ",":
        return ","
    if text in _CLAUSE:
        return ":"
    if text == "-":
        return ":" if space_before or space_after else "HYPH"
    if text == "#":
        return "#"
    if text in _SPOKEN_SYMBOLS:                 # misaki reads these ("percent"); a punctuation tag drops them
        return _SPOKEN_SYMBOLS[text]
    if not _word_like(text):
        return "NFP"
    return None


def _word_tag(word: str, prev: str | None, prev_tag: str | None, nxt: str | None, initial: bool) -> str:
    low = word.lower()
    p = (prev or "").lower()
    followed = _word_like(nxt)
    if any(c.isdigit() for c in word):
        return "CD"
    if low == "a":
        if word == "A" and not initial:
            return "NNP"                                  # "vitamin A", "plan A"
        return "DT" if followed else "NN"
    if low in ("am", "pm") and (word.isupper() or prev_tag == "CD"):
        return "NN"
    if word == "I":
        return "PRP"
    if low == "to":
        return "TO"
    if low in ("vs", "vs."):
        return "IN"
    if low == "in":
        return "IN" if followed else "RP"
    if low == "that":
        return "DT" if initial or not followed or p in PREPOSITIONS else "IN"
    if low == "used":
        return "VBD"
    if low in DETERMINERS:
        return "DT"
    if low in SUBJECTS or low in OBJECTS:
        return "PRP"
    if low in POSSESSIVES:
        return "PRP$"
    if low in PREPOSITIONS:
        return "IN"
    if low in CONJUNCTIONS:
        return "CC"
    if low in ("read", "wound", "reread") and p in BE_HAVE:
        return "VBN"
    if p == "to" or p in MODALS or p in SUBJECTS:
        return "VB"
    if p in BE_HAVE or p in INTENSIFIERS:
        return "JJ"
    if p in DETERMINERS or p in POSSESSIVES or p in PREPOSITIONS or prev_tag == "JJ":
        return "NN"
    if len(word) > 1 and word.isupper() and len(word) <= 4:
        return "NNP"                                      # an acronym: spelled out unless the lexicon knows it
    if word[:1].isupper() and not initial:
        return "NNP"
    return "XX"                                           # unknown: the lexicon's DEFAULT reading


def tag(tokens: list[tuple[str, str]]) -> list[str]:
    """Tags for spaCy-style tokens given as (text, whitespace after it)."""
    tags: list[str] = []
    prev_word, initial = None, True
    for i, (text, ws) in enumerate(tokens):
        nxt = tokens[i + 1][0] if i + 1 < len(tokens) else None
        t = _punct_tag(text, i == 0 or bool(tokens[i - 1][1]), bool(ws), nxt)
        if t is None:
            t = _word_tag(text, prev_word, tags[-1] if tags else None, nxt, initial)
            prev_word, initial = text, False
        elif t in (".", ":"):
            prev_word, initial = None, True
        tags.append(t)
    return tags
