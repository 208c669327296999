"""spaCy's rule-based English tokenizer, without spaCy.

The English G2P (misaki's lexicons) needs spaCy's tokenization and nothing else from spaCy, and
importing spaCy costs 0.6 s a process (1.8 s when torch is installed: thinc imports it). This
module runs spaCy 3.8's algorithm (spacy/tokenizer.pyx: whitespace spans, _split_affixes,
_attach_tokens, the special-case matcher) on its English rules, shipped as data in
kcc/data/en_tokenizer.json (scripts/make_en_tokenizer_table.py makes it from the pinned spaCy;
tests/test_en_tokenizer.py checks the table and that both tokenizers split a corpus alike).
"""
from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

TABLE = Path(__file__).resolve().parents[2] / "data" / "en_tokenizer.json"


def _class_items(pattern: str, i: int) -> tuple[list[tuple[str, str]], int]:
    """The items of the character class whose first item is at pattern[i] ('[' and '^' already
    read), as written: (atom, "") for one character or escape, (low atom, high atom) for a range;
    and the index past ']'."""
    items: list[tuple[str, str]] = []

    def atom(j: int) -> int:                    # the end of one character or escape at j
        if pattern[j] != "\\":
            return j + 1
        return j + {"u": 6, "U": 10, "x": 4}.get(pattern[j + 1], 2)

    first = True
    while pattern[i] != "]" or first:
        end = atom(i)
        if pattern[end] == "-" and pattern[end + 1] != "]":
            items.append((pattern[i:end], pattern[end + 1:atom(end + 1)]))
            end = atom(end + 1)
        else:
            items.append((pattern[i:end], ""))
        i, first = end, False
    return items, i + 1


def _code(atom: str) -> int | None:
    """The code point one class atom stands for; None for a class escape (\\w, \\d, \\s...)."""
    if not atom.startswith("\\"):
        return ord(atom)
    if atom[1] in "uUx":
        return int(atom[2:], 16)
    return None if atom[1].isalpha() else ord(atom[1])


def ascii_pattern(pattern: str) -> str:
    """`pattern` for ASCII text only: every character class loses its non-ASCII members (a range
    across 0x7F is cut there). It matches exactly what `pattern` matches in ASCII text, and
    compiles ~10x faster: Python's `re` spends most of a compile on spaCy's large Unicode classes
    (~60 ms of a warm `kcc say`). Patterns with case folding are returned unchanged (an ASCII
    letter can fold to a non-ASCII one)."""
    if "(?i" in pattern:
        return pattern
    out, i = [], 0
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if ch != "[":
            out.append(ch)
            i += 1
            continue
        negated = pattern[i + 1] == "^"
        items, i = _class_items(pattern, i + 1 + negated)
        kept = []
        for lo_atom, hi_atom in items:
            item = f"{lo_atom}-{hi_atom}" if hi_atom else lo_atom
            lo = _code(lo_atom)
            if lo is None:                       # \\w, \\d, \\s: keep (they match ASCII too)
                kept.append(item)
            elif lo < 0x80:
                hi = _code(hi_atom) if hi_atom else lo
                kept.append(item if hi < 0x80 else f"{lo_atom}-\\x7f")
        # Once members are dropped, repeats meet ("|…|" -> "||"), which `re` warns about as a
        # possible future set operation; a class's members are a set, so keep each once.
        kept = list(dict.fromkeys(kept))
        # A class left empty matches only a non-ASCII character: \\x80 stands for "none here".
        out.append("[" + "^" * negated + ("".join(kept) or "\\x80") + "]")
    return "".join(out)


