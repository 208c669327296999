"""The limits on a book's input (kcc.limits lists them in the README's Limits table), and the
work budget one reading of a book spends.

Every number bounds work or memory before or while the parsers run: the file read at most
max_file_bytes (one open, counted as read); an EPUB's zip checked member by member from its
central directory (count, declared sizes, the compression ratio a zip bomb needs) and each member
read with a cap (declared sizes can lie); HTML nesting measured by a linear scan of its tags
before any tree is built; the text of one chapter and of the whole book capped (the text is held;
its audio is not). A small file can still ask for much work (an EPUB of many documents, a PDF
whose pages all draw one large content stream), so the work itself is budgeted too: markup bytes
parsed, tree nodes walked, and PDF content-stream bytes, a stream counted on every page that
draws it (pypdf parses it again for each).
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from kcc.speech.book.errors import ReadBudgetExceeded


@dataclass(frozen=True)
class BookLimits:
    max_file_bytes: int = 256 << 20          # the input file (EPUB / PDF with images are large)
    max_members: int = 5_000                 # zip members of an EPUB
    max_member_bytes: int = 64 << 20         # one member unpacked
    max_unpacked_bytes: int = 512 << 20      # all members unpacked
    max_ratio: int = 200                     # unpacked / packed per member: text compresses ~3-10x
    max_depth: int = 256                     # HTML element nesting
    # ~10 h of speech. A chapter's word timestamps are held while its sidecar and captions are
    # written (~100 k words at this limit); the chapters of long novels are far shorter.
    max_chapter_chars: int = 500_000
    max_book_chars: int = 32_000_000         # the text held while the book is made (~600 h; War and Peace: 3.2 M)
    max_chapters: int = 5_000
    max_pdf_pages: int = 10_000
    # The work of one reading. Markup: the EPUB members' own bound (512 MiB) at most, parsed at
    # ~50-100 MiB/s by libxml2. Nodes: ~10 per paragraph of a novel; 32 M is ten War and Peaces.
    # PDF content streams: pypdf extracts 0.2-0.4 MiB/s of them (2-core Zen 4: text-drawing and
    # path operators alike), so 32 MiB is 1.5-3 minutes at most; a text page draws ~3 KiB (a
    # 1,000-page novel ~3 MiB), and the most pages a PDF may have of them ~30 MiB.
    max_parse_bytes: int = 512 << 20
    max_nodes: int = 32_000_000
    max_pdf_content_bytes: int = 32 << 20


LIMITS = BookLimits()


class ReadBudget:
    """The work one reading of a book has done, by kind, each checked against its limit as it is
    spent (ReadBudgetExceeded past it); `progress(stage, done, total)` is called at most every
    PROGRESS_S while a reader walks its documents or pages. The counts are also what the tests
    scale (x1, x2, x4, x8) to show the readers linear."""

    PROGRESS_S = 0.5

    def __init__(self, limits: BookLimits = LIMITS, where: str = "book",
                 progress: Callable[[str, int, int], None] | None = None):
        self.limits, self.where, self.progress = limits, where, progress
        self.counts = {"bytes": 0, "scanned": 0, "nodes": 0, "pdf": 0}
        self._caps = {"bytes": (limits.max_parse_bytes, "bytes of markup parsed"),
                      "nodes": (limits.max_nodes, "document nodes"),
                      "pdf": (limits.max_pdf_content_bytes, "bytes of PDF content streams (each counted on every "
                                                            "page that draws it)")}
        self._shown = 0.0

    def spend(self, kind: str, n: int) -> None:
        self.counts[kind] += n
        cap = self._caps.get(kind)
        if cap is not None and self.counts[kind] > cap[0]:
            raise ReadBudgetExceeded(f"{self.where}: reading it takes over {cap[0]} {cap[1]}, the most a book may "
                                     "take; split it, or convert it to EPUB or plain text")

    def step(self, stage: str, done: int, total: int) -> None:
        if self.progress is None:
            return
        now = time.monotonic()
        if done >= total or now - self._shown >= self.PROGRESS_S:
            self._shown = now
            self.progress(stage, done, total)
