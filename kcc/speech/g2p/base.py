"""What kcc.speech.g2p.g2p and its language backends (g2p_en, g2p_intl, g2p_ja, ...) share: the Word a
backend returns, the errors, the Kokoro vocab, and splitting a phoneme string into words. The
backends import this module, never kcc.speech.g2p.g2p, which dispatches down to them."""
from __future__ import annotations

from dataclasses import dataclass, field

from kcc.model.vocab import load_vocab  # noqa: F401  (re-exported: the vocabulary is the model's)

# Punctuation Kokoro has ids for; peeled off espeak words into their own tokens, as misaki does.
PUNCTUATION = frozenset(';:,.!?—…"“”()')


class G2PError(ValueError):
    """Text cannot be turned into phonemes; the message says what and where."""


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


def peel(token: str, ipa: str) -> list[Word]:
    """Split leading/trailing punctuation off a token's phonemes into one-symbol words."""
    lo, hi = 0, len(ipa)
    while lo < hi and ipa[lo] in PUNCTUATION:
        lo += 1
    while hi > lo and ipa[hi - 1] in PUNCTUATION:
        hi -= 1
    core = token.strip("".join(PUNCTUATION) + "'‘’") or token
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
