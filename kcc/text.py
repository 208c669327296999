"""Long text -> chunks of at most 510 phonemes, split where upstream KPipeline splits.

Text is first cut into paragraphs at newlines (KPipeline's split_pattern r'\\n+'); a paragraph
whose phonemes exceed the limit is cut before the word that would overflow, at the last
sentence end (!.?…) whose remainder fits, else the last clause mark (:;), else the last comma
or dash, else right there (KPipeline.waterfall_last, a closing ')' or '”' staying with its
sentence). A single word longer than the limit is cut into pieces, with a warning.
"""
from __future__ import annotations

import re
import warnings

from kcc.g2p import Word

MAX_PHONEMES = 510                       # ALBERT's 512 positions less the two boundary tokens
WATERFALL = ("!.?…", ":;", ",—")
BUMPS = (")", "”")


def paragraphs(text: str) -> list[str]:
    return [p for p in re.split(r"\n+", text.strip()) if p.strip()]


def phoneme_string(words: list[Word]) -> str:
    """KPipeline.tokens_to_ps: each word's phonemes, a space where whitespace follows, stripped."""
    return "".join(w.phonemes + (" " if w.whitespace else "") for w in words).strip()


def _split_long(words: list[Word], limit: int) -> list[Word]:
    out = []
    for w in words:
        if len(w.phonemes) <= limit:
            out.append(w)
            continue
        warnings.warn(f"word {w.text[:40]!r} has {len(w.phonemes)} phonemes, over the {limit}-phoneme "
                      "chunk limit; it is cut into pieces", stacklevel=3)
        pieces = [w.phonemes[i:i + limit] for i in range(0, len(w.phonemes), limit)]
        out += [Word(w.text, p, False) for p in pieces[:-1]] + [Word(w.text, pieces[-1], w.whitespace)]
    return out


def _cut(words: list[Word], incoming: Word, limit: int) -> int:
    """How many of `words` form the chunk, so that the rest plus `incoming` fits the limit."""
    for marks in WATERFALL:
        z = next((i for i in range(len(words) - 1, -1, -1) if words[i].phonemes and words[i].phonemes in marks), None)
        if z is None:
            continue
        z += 1
        if z < len(words) and words[z].phonemes in BUMPS:
            z += 1
        if len(phoneme_string(words[z:] + [incoming])) <= limit:
            return z
    return len(words)


def chunk_words(words: list[Word], limit: int = MAX_PHONEMES) -> list[list[Word]]:
    """Consecutive runs of `words` (all of them, in order), each run's phoneme string <= limit."""
    if limit < 1:
        raise ValueError(f"chunk limit must be positive, got {limit}")
    chunks: list[list[Word]] = []
    current: list[Word] = []
    for w in _split_long(words, limit):
        if current and len(phoneme_string(current + [w])) > limit:
            z = _cut(current, w, limit)
            chunks.append(current[:z])
            current = current[z:]
        current.append(w)
    if current:
        chunks.append(current)
    return [c for c in chunks if c]
