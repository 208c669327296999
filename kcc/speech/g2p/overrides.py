"""Pronunciation overrides: inline `[word](/phonemes/)` and a user lexicon file.

Upstream Kokoro (misaki) reads `[Kokoro](/kˈOkəɹO/)` in English text; kcc takes it in every
language, before language detection, normalisation and the script filter (which would strip
the IPA), and checks the phonemes against the model's vocabulary. A lexicon file (`--lexicon`)
maps whole words to phonemes; its matches become the same Override parts the inline form gives,
straight from the match (never written back as link text), so a word may hold the characters the
link syntax uses and its phonemes are checked once, when the file is read.

Lexicon files: JSON (an object {"word": "phonemes"}) or text (one `word<TAB>phonemes` per line,
`#` comments). Words match whole and case-sensitively; the longest entry wins. In scripts written
without spaces (Japanese, Chinese) an entry matches wherever it is written.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from kcc.speech.g2p.base import G2PError, load_vocab
from kcc.files import read_user_file

MAX_LEXICON_BYTES = 1 << 20
MAX_LEXICON_ENTRIES = 10_000
MAX_WORD_CHARS = 100
MAX_OVERRIDE_PHONEMES = 200

# [text](/phonemes/): misaki's syntax; the text has no brackets or newline, the phonemes no slash.
INLINE = re.compile(r"\[([^\[\]\n]{1,%d})\]\(/([^/\n]{1,%d})/\)" % (MAX_WORD_CHARS, MAX_OVERRIDE_PHONEMES))


class LexiconError(G2PError):
    """A lexicon file or an inline override that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Override:
    text: str            # what is written
    phonemes: str        # what is said


def check_phonemes(text: str, phonemes: str, vocab: dict[str, int], where: str) -> None:
    bad = sorted({c for c in phonemes if c not in vocab and not c.isspace()})
    if bad:
        raise LexiconError(f"{where}: the phonemes for {text!r} have symbols the model does not know: "
                           f"{' '.join(repr(c) for c in bad)}")
    if not phonemes.strip():
        raise LexiconError(f"{where}: the phonemes for {text!r} are empty")


def _cut(text: str, pattern: re.Pattern, override) -> list[str | Override]:
    """Text -> the plain runs between pattern's matches and override(match) for each, in order
    (no empty strings)."""
    out: list[str | Override] = []
    at = 0
    for m in pattern.finditer(text):
        if m.start() > at:
            out.append(text[at:m.start()])
        out.append(override(m))
        at = m.end()
    if at < len(text):
        out.append(text[at:])
    return out


def split_inline(text: str, vocab: dict[str, int]) -> list[str | Override]:
    """Text -> plain strings and inline Overrides, in order (no empty strings)."""
    def override(m: re.Match) -> Override:
        check_phonemes(m.group(1), m.group(2), vocab, "inline override")
        return Override(m.group(1), m.group(2))
    return _cut(text, INLINE, override)


def split_overrides(text: str, vocab: dict[str, int], lexicon: UserLexicon | None = None) -> list[str | Override]:
    """Inline overrides first (they win over the lexicon), then lexicon words in the plain runs."""
    parts = split_inline(text, vocab)
    if lexicon is None:
        return parts
    return [q for p in parts for q in (lexicon.split(p) if isinstance(p, str) else (p,))]


def _unspaced(c: str) -> bool:
    """A character of a script written without spaces (Han, kana, Thai...): a word there has no
    word boundary to match, so a lexicon entry matches wherever it is written."""
    return "\u3040" <= c <= "\u30ff" or "\u3400" <= c <= "\u9fff" or "\uf900" <= c <= "\ufaff" or "\u0e00" <= c <= "\u0e7f"


def _whole(word: str) -> str:
    """The pattern for one lexicon word: whole-word in spaced scripts, anywhere in unspaced ones."""
    return (("" if _unspaced(word[0]) else r"(?<!\w)") + re.escape(word)
            + ("" if _unspaced(word[-1]) else r"(?!\w)"))


class UserLexicon:
    """Whole-word replacements: plain text -> plain runs and Overrides."""

    def __init__(self, entries: dict[str, str], vocab: dict[str, int], source: str = "lexicon"):
        if len(entries) > MAX_LEXICON_ENTRIES:
            raise LexiconError(f"{source}: {len(entries)} entries; at most {MAX_LEXICON_ENTRIES}")
        for word, phonemes in entries.items():
            if not isinstance(word, str) or not isinstance(phonemes, str):
                raise LexiconError(f"{source}: entries map a word to a phoneme string, got {word!r}: {phonemes!r}")
            if not word.strip() or len(word) > MAX_WORD_CHARS or "\n" in word:
                raise LexiconError(f"{source}: {word!r} is not a word kcc can match (1-{MAX_WORD_CHARS} "
                                   "characters, no newline)")
            if len(phonemes) > MAX_OVERRIDE_PHONEMES:
                raise LexiconError(f"{source}: the phonemes for {word!r} are longer than "
                                   f"{MAX_OVERRIDE_PHONEMES} symbols")
            check_phonemes(word, phonemes, vocab, source)
        self.entries = dict(entries)
        words = sorted(self.entries, key=len, reverse=True)
        self._pattern = re.compile("|".join(map(_whole, words))) if words else None

    def split(self, text: str) -> list[str | Override]:
        """Plain text -> plain runs and an Override for every lexicon word (checked when loaded)."""
        if self._pattern is None:
            return [text] if text else []
        return _cut(text, self._pattern, lambda m: Override(m.group(0), self.entries[m.group(0)]))


def load_lexicon(path: str | Path, vocab: dict[str, int] | None = None) -> UserLexicon:
    vocab = vocab if vocab is not None else load_vocab()
    path = Path(path)
    raw = read_user_file(path, MAX_LEXICON_BYTES, "lexicon", LexiconError)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise LexiconError(f"{path}: not UTF-8 (byte {e.start})") from None
    if text.lstrip().startswith("{"):
        def unique(pairs):
            seen = {}
            for k, v in pairs:
                if k in seen:
                    raise LexiconError(f"{path}: {k!r} is listed twice")
                seen[k] = v
            return seen
        try:
            entries = json.loads(text, object_pairs_hook=unique)
        except json.JSONDecodeError as e:
            raise LexiconError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
        except LexiconError:
            raise
        except (ValueError, RecursionError) as e:         # a 5000-digit number; brackets nested past the stack
            raise LexiconError(f"{path}: not a lexicon kcc reads ({type(e).__name__}: {str(e)[:120]})") from None
        if not isinstance(entries, dict):
            raise LexiconError(f"{path}: a JSON lexicon is one object {{\"word\": \"phonemes\"}}")
    else:
        entries = {}
        for n, line in enumerate(text.splitlines(), 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            word, tab, phonemes = line.partition("\t")
            if not tab:
                raise LexiconError(f"{path}:{n}: expected 'word<TAB>phonemes'")
            if word in entries:
                raise LexiconError(f"{path}:{n}: {word!r} is listed twice")
            entries[word] = phonemes.strip()
    return UserLexicon(entries, vocab, str(path))
