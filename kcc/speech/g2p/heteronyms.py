"""Heteronym senses misaki's lexicon has no tag for, decided from the neighbouring words.

misaki's gold lexicon keys most heteronyms by part of speech ("record": noun / verb), which
kcc.speech.g2p.tagger decides. A few differ by meaning within one part of speech, or have one
entry only: "lead" the metal (lɛd) beside the verb, "does" the deer (dOz) beside the verb, "row"
the quarrel (ɹW) beside the line, "tear" the rip (tɛɹ) beside the drop. spaCy's tagger cannot
tell these apart either (upstream reads them all one way). Here each sense is a table row: the
phonemes and the neighbours that signal it; SenseTable adds the senses to the lexicon's entries
and senses() marks a token with its sense's key, which misaki's Lexicon.lookup then picks as it
picks a tag ("METAL" is just another key of the entry).
"""
from __future__ import annotations

from collections.abc import Mapping

from kcc.speech.g2p.tagger import DETERMINERS, POSSESSIVES

# word -> {sense key: phonemes}; the lexicon's own readings stay as they are.
SENSES: dict[str, dict[str, str]] = {
    "lead": {"METAL": "lˈɛd"}, "tear": {"RIP": "tˈɛɹ"}, "tears": {"RIP": "tˈɛɹz"},
    "does": {"DEER": "dˈOz"}, "row": {"QUARREL": "ɹˈW"}, "rows": {"QUARREL": "ɹˈWz"},
}

# "lead" the metal: what it is made into or measured in, and the phrases around the element.
_METAL_AFTER = frozenset(("pipe pipes paint poisoning weight weights pencil pencils shot bullet bullets crystal "
                          "acetate oxide roof roofs level levels mine mines ore soldier soldiers balloon content "
                          "exposure sheet sheets glass contamination particles alloy").split())
_METAL_BEFORE = frozenset("contained contains contain containing toxic molten heavy poisonous".split())
_METAL_PHRASES = (("as",), ("of",), ("exposure", "to"), ("with",))
# "does" the deer: after a determiner, a number or a herd word, never after a subject.
_DEER_BEFORE = DETERMINERS | POSSESSIVES | frozenset(("two three four five six several many few young female wild "
                                                     "and the").split())
# "row" the quarrel.
_QUARREL_BEFORE = frozenset(("blazing terrible furious almighty bitter huge massive big heated public diplomatic "
                             "political family noisy flaming violent").split())
_QUARREL_AFTER = frozenset("about over broke erupted blew between".split())
# "tear" the rip: in or on something that is not an eye.
_EYES = frozenset("eye eyes cheek cheeks face".split())
_RIP_BEFORE = frozenset("muscle ligament meniscus rotator small big large tiny long wear".split())


def _words(pairs: list[tuple[str, str]]) -> list[str]:
    return [t.lower() for t, _ in pairs]


def _lead(w: list[str], i: int, tag: str) -> str | None:
    nxt = w[i + 1] if i + 1 < len(w) else ""
    prev = w[i - 1] if i else ""
    if nxt in _METAL_AFTER or prev in _METAL_BEFORE or nxt == "-" and i + 2 < len(w) and w[i + 2] == "free":
        return "METAL"
    if prev == "as" and i >= 2 and w[i - 2] in ("heavy", "grey", "gray", "dull"):
        return "METAL"                                    # "heavy as lead"
    if tuple(w[max(0, i - 2):i]) == ("exposure", "to") or (prev == "of" and i >= 2 and
                                                           w[i - 2] in ("levels", "traces", "made", "pound", "ton")):
        return "METAL"
    return None


def _does(w: list[str], i: int, tag: str) -> str | None:
    prev = w[i - 1] if i else ""
    nxt = w[i + 1] if i + 1 < len(w) else ""
    if prev in _DEER_BEFORE or nxt == "and" and i + 2 < len(w) and w[i + 2] in ("stags", "bucks", "fawns", "a"):
        return "DEER"
    return None


def _row(w: list[str], i: int, tag: str) -> str | None:
    prev = w[i - 1] if i else ""
    nxt = w[i + 1] if i + 1 < len(w) else ""
    if prev in _QUARREL_BEFORE or nxt in _QUARREL_AFTER:
        return "QUARREL"
    if nxt == "with" and i + 2 < len(w) and w[i + 2] in DETERMINERS | POSSESSIVES | {"him", "her", "them"}:
        return "QUARREL"                                  # "a row with his boss" (not "row with oars")
    return None


def _tear(w: list[str], i: int, tag: str) -> str | None:
    if tag.startswith("VB"):
        return None
    prev = w[i - 1] if i else ""
    if prev in _RIP_BEFORE or (prev == "and" and i >= 2 and w[i - 2] == "wear"):
        return "RIP"
    if i + 1 < len(w) and w[i + 1] in ("in", "on"):
        rest = w[i + 2:i + 5]
        if not any(x in _EYES for x in rest) and prev in DETERMINERS | POSSESSIVES:
            return "RIP"                                  # "a tear in the fabric", not "a tear in her eye"
    return None


# "bass" the low voice or instrument (misaki's ADJ reading, bAs) near music; else the tag decides.
_MUSIC = frozenset(("guitar guitarist guitars player players line lines drum drums clef speaker speakers sing sings "
                    "sang singer play plays played playing treble amp note notes voice baritone boost volume "
                    "choir band solo").split())


def _bass(w: list[str], i: int, tag: str) -> str | None:
    near = w[max(0, i - 3):i] + w[i + 1:i + 4]
    return "ADJ" if any(x in _MUSIC for x in near) else None


_DECIDERS = {"bass": _bass, "lead": _lead, "does": _does, "row": _row, "rows": _row, "tear": _tear, "tears": _tear}


def senses(pairs: list[tuple[str, str]], tags: list[str]) -> list[str]:
    """The tags, with a sense key in place of the tag where a heteronym's neighbours name one."""
    w = _words(pairs)
    out = list(tags)
    for i, word in enumerate(w):
        decide = _DECIDERS.get(word)
        if decide:
            out[i] = decide(w, i, tags[i]) or tags[i]
    return out


class SenseTable(Mapping):
    """A lexicon table (misaki's golds) with SENSES added to their words' entries (any case)."""

    def __init__(self, base: Mapping):
        self._base = base

    def __getitem__(self, word):
        value = self._base[word] if word in self._base else None
        extra = SENSES.get(word.lower()) if isinstance(word, str) else None
        if extra is None:
            if value is None:
                raise KeyError(word)
            return value
        entry = dict(value) if isinstance(value, dict) else {"DEFAULT": value}
        return {**entry, **extra}

    def __contains__(self, word) -> bool:
        return word in self._base or (isinstance(word, str) and word.lower() in SENSES)

    def get(self, word, default=None):
        return self[word] if word in self else default

    def __iter__(self):
        return iter(self._base)

    def __len__(self) -> int:
        return len(self._base)
