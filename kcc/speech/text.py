"""Long text -> chunks of at most 510 phonemes, split where upstream KPipeline splits; whole
sentences share a chunk only up to PACK_PHONEMES.

Text is first cleaned (control characters become spaces: espeak-ng reads a NUL as the end of
its input and would silently drop the rest of the word) and cut into paragraphs at newlines
(KPipeline's split_pattern r'\\n+'); a paragraph whose phonemes exceed the limit is cut before
the word that would overflow, at the last sentence end whose remainder fits, else the last
clause mark, else the last comma or dash, else right there (KPipeline.waterfall_last, a closing
')' or '”' staying with its sentence; the marks of every script: kcc.speech.sentences). A single word longer than the limit is cut
into pieces, with a warning.

Everything here is lazy: a paragraph longer than PIECE_CHARS reaches G2P in pieces cut at
sentence ends, and chunks come out as soon as they are complete, so a book-length text is
planned and spoken in bounded memory with its first audio early.

The limit also follows the frame plan: the back stages are compiled for a max frame count
(kcc.model.pipeline.DEFAULT_MAX_FRAMES), and a chunk's frames grow with its phonemes / speed, so
slow speech gets shorter chunks (chunk_limit).
"""
from __future__ import annotations

import math
import re
import warnings
from collections import deque
from typing import Iterable, Iterator, Sequence

from kcc.model.kokoro import MAX_PHONEMES  # ALBERT's 512 positions less the two boundary tokens
from kcc.speech.g2p.g2p import Word
from kcc.speech.g2p.overrides import INLINE, MAX_OVERRIDE_PHONEMES, MAX_WORD_CHARS
from kcc.speech.sentences import CLOSERS, level, sentence_ends, starts_phrase

# A chunk's frames at speed 1, bounded from above: real Kokoro-82M (default voice, 40 English
# chunks of prose, digits, spelled-out letters and punctuation runs) took 1.2-3.2 frames per
# phoneme on long chunks, and short ones up to 50 frames for 7 phonemes (the boundary tokens).
# Slower speech scales it by 1 / speed. A chunk that still overflows is split and retried
# (kcc.speech.engine), so this bound only keeps retries rare.
FRAME_OVERHEAD, FRAMES_PER_PHONEME = 40.0, 3.2
# A chunk of a long text holds whole sentences up to this many phonemes (a longer sentence is a
# chunk of its own, up to the model's 510): the generator's activations grow with a chunk's
# frames (instance norms over the whole chunk: it cannot run in tiles and give the same audio),
# so chunks filled to 510 phonemes made a long text's `kcc say` peak 4.7x a sentence's and a
# server worker's arena that of its longest chunk. With it, memory follows the longest sentence,
# not the text's length. 175: Kokoro-FastAPI's lower chunk target (175-250 tokens), about two
# ordinary sentences.
PACK_PHONEMES = 175
# G2P gets a long paragraph in pieces of at most this many characters, cut after a sentence end
# (else at a space, else anywhere): spaCy / espeak time grows faster than linearly in one call.
PIECE_CHARS = 2000

# Line and paragraph separators other than \n; every other C0/C1 control character is a space.
_BREAKS = re.compile(r"\r\n?|[\v\f\x1c-\x1e\x85\u2028\u2029]")
_CONTROLS = {c: " " for c in [*range(0x00, 0x20), *range(0x7F, 0xA0)] if c != 0x0A}


def clean_text(text: str) -> str:
    return _BREAKS.sub("\n", text).translate(_CONTROLS)


def paragraphs(text: str) -> list[str]:
    return list(iter_paragraphs(text))


def iter_paragraphs(text: str) -> Iterator[str]:
    for m in re.finditer(r"[^\n]+", text):
        if m.group().strip():
            yield m.group().strip()


def _outside_overrides(paragraph: str, at: int, cut: int) -> int:
    """A cut at paragraph[at + cut] moved off any inline `[word](/phonemes/)` it would split."""
    reach = MAX_WORD_CHARS + MAX_OVERRIDE_PHONEMES + 6
    for m in INLINE.finditer(paragraph, max(0, at + cut - reach), at + cut + reach):
        if m.start() < at + cut < m.end():
            return m.start() - at if m.start() > at else m.end() - at
    return cut


