"""Where text ends: the one sentence / clause rule of every language, read by the chunk planner
(kcc.speech.text), the engine's joins, the caption writer, the server's streaming G2P pieces,
Wyoming's streamed text and the book's layout.

Three levels, strongest first (upstream KPipeline's waterfall, with the marks of the scripts
Kokoro speaks): a sentence end (. ! ? … and CJK 。！？ and Devanagari । ॥), a clause mark
(: ; and CJK ：；), a comma or dash (, — and CJK 、，). Closing quotes and brackets after a mark
stay with it. An ASCII full stop ends a sentence only before whitespace or the end of the text
("3.14", "e.g." inside a word stay whole); the CJK and Devanagari marks need no space after
them, since those scripts put none there.
"""
from __future__ import annotations

import re

SENTENCE_MARKS = ".!?…。！？．｡।॥"
CLAUSE_MARKS = ":;：；"
COMMA_MARKS = ",—、，､"
# Upstream's waterfall, one string per level (a mark standing alone as a word's phonemes).
LEVELS = (SENTENCE_MARKS, CLAUSE_MARKS, COMMA_MARKS)
CLOSERS = "\"'”’»)]」』）】"
# The marks that are never part of an abbreviation or a number: a word's text ending in one ends
# a sentence even where the G2P drops the mark from the phonemes (espeak-ng reads 'है।' as 'hɛː').
_UNSPACED_SENTENCE = "。！？．｡।॥"
_UNSPACED = _UNSPACED_SENTENCE + "：；、，､"

_C = re.escape(CLOSERS)
# A sentence end in running text: ASCII marks before whitespace (or the end, with at_end=True);
# the unspaced ones anywhere.
_SENTENCE_END = re.compile(rf"[{re.escape(SENTENCE_MARKS)}]+[{_C}]*(?=\s|$)|[{_UNSPACED_SENTENCE}]+[{_C}]*\s*")
_SENTENCE_END_SPACED = re.compile(rf"[{re.escape(SENTENCE_MARKS)}]+[{_C}]*\s+|[{_UNSPACED_SENTENCE}]+[{_C}]*\s*")


def sentence_ends(text: str, complete: bool = True) -> list[int]:
    """Offsets just after each sentence end in `text` (and after the spaces that follow it).
    complete=False: the text may go on (a stream): an ASCII mark counts only once whitespace
    follows it, so "3." waits for "14"."""
    pattern = _SENTENCE_END if complete else _SENTENCE_END_SPACED
    return [m.end() for m in pattern.finditer(text)]


def split_sentences(text: str) -> list[str]:
    """`text` cut after each sentence end, each piece stripped, empty ones dropped."""
    out, at = [], 0
    for end in sentence_ends(text):
        out.append(text[at:end].strip())
        at = end
    out.append(text[at:].strip())
    return [s for s in out if s]


def level(token: str) -> int | None:
    """The break a token makes: 0 a sentence end, 1 a clause mark, 2 a comma or dash, None none.
    The token is a word's punctuation (its phonemes, '.' or '、') or its text; closers are
    looked through ('done."' ends a sentence). An ASCII mark counts only as the whole token
    (after closers), so the text 'Dr.' of a spoken word is no sentence end, while a word 'है।'
    whose G2P dropped its danda still ends one."""
    core = token.strip().rstrip(CLOSERS)
    if not core:
        return None
    for n, marks in enumerate(LEVELS):
        if all(c in marks for c in core) or core[-1] in marks and core[-1] in _UNSPACED:
            return n
    return None


# Words a phrase starts with (conjunctions, prepositions, relative words) in the Latin-script
# languages Kokoro speaks. The weakest boundary: used only to end a stream's first short chunks
# where no mark does, so that the first audio stops where a reader could breathe ("The quick
# brown fox jumps | over the lazy dog"), the same place at any load.
PHRASE_STARTS = frozenset("""
    and but or nor so yet because although though while whereas unless until since when where
    whenever wherever if that which who whom whose what how why after before as than
    about above across against along among around at behind below beneath beside between beyond
    by despite down during except for from in inside into like near of off on onto out outside over
    past through throughout to toward towards under underneath unlike up upon via with within without
    y o pero porque aunque cuando donde que como si para por con sin sobre entre hasta desde hacia
    et ou mais donc car parce lorsque quand où qui dont comme pour avec sans sur sous dans entre vers
    chez depuis pendant e ma perché quando dove che come se per con senza su tra fra verso durante
    mas porém quando onde porque como para com sem sobre entre até desde durante
""".split())


def starts_phrase(word: str) -> bool:
    """A word a phrase starts with (PHRASE_STARTS), whatever its case."""
    return word.strip().lower() in PHRASE_STARTS


def ends_sentence(token: str) -> bool:
    """A caption word, a line or a chunk's last text that closes a sentence."""
    core = token.strip().rstrip(CLOSERS)
    return bool(core) and core[-1] in SENTENCE_MARKS
