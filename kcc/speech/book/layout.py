"""A Book -> batch items (one per paragraph, long paragraphs cut at sentence ends) and, per
chapter, the order of its items with the silence after each.

Paragraph-sized items keep every unit of work (and of memory: an item's audio is held while it
is synthesised) small whatever the chapter's length, let the batch engine spread a chapter over
workers or a Ray cluster, and make resuming lose at most the items in flight. The pauses are
silence inserted between items, not synthesised, so changing them redoes no synthesis.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from kcc.speech.book.text import Book

ITEM_CHARS = 1_500           # ~1.5 min of speech: a paragraph past it is cut at sentence ends
TITLE_CHARS = 200            # a chapter's title as a marker, file name part and tag (spoken whole)
_SENTENCE = re.compile(r"(?<=[.!?…;:])[)”\"'’]?\s+")


@dataclass(frozen=True)
class Pauses:
    paragraph: float = 0.6       # seconds of silence after a paragraph
    chapter: float = 2.0         # after a chapter's last paragraph
    title: float = 1.0           # after an announced chapter title
    sentence: float = 0.0        # between the parts of a paragraph cut at a sentence end


@dataclass(frozen=True)
class Segment:
    item_id: str
    text: str
    pause_s: float               # silence after it


@dataclass
class ChapterPlan:
    index: int                   # 1-based
    title: str
    paragraphs: list[str]
    segments: list[Segment]


def split_paragraph(text: str, limit: int = ITEM_CHARS) -> list[str]:
    """Pieces of at most `limit` characters, cut after sentence ends where one is near (a
    sentence longer than `limit` is cut at a space, then anywhere)."""
    if len(text) <= limit:
        return [text]
    parts, cur = [], ""
    for sentence in _pieces(text, limit):
        if cur and len(cur) + 1 + len(sentence) > limit:
            parts.append(cur)
            cur = sentence
        else:
            cur = f"{cur} {sentence}" if cur else sentence
    if cur:
        parts.append(cur)
    return parts


def _pieces(text: str, limit: int):
    for sentence in _SENTENCE.split(text):
        while len(sentence) > limit:
            cut = sentence.rfind(" ", 0, limit)
            cut = cut if cut > 0 else limit
            yield sentence[:cut]
            sentence = sentence[cut:].lstrip()
        if sentence:
            yield sentence


def short_title(title: str, limit: int = TITLE_CHARS) -> str:
    """`title` cut at a word end before `limit` characters, with an ellipsis."""
    if len(title) <= limit:
        return title
    cut = title.rfind(" ", 0, limit - 1)
    return title[:cut if cut > limit // 2 else limit - 1].rstrip() + "…"


def plan_chapters(book: Book, pauses: Pauses = Pauses(), announce: bool = True,
                  limit: int = ITEM_CHARS) -> list[ChapterPlan]:
    plans = []
    for ci, chapter in enumerate(book.chapters, 1):
        segs: list[Segment] = []
        n = 0

        def add(text: str, pause: float) -> None:
            nonlocal n
            segs.append(Segment(f"c{ci:04d}-{n:05d}", text, pause))
            n += 1
        if announce and chapter.title:
            # a title is spoken like a paragraph: cut at sentence ends past `limit` (a heading
            # that is really a paragraph would otherwise be an item the batch refuses)
            parts = split_paragraph(chapter.title, limit)
            for k, part in enumerate(parts):
                add(part, pauses.sentence if k < len(parts) - 1 else pauses.title)
        for para in chapter.paragraphs:
            parts = split_paragraph(para, limit)
            for k, part in enumerate(parts):
                add(part, pauses.sentence if k < len(parts) - 1 else pauses.paragraph)
        if segs:
            last = segs[-1]
            segs[-1] = Segment(last.item_id, last.text, pauses.chapter)
        plans.append(ChapterPlan(ci, short_title(chapter.title), chapter.paragraphs, segs))
    return plans