def pieces(paragraph: str, size: int = PIECE_CHARS) -> Iterator[tuple[str, bool]]:
    """(piece, whether a space follows it) for G2P, each <= size characters."""
    at, n = 0, len(paragraph)
    while n - at > size:
        window = paragraph[at:at + size + 1]
        ends = sentence_ends(window, complete=False)
        cut = ends[-1] if ends and ends[-1] > size // 4 else window.rfind(" ") + 1
        if cut <= 0:
            cut = size
        cut = _outside_overrides(paragraph, at, cut)
        piece, at = paragraph[at:at + cut], at + cut
        spaced = piece[-1:].isspace() or paragraph[at:at + 1].isspace()
        while at < n and paragraph[at].isspace():
            at += 1
        if piece.strip():
            yield piece.strip(), spaced
    if paragraph[at:].strip():
        yield paragraph[at:].strip(), False


def frame_estimate(n_phonemes: int, speed: float) -> float:
    """Planned frames for a chunk of n phonemes at `speed`. Kokoro rounds each token's duration
    and makes it at least one frame, which adds up to a frame per token, half on average: fast
    speech (4x: measured 440 frames for 411 phonemes) is bounded by that, not by the rate."""
    return (FRAME_OVERHEAD + FRAMES_PER_PHONEME * n_phonemes) / speed + (n_phonemes + 2) / 2


def chunk_limit(limit: int, speed: float, max_frames: int) -> int:
    """The largest phoneme count <= limit whose frame estimate fits max_frames (at least 1: the
    duration predictor gives a token at most 50 / speed frames, so one phoneme fits any plan of
    150 / speed frames or more)."""
    fits = math.floor((max_frames - FRAME_OVERHEAD / speed - 1) / (FRAMES_PER_PHONEME / speed + 0.5) + 1e-9)
    return max(1, min(limit, fits))


def phoneme_string(words: list[Word]) -> str:
    """KPipeline.tokens_to_ps: each word's phonemes, a space where whitespace follows, stripped."""
    return "".join(w.phonemes + (" " if w.whitespace else "") for w in words).strip()


def _split_long(words: Iterable[Word], limit: int) -> Iterator[Word]:
    for w in words:
        if len(w.phonemes) <= limit:
            yield w
            continue
        cuts = [w.phonemes[i:i + limit] for i in range(0, len(w.phonemes), limit)]
        warnings.warn(f"word {w.text[:40]!r} has {len(w.phonemes)} phonemes, over the {limit}-phoneme "
                      f"chunk limit; it is cut into {len(cuts)} pieces", stacklevel=4)
        yield from [Word(w.text, p, False) for p in cuts[:-1]]
        yield Word(w.text, cuts[-1], w.whitespace)


def word_level(w: Word) -> int | None:
    """The break after a word (kcc.speech.sentences.level): its punctuation phonemes, or its text
    where the G2P dropped an unspaced mark ('है।' -> 'hɛː' still ends a sentence)."""
    if w.phonemes:
        got = level(w.phonemes)
        if got is not None:
            return got
    return level(w.text) if w.text and w.text != w.phonemes else None


def _after_last(words: list[Word], levels: list[int | None], n: int) -> int | None:
    """How many of `words` end with the last break of level n (a closing quote or bracket staying
    with its sentence), or None when there is none."""
    z = next((i for i in range(len(words) - 1, -1, -1) if levels[i] == n), None)
    if z is None:
        return None
    z += 1
    if z < len(words) and words[z].phonemes and not words[z].phonemes.strip(CLOSERS):
        z += 1
    return z


def _cut(words: list[Word], incoming: Word, limit: int, natural: bool = False) -> int | None:
    """How many of `words` form the chunk, so that the rest plus `incoming` fits the limit: after
    the last sentence end that allows it, else clause mark, else comma; else all of them (or
    None when `natural`: no boundary in the text allows the cut)."""
    levels = [word_level(w) for w in words]
    for n in range(3):
        z = _after_last(words, levels, n)
        if z is not None and len(phoneme_string(words[z:] + [incoming])) <= limit:
            return z
    return None if natural else len(words)


