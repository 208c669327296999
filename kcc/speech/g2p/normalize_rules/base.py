"""What every rule table is made of: Rule (one pattern, its replacement, its cases) and the
Context a replacement may read. kcc.speech.g2p.normalize runs the tables."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

BOTH = frozenset(("lexicon", "espeak"))
ESPEAK = frozenset(("espeak",))


def num2words(*args, **kwargs) -> str:
    """num2words.num2words, imported on first use: the import costs ~30 ms of a warm `kcc say`,
    and most sentences have no number. misaki.en is given this one too (kcc.speech.g2p.en)."""
    from num2words import num2words as spell
    return spell(*args, **kwargs)


def words(n: int | float | str, **kwargs) -> str:
    """num2words without its commas, "and"s and hyphens: misaki reads a hyphenated number as
    one word with one stress, and espeak-ng phonemises a comma as a pause."""
    text = num2words(n, **kwargs)
    if kwargs.get("lang", "en") == "en":
        text = text.replace(" and ", " ")
    return text.replace(",", "").replace("-", " ")


@dataclass(frozen=True)
class Context:
    """What a replacement may depend on: the language, and (English) which reader follows."""
    language: str = "en-us"
    lexicon: bool = True

    @property
    def british(self) -> bool:
        return self.language == "en-gb"


DIGITS = tuple("0123456789")


class Pattern:
    """A regular expression compiled on first use: the tables hold ~100 patterns, and a process
    that reads only prose never needs the number rules' (compiling them all costs ~15 ms of start-up)."""

    def __init__(self, source: str, flags: int = 0):
        self.pattern, self.flags = source, flags
        self._compiled: re.Pattern | None = None

    @property
    def compiled(self) -> re.Pattern:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern, self.flags)
        return self._compiled

    def sub(self, repl, text: str) -> str:
        return self.compiled.sub(repl, text)


@dataclass(frozen=True)
class Rule:
    """One kind of span and how it is said.

    name: the class it belongs to (the report's rows; several rules may share one);
    pattern: what it rewrites; replace: (match, Context) -> spoken text (match[0] keeps it);
    cases: (written, spoken) pairs, each checked through normalize() for the table's language on
    every path the rule serves; paths: English readers it serves ('lexicon', 'espeak');
    needs: strings one of which the text must hold for the rule to look at it (a cheap test
    that skips, say, every number rule on a sentence without digits, and leaves its pattern
    uncompiled)."""
    name: str
    pattern: Pattern
    replace: Callable[[re.Match, Context], str]
    cases: tuple[tuple[str, str], ...] = ()
    paths: frozenset = field(default=BOTH)
    needs: tuple[str, ...] = ()

    def apply(self, text: str, ctx: Context) -> str:
        if ("lexicon" if ctx.lexicon else "espeak") not in self.paths:
            return text
        if self.needs and not any(n in text for n in self.needs):
            return text
        return self.pattern.sub(lambda m: self.replace(m, ctx), text)
