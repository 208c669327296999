"""Which writing system each character belongs to, which ones a language's G2P can speak, and
language auto-detection where the script makes it obvious.

A G2P handed a script it cannot read does something worse than silence: espeak-ng switches
language and the listener hears "(ja)", or reads each ideograph as "Chinese letter";
pyopenjtalk spells Latin words out letter by letter. So runs of letters in a script the chosen
language cannot speak are taken out before G2P (each replaced by a space), and a warning names
them and where they were. Digits, punctuation, symbols and spaces belong to no script.
"""
from __future__ import annotations

import unicodedata
import warnings
from dataclasses import dataclass

# Script names as the first word(s) of a character's Unicode name.
_PREFIXES = (("CJK", "han"), ("HIRAGANA", "kana"), ("KATAKANA", "kana"), ("HALFWIDTH KATAKANA", "kana"),
             ("LATIN", "latin"), ("FULLWIDTH LATIN", "latin"), ("DEVANAGARI", "devanagari"),
             ("CYRILLIC", "cyrillic"), ("GREEK", "greek"), ("ARABIC", "arabic"), ("HEBREW", "hebrew"),
             ("HANGUL", "hangul"), ("THAI", "thai"))

# The scripts each language's G2P reads. Hindi text carries English words, which espeak-ng's hi
# voice reads in English (its switch flags removed); Japanese and Chinese G2P spell Latin out.
SPEAKS = {
    "en-us": {"latin"}, "en-gb": {"latin"}, "es": {"latin"}, "fr-fr": {"latin"}, "it": {"latin"},
    "pt-br": {"latin"}, "hi": {"devanagari", "latin"}, "ja": {"han", "kana"}, "zh": {"han"},
}


class ScriptWarning(UserWarning):
    """Text in a script the chosen language cannot speak was left out."""


@dataclass(frozen=True)
class Dropped:
    text: str
    start: int                       # character offset in the text given
    script: str


def script_of(ch: str) -> str | None:
    """The script of a letter (or ideograph / kana, including 'ー' and '々'), None for anything else."""
    if ch in "ー々〆ヽヾゝゞ":
        return "kana" if ch in "ーヽヾゝゞ" else "han"
    if not unicodedata.category(ch).startswith("L"):
        return None
    name = unicodedata.name(ch, "")
    for prefix, script in _PREFIXES:
        if name.startswith(prefix):
            return script
    return "other"


def _scripts(text: str) -> list[str | None]:
    """Per character; a combining mark (Devanagari's vowel signs) takes its base letter's script."""
    out: list[str | None] = []
    for c in text:
        out.append(out[-1] if out and unicodedata.category(c).startswith("M") else script_of(c))
    return out


# One kana or kanji carries about as much speech as three Latin letters (a mora or a morpheme
# against a letter), so a paragraph is Japanese when its CJK characters, weighted so, match its
# Latin letters: a Japanese sentence with an English name stays Japanese, an English sentence
# quoting one Japanese word stays English (the word is left out with a warning).
CJK_WEIGHT = 3


def detect_language(text: str, default: str = "en-us") -> str:
    """Where kana / Han characters outweigh Latin letters: 'ja' if any kana is among them (Japanese
    writes kanji with kana; Chinese has none), else 'zh'. 'hi' where Devanagari does; otherwise
    `default` (Latin script does not tell en from es or fr)."""
    counts: dict[str | None, int] = {}
    for s in _scripts(text):
        counts[s] = counts.get(s, 0) + 1
    latin = counts.get("latin", 0)
    cjk = counts.get("kana", 0) + counts.get("han", 0)
    if cjk and CJK_WEIGHT * cjk >= latin:
        return "ja" if counts.get("kana", 0) else "zh"
    if counts.get("devanagari", 0) and counts["devanagari"] >= latin:
        return "hi"
    return default


def keep_speakable(text: str, language: str) -> tuple[str, list[Dropped]]:
    """The text with every run of letters in a script `language` cannot speak replaced by one
    space, and those runs; foreign words separated only by spaces form one run."""
    allowed = SPEAKS[language]
    foreign = [i for i, s in enumerate(_scripts(text)) if s is not None and s not in allowed]
    spans: list[list[int]] = []
    for i in foreign:
        if spans and not text[spans[-1][1]:i].strip():
            spans[-1][1] = i + 1
        else:
            spans.append([i, i + 1])
    out, at = [], 0
    for a, b in spans:
        out += [text[at:a], " "]
        at = b
    out.append(text[at:])
    return "".join(out), [Dropped(text[a:b], a, script_of(text[a]) or "other") for a, b in spans]


def warn_dropped(dropped: list[Dropped], language: str, stacklevel: int = 3) -> None:
    if not dropped:
        return
    listed = ", ".join(f"{d.text[:30]!r} ({d.script}) at {d.start}" for d in dropped[:10])
    more = f" and {len(dropped) - 10} more" if len(dropped) > 10 else ""
    warnings.warn(ScriptWarning(f"{language} cannot speak {len(dropped)} run(s) of text in another script, left "
                                f"out: {listed}{more}; pick their language with --lang"), stacklevel=stacklevel)