def _sentences_cut(words: list[Word]) -> int | None:
    """How many of `words` are whole sentences (after the last sentence end), or None."""
    return _after_last(words, [word_level(w) for w in words], 0)


def _phrase_cut(words: list[Word], incoming: Word, limit: int) -> int | None:
    """How many of `words` form a short chunk ending before a phrase's first word (starts_phrase):
    before `incoming` if it starts one, else before the last word in `words` that does and leaves
    the rest plus `incoming` within the limit; never fewer than two words. Past 3 x the limit
    with no phrase in sight, at the last word boundary (a stream's first audio is never delayed
    by a long sentence without marks)."""
    if len(words) >= 2 and starts_phrase(incoming.text):
        return len(words)
    for z in range(len(words) - 1, 1, -1):
        if starts_phrase(words[z].text) and len(phoneme_string(words[z:] + [incoming])) <= limit:
            return z
    return len(words) if len(phoneme_string(words + [incoming])) > 3 * limit else None


def iter_chunks(words: Iterable[Word], limit: int = MAX_PHONEMES,
                first_limit: int | Sequence[int] | None = None, min_rest: int = 0,
                pack: int | None = None) -> Iterator[list[Word]]:
    """Consecutive runs of `words` (all of them, in order), each run's phoneme string <= limit.

    first_limit: the first run's limit, or the first runs' limits in order (a ramp: short runs
    first, so the first audio comes early and each next run is made while the last one plays);
    a short run ends only at a boundary of the text (sentence, clause, comma): where none
    allows the cut it grows, up to `limit`, until one does.
    min_rest: a run is cut short of `limit` only when at least min_rest phonemes follow the cut
    in `words`, so a short sentence stays one run instead of ending in a fragment.
    pack: a run holds whole sentences while they fit `pack` phonemes and ends at the last
    sentence end before the one that would overflow it; a single sentence longer than `pack`
    grows alone, up to `limit` (PACK_PHONEMES says why). None: runs fill up to `limit`."""
    if limit < 1:
        raise ValueError(f"chunk limit must be positive, got {limit}")
    ramp = [first_limit] if isinstance(first_limit, int) else list(first_limit or ())
    if any(not isinstance(n, int) or n < 1 for n in ramp):
        raise ValueError(f"first chunk limits must be positive whole numbers, got {first_limit!r}")
    source, ahead = _split_long(words, limit), deque()
    current: list[Word] = []
    k = 0                                 # runs yielded so far

    def lim() -> int:
        return min(limit, ramp[k]) if k < len(ramp) else limit

    def rest_at_least(rest: list[Word], n: int) -> bool:
        while len(phoneme_string(rest + list(ahead))) < n:
            w = next(source, None)
            if w is None:
                return False
            ahead.append(w)
        return True

    while True:
        w = ahead.popleft() if ahead else next(source, None)
        if w is None:
            break
        grown = len(phoneme_string(current + [w])) if current else 0
        if pack is not None and pack < lim() and grown > pack:
            z = _sentences_cut(current)
            if z is not None:
                yield current[:z]
                k += 1
                current = current[z:]
                grown = len(phoneme_string(current + [w])) if current else 0
        if grown > lim():
            short = lim() < limit
            z = _cut(current, w, lim(), natural=short)
            if z is None and short:       # no mark allows it: before a phrase's first word
                z = _phrase_cut(current, w, lim())
            if z is None:                 # a short run ends only where the text does: grow it
                if grown <= limit:
                    current.append(w)
                    continue
                z = _cut(current, w, limit)
            if short and min_rest > 0 and not rest_at_least(current[z:] + [w], min_rest):
                ramp = ramp[:k]           # too little follows: no more short runs
                if grown > limit:
                    z = _cut(current, w, limit)
                else:
                    current.append(w)
                    continue
            if current[:z]:
                yield current[:z]
                k += 1
            current = current[z:]
        current.append(w)
    if current:
        yield current


def chunk_words(words: list[Word], limit: int = MAX_PHONEMES) -> list[list[Word]]:
    return list(iter_chunks(words, limit))
