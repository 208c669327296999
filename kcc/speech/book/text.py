"""The Book every reader returns, and the plain-text rules they share: paragraphs from lines,
chapters at headings (in text or as HTML heading levels), a title page, Markdown front matter."""
from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class Chapter:
    title: str
    paragraphs: list[str]

    @property
    def chars(self) -> int:
        return sum(len(p) + 1 for p in self.paragraphs)


@dataclass
class Book:
    title: str
    author: str = ""
    language: str | None = None          # as declared (dc:language, <html lang>, front matter)
    chapters: list[Chapter] = field(default_factory=list)
    cover: bytes | None = None
    cover_mime: str = ""
    format: str = ""


_TEXT_HEADING = re.compile(r"^(?:#{1,6}\s+\S.*|(?:chapter|book|part|prologue|epilogue|preface|introduction)\b.{0,80})$",
                           re.I)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t\r\f\v]*\n")     # no '\n' inside the run: it cannot rescan a line


def _line_blocks(lines: list[str]) -> list[list[str]]:
    """PDF text, where blank lines are lost: a block ends at a heading line and at a short line
    ending a sentence (a paragraph's last line)."""
    full = sorted(len(ln) for ln in lines if ln)
    short = 0.7 * full[len(full) // 2] if full else 0
    out, cur = [], []
    for ln in lines:
        if not ln or _TEXT_HEADING.match(ln):
            if cur:
                out.append(cur)
            if ln:
                out.append([ln])
            cur = []
            continue
        cur.append(ln)
        if len(ln) < short and ln.rstrip("\"'”’)").endswith((".", "!", "?", "…")):
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


def _blocks(text: str, by_lines: bool) -> list[list[str]]:
    """Blocks between blank lines; by_lines: by _line_blocks' rules."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if by_lines:
        return _line_blocks([ln.strip() for ln in text.splitlines()])
    return [[ln.strip() for ln in b.strip().splitlines() if ln.strip()] for b in _PARAGRAPH_BREAK.split(text)]


def paragraphs_from_lines(lines: list[str]) -> list[str]:
    return [" ".join(b) for b in _line_blocks([ln.strip() for ln in lines]) if b]


def chapters_from_text(text: str, fallback: str, by_lines: bool = False) -> list[Chapter]:
    """Paragraphs are blocks between blank lines (hard-wrapped lines joined); a one-line block
    that reads as a heading ('Chapter IV', 'PART TWO', '# Title') starts a chapter."""
    chapters: list[Chapter] = []
    for lines in _blocks(text, by_lines):
        lines = [ln for ln in lines if ln]
        if not lines:
            continue
        if len(lines) <= 2 and _TEXT_HEADING.match(lines[0]):
            chapters.append(Chapter(" ".join(lines).lstrip("#").strip(), []))
            continue
        if not chapters:
            chapters.append(Chapter(fallback, []))
        chapters[-1].paragraphs.append(" ".join(lines))
    return chapters


def title_page(chapters: list[Chapter], fallback: str) -> tuple[str, str, list[Chapter]]:
    """A few short lines before the first heading are a title page: (title, author, the rest)."""
    first = chapters[0] if chapters else None
    if (first is None or first.title != fallback or len(chapters) < 2 or not 0 < len(first.paragraphs) <= 3
            or any(len(p) > 80 for p in first.paragraphs)):
        return "", "", chapters
    author = next((p[3:].strip() for p in first.paragraphs[1:] if p.lower().startswith("by ")), "")
    return first.paragraphs[0], author, chapters[1:]


# A heading longer than this is a paragraph set in a heading's style (word processors' HTML):
# read as a paragraph, it neither becomes a chapter title nor an item the batch refuses.
MAX_HEADING_CHARS = 300


def chapters_from_blocks(blocks: list[tuple[int, str]], fallback: str) -> tuple[list[Chapter], str]:
    """Chapters start at the top heading level that occurs more than once (a single top heading
    is the book's title) -> (chapters, title or '')."""
    blocks = [(0 if len(t) > MAX_HEADING_CHARS else lv, t) for lv, t in blocks]
    levels = sorted({lv for lv, _ in blocks if lv})
    heads: dict[int, list[str]] = {}
    for lv, t in blocks:
        if lv:
            heads.setdefault(lv, []).append(t)
    title, level = "", None
    for lv in levels:
        if len(heads[lv]) > 1 or lv == levels[-1]:
            level = lv
            break
        title = title or heads[lv][0]
    chapters: list[Chapter] = []
    for lv, text in blocks:
        if lv and lv == level:
            chapters.append(Chapter(text, []))
        elif lv and lv < (level or 7) and text == title:
            continue
        else:
            if not chapters:
                chapters.append(Chapter(title or fallback, []))
            chapters[-1].paragraphs.append(text)
    return chapters, title


_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*\n", re.S)


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """`key: value` lines of a leading '---' block (the fields books use; not all of YAML)."""
    if not text.startswith("---"):
        return {}, text
    m = _FRONT.match(text)
    if not m:
        return {}, text
    fields = {}
    for line in m.group(1).splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[key.strip().lower()] = value.strip().strip("\"'")
    return fields, text[m.end():]
