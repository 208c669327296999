"""What kcc.speech.g2p.g2p and its language backends (g2p_en, g2p_intl, g2p_ja, ...) share: the Word a
backend returns, the errors, the Kokoro vocab, and splitting a phoneme string into words. The
backends import this module, never kcc.speech.g2p.g2p, which dispatches down to them."""
from __future__ import annotations

from kcc.speech.g2p.errors import G2PError  # noqa: F401  (re-exported: the backends name it from here)

import difflib
from dataclasses import dataclass, field

from kcc.model.vocab import load_vocab  # noqa: F401  (re-exported: the vocabulary is the model's)

# Punctuation Kokoro has ids for; peeled off espeak words into their own tokens, as misaki does.
PUNCTUATION = frozenset(';:,.!?—…"“”()')


class G2PWarning(UserWarning):
    """Phoneme symbols outside the Kokoro vocab were left out of the ids."""


@dataclass
class Word:
    text: str
    phonemes: str
    whitespace: bool = True          # a space follows it in the phoneme string


@dataclass(frozen=True)
class Unknown:
    symbol: str
    position: int                    # index in the chunk's phoneme string
    word: int                        # index into the chunk's words (-1: a joining space)
    text: str


@dataclass
class Encoded:
    words: list[Word]
    phonemes: str                    # upstream's tokens_to_ps string; its length picks the style row
    ids: list[int]                   # without the boundary 0s
    word_of: list[int]               # per id: index into words, -1 for a joining space
    unknown: list[Unknown] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(w.text + (" " if w.whitespace else "") for w in self.words).strip()


# Sentence marks of other scripts a written word may carry (Devanagari danda, full-width marks).
_SCRIPT_PUNCTUATION = "¿¡।॥。、，！？：；「」『』（）〈〉《》【】・"


def peel(token: str, ipa: str) -> list[Word]:
    """Split leading/trailing punctuation off a token's phonemes into one-symbol words."""
    lo, hi = 0, len(ipa)
    while lo < hi and ipa[lo] in PUNCTUATION:
        lo += 1
    while hi > lo and ipa[hi - 1] in PUNCTUATION:
        hi -= 1
    core = token.strip("".join(PUNCTUATION) + "'‘’" + _SCRIPT_PUNCTUATION) or token
    out = [Word(c, c, False) for c in ipa[:lo]]
    if ipa[lo:hi] or not ipa:
        out.append(Word(core, ipa[lo:hi], False))
    out += [Word(c, c, False) for c in ipa[hi:]]
    return out


def words_from_phonemes(text: str, phonemes: str) -> list[Word]:
    """A phoneme string made for the whole text, as words: split at spaces, punctuation peeled.
    Where its words and the text's whitespace tokens agree in number, each keeps its text;
    otherwise the phonemes stand in for the text (the backend gave no alignment)."""
    groups = phonemes.split()
    tokens = text.split()
    if len(tokens) != len(groups):
        tokens = groups
    words: list[Word] = []
    for token, group in zip(tokens, groups):
        words += peel(token, group)
        words[-1].whitespace = True
    if words:
        words[-1].whitespace = False
    return words


def words_from_tokens(phonemes: str, tokens: list[tuple[str, str]]) -> list[Word] | None:
    """A phoneme string and the backend's own (surface, phonemes) tokens it was made from, as
    words that keep their written text: for scripts without spaces (ja, zh), where the text
    cannot be split like the phonemes. The backend may have joined tokens or moved spaces after
    making them, so each phoneme group takes the tokens whose first non-space symbol falls in it.
    None where the tokens do not spell the string (the caller falls back to words_from_phonemes)."""
    stream = "".join("".join(p.split()) for _, p in tokens)
    if stream != "".join(phonemes.split()):
        return None
    starts: dict[int, list[str]] = {}
    pos = 0
    for surface, p in tokens:
        n = len("".join(p.split()))
        if n:
            starts.setdefault(pos, []).append(surface)
        pos += n
    words: list[Word] = []
    pos = 0
    for group in phonemes.split():
        surface = "".join(s for k in range(pos, pos + len(group)) for s in starts.get(k, ()))
        words += peel(surface.strip() or group, group)
        words[-1].whitespace = True
        pos += len(group)
    if words:
        words[-1].whitespace = False
    return words


def _bare(groups: list[str]) -> str:
    return "".join(c for c in "".join(groups) if c not in "ˈˌː^" and c not in PUNCTUATION)


def align_groups(alone: list[list[str]], context: list[str], joins: list[bool] | None = None,
                 max_merge: int = 3) -> list[list[str]]:
    """Per token, its share of the paragraph's espeak groups. Dynamic programming over (tokens,
    groups): token i takes len(alone[i]) groups, or up to max_merge one-group tokens share one
    group when each after the first may join the word before (joins[i]; the first token gets
    the group, the others nothing). Cost: phoneme mismatch, stress and punctuation ignored.
    Where no alignment exists, each token keeps its isolated phonemes."""
    joins = joins if joins is not None else [True] * len(alone)
    n, m = len(alone), len(context)
    inf = float("inf")
    best = [[inf] * (m + 1) for _ in range(n + 1)]
    step: list[list[tuple[int, int] | None]] = [[None] * (m + 1) for _ in range(n + 1)]
    best[0][0] = 0.0

    def cost(a: list[str], c: list[str]) -> float:
        x, y = _bare(a), _bare(c)
        return (1.0 - difflib.SequenceMatcher(None, x, y).ratio()) * max(len(x), len(y), 1)

    for i in range(n):
        for j in range(m + 1):
            if best[i][j] == inf:
                continue
            k = len(alone[i])
            if j + k <= m:
                c = best[i][j] + cost(alone[i], context[j:j + k])
                if c < best[i + 1][j + k]:
                    best[i + 1][j + k], step[i + 1][j + k] = c, (1, k)
            for t in range(2, max_merge + 1):
                if (i + t <= n and j < m and all(len(alone[i + u]) == 1 for u in range(t))
                        and all(joins[i + u] for u in range(1, t))):
                    c = best[i][j] + cost([g for u in range(t) for g in alone[i + u]], context[j:j + 1]) + 0.5
                    if c < best[i + t][j + 1]:
                        best[i + t][j + 1], step[i + t][j + 1] = c, (t, 1)
    if best[n][m] == inf:
        return alone
    out: list[list[str]] = []
    i, j = n, m
    while i > 0:
        t, k = step[i][j]
        out = [context[j - k:j]] + [[] for _ in range(t - 1)] + out
        i, j = i - t, j - k
    return out


def words_by_alignment(text: str, phonemes: str, alone) -> list[Word]:
    """A phoneme string made for the whole text, as words that keep their text where its groups
    outnumber the text's tokens ("3497" read as four words): each token's share of the groups,
    found by align_groups against alone(token), the token's phonemes read by itself."""
    groups, tokens = phonemes.split(), text.split()
    if len(groups) == len(tokens):
        return words_from_phonemes(text, phonemes)
    shares = align_groups([alone(t).split() for t in tokens], groups)
    if [g for share in shares for g in share] != groups:
        return words_from_phonemes(text, phonemes)
    words: list[Word] = []
    for token, share in zip(tokens, shares):
        words += peel(token, " ".join(share))
        if words:
            words[-1].whitespace = bool(words[-1].phonemes)   # an empty word adds no space
    if words:
        words[-1].whitespace = False
    return words