class EnglishTokenizer:
    """text -> [(token text, whitespace after it: '' or ' ')], exactly as spacy.blank("en").
    ascii_only: the rules for text that is all ASCII (ascii_pattern), faster to build."""

    def __init__(self, table: dict, ascii_only: bool = False):
        never = re.compile("a^")
        fit = ascii_pattern if ascii_only else (lambda p: p)
        self._prefix = re.compile(fit(table["prefix"])).search
        self._suffix = re.compile(fit(table["suffix"])).search
        self._infix = re.compile(fit(table["infix"])).finditer
        self._url = re.compile(fit(table["url"])).match if table.get("url") else never.match
        self._token_match = re.compile(fit(table["token_match"])).match if table.get("token_match") else None
        self._special: dict[str, list[str]] = table["special"]
        # Special cases the affix rules cut apart, keyed by the pieces the cutting makes (a
        # phrase with a non-ASCII character never occurs in ASCII text).
        self._phrases: dict[tuple[str, ...], str] = {}
        for s in table["phrases"]:
            if ascii_only and not s.isascii():
                continue
            pieces = tuple(t for t, _ in self._split(s, specials=False))
            self._phrases.setdefault(pieces, s)
        self._longest = max((len(p) for p in self._phrases), default=0)

    def __call__(self, text: str) -> list[tuple[str, str]]:
        tokens = self._split(text, specials=True)
        return self._apply_phrases(tokens) if self._phrases else tokens

    # -- spaCy's _tokenize_affixes: spans of space / non-space; one ' ' after a token is its space
    def _split(self, text: str, specials: bool) -> list[tuple[str, str]]:
        out: list[list[str]] = []
        if not text:
            return []
        start, in_ws = 0, text[0].isspace()
        for i, ch in enumerate(text):
            if ch.isspace() != in_ws:
                if start < i:
                    out += [[t, ""] for t in self._span(text[start:i], specials)]
                if ch == " " and out:
                    out[-1][1] = " "
                    start = i + 1
                else:
                    start = i
                in_ws = not in_ws
        if start < len(text):
            out += [[t, ""] for t in self._span(text[start:], specials)]
            out[-1][1] = " " if text[-1] == " " and not in_ws else ""
        return [(t, w) for t, w in out]

    def _find_prefix(self, s: str) -> int:
        m = self._prefix(s)
        return m.end() - m.start() if m else 0

    def _find_suffix(self, s: str) -> int:
        m = self._suffix(s)
        return m.end() - m.start() if m else 0

    def _span(self, s: str, specials: bool) -> list[str]:
        if specials and s in self._special:
            return list(self._special[s])
        prefixes: list[str] = []
        suffixes: list[str] = []
        last = -1
        while s and len(s) != last:                      # spaCy's _split_affixes
            if self._token_match and self._token_match(s):
                break
            if specials and s in self._special:
                break
            last = len(s)
            pre = self._find_prefix(s)
            if pre:
                prefix, minus_pre = s[:pre], s[pre:]
                if minus_pre and specials and minus_pre in self._special:
                    s = minus_pre
                    prefixes.append(prefix)
                    break
            suf = self._find_suffix(s[pre:])
            if suf:
                suffix, minus_suf = s[-suf:], s[:-suf]
                if minus_suf and specials and minus_suf in self._special:
                    s = minus_suf
                    suffixes.append(suffix)
                    break
            if pre and suf and pre + suf <= len(s):
                s = s[pre:-suf]
                prefixes.append(prefix)
                suffixes.append(suffix)
            elif pre:
                s = minus_pre
                prefixes.append(prefix)
            elif suf:
                s = minus_suf
                suffixes.append(suffix)
        return prefixes + self._attach(s, specials) + suffixes[::-1]

    def _attach(self, s: str, specials: bool) -> list[str]:           # spaCy's _attach_tokens
        if not s:
            return []
        if specials and s in self._special:
            return list(self._special[s])
        if (self._token_match and self._token_match(s)) or self._url(s):
            return [s]
        matches = list(self._infix(s))
        if not matches:
            return [s]
        out, start = [], 0
        for m in matches:
            a, b = m.start(), m.end()
            if a == 0:                      # an infix at the very start splits nothing off
                continue
            if a != start:
                out.append(s[start:a])
            if a != b:
                out.append(s[a:b])
            start = b
        if s[start:]:
            out.append(s[start:])
        return out

    # -- spaCy's special matcher: longest matches first, then leftmost; a span is replaced only
    # where its text (with the spaces inside it) is the special case's string.
    def _apply_phrases(self, tokens: list[tuple[str, str]]) -> list[tuple[str, str]]:
        texts = [t for t, _ in tokens]
        found = []
        for i in range(len(texts)):
            for n in range(1, min(self._longest, len(texts) - i) + 1):
                key = self._phrases.get(tuple(texts[i:i + n]))
                if key is not None:
                    found.append((i, i + n, key))
        if not found:
            return tokens
        found.sort(key=lambda m: (-(m[1] - m[0]), m[0]))
        seen: set[int] = set()
        keep = []
        for a, b, key in found:
            if a not in seen and b - 1 not in seen:
                keep.append((a, b, key))
            seen.update(range(a, b))
        starts = {a: (b, key) for a, b, key in keep}
        out: list[tuple[str, str]] = []
        i = 0
        while i < len(tokens):
            if i in starts:
                b, key = starts[i]
                span_text = "".join(t + w for t, w in tokens[i:b - 1]) + tokens[b - 1][0]
                if span_text == key:
                    pieces = self._special[key]
                    out += [(p, "") for p in pieces[:-1]] + [(pieces[-1], tokens[b - 1][1])]
                    i = b
                    continue
            out.append(tokens[i])
            i += 1
        return out


class ByAlphabet:
    """spaCy's English tokenizer, with the ASCII rules for ASCII text (most English input) and
    the full rules, built on first need, for the rest."""

    def __init__(self, table: dict):
        self._table = table
        self._rules: dict[bool, EnglishTokenizer] = {}

    def rules(self, ascii_only: bool) -> EnglishTokenizer:
        if ascii_only not in self._rules:
            self._rules[ascii_only] = EnglishTokenizer(self._table, ascii_only)
        return self._rules[ascii_only]

    def __call__(self, text: str) -> list[tuple[str, str]]:
        return self.rules(text.isascii())(text)


@lru_cache(maxsize=1)
def english() -> ByAlphabet:
    with open(TABLE, encoding="utf-8") as fh:
        return ByAlphabet(json.load(fh))
