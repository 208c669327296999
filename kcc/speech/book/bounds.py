"""The limits on a book's input (kcc.limits lists them in the README's Limits table).

Every number bounds work or memory before the parsers run: the file read at most
max_file_bytes; an EPUB's zip checked member by member from its central directory (count,
declared sizes, the compression ratio a zip bomb needs) and each member read with a cap
(declared sizes can lie); HTML nesting measured by a linear scan of its tags before any tree is
built; the text of one chapter and of the whole book capped (the text is held; its audio is not).
"""
from __future__ import annotations

from dataclasses import dataclass


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


LIMITS = BookLimits()
