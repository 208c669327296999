"""A PDF's text layer -> Book (pypdf): pages read within a work budget, page furniture dropped,
chapters from the outline (bookmarks) where it has one.

- Work: pypdf parses a page's content streams again for every page that draws them, so a small
  file whose 10,000 pages all point at one large stream costs hours. Each page's content-stream
  bytes (its /Contents and the form XObjects its resources name, decoded) are counted in the
  ReadBudget before its text is extracted, a shared stream on every page that uses it; pages
  that draw the same streams with the same resources are extracted once (page_key).
- Furniture: running headers and footers ('The Title', 'Chapter 3', 'Page 12') are lines at a
  page's top or bottom edge, short, that recur, digits aside, on at least 3 pages and on at least
  RUNNING_SHARE of the pages between their first and last (alternating recto/verso headers make
  1/2; a chapter heading recurs on a chapter's first page only, far sparser); a bare page number
  at an edge is dropped anywhere.
- Chapters: the outline's top level (or its second, when the top is one entry: the book's title),
  each entry starting at its page, at the line that repeats its title when the page has one
  (that line is then not read twice). Without an outline, headings in the text (sources.py).
"""
from __future__ import annotations

import io
import re
import warnings
from pathlib import Path

from kcc.speech.book.bounds import BookLimits, ReadBudget
from kcc.speech.book.errors import BookError, BookTooLarge, UnreadablePdf
from kcc.speech.book.text import Book, Chapter, chapters_from_text, paragraphs_from_lines, title_page

PDF_WARNING = ("PDF: only the text layer is read; images, tables, page layout and the place of footnotes "
               "are lost, and line breaks and hyphenation may be wrong; an EPUB or HTML edition reads better")
EDGE_LINES = 2               # lines from a page's top and from its bottom that may be furniture
RUNNING_CHARS = 100          # a running header or footer is a short line
RUNNING_SHARE = 0.5
_PAGE_NUMBER = re.compile(r"[\[(\-–— ]*(?:page\s+|p\.\s*)?(?:\d{1,5}|[ivxlcdm]{1,8})(?:\s*(?:of|/)\s*\d{1,5})?"
                          r"[\])\-–— ]*", re.I)
_DIGITS = re.compile(r"\d+")
_FORM_DEPTH = 8              # form XObjects inside form XObjects, followed this deep


def _stream_bytes(obj, seen: set, depth: int = 0) -> int:
    """Decoded bytes of the content streams `obj` (a /Contents value, or a form XObject) draws,
    with the forms its resources name; `seen` keeps one page from counting a form twice."""
    from pypdf.generic import ArrayObject, StreamObject
    obj = obj.get_object() if obj is not None else None
    total = 0
    if isinstance(obj, ArrayObject):
        return sum(_stream_bytes(o, seen, depth) for o in obj)
    if isinstance(obj, StreamObject):
        total += len(obj.get_data())
        total += _forms_bytes(obj.get("/Resources"), seen, depth + 1)
    return total


def _forms_bytes(resources, seen: set, depth: int) -> int:
    if resources is None or depth > _FORM_DEPTH:
        return 0
    xobjects = resources.get_object().get("/XObject")
    if xobjects is None:
        return 0
    total = 0
    for ref in xobjects.get_object().values():
        key = id(ref.get_object())
        form = ref.get_object()
        if key in seen or form.get("/Subtype") != "/Form":
            continue
        seen.add(key)
        total += _stream_bytes(form, seen, depth)
    return total


def page_key(page) -> tuple | None:
    """What a page's text depends on: its content streams (by object number), its resources and
    rotation; None where a stream is no shared object (then the page is extracted on its own).
    Pages with one key have one text, so pypdf extracts it once; the budget still counts the
    streams on every page."""
    from pypdf.generic import ArrayObject, IndirectObject
    raw = page.raw_get("/Contents") if "/Contents" in page else None
    refs = list(raw) if isinstance(raw, ArrayObject) else [raw]
    if not refs or not all(isinstance(r, IndirectObject) for r in refs):
        return None
    resources = repr(page.get("/Resources"))
    if len(resources) > 20_000:
        return None
    return tuple((r.idnum, r.generation) for r in refs), resources, repr(page.get("/Rotate"))


def page_content_bytes(page) -> int:
    seen: set = set()
    return _stream_bytes(page.get("/Contents"), seen) + _forms_bytes(page.get("/Resources"), seen, 0)


def is_page_number(line: str) -> bool:
    return len(line) <= 24 and _PAGE_NUMBER.fullmatch(line) is not None


def drop_furniture(pages: list[list[str]]) -> list[list[str]]:
    """Pages (each its non-empty lines) without running headers, footers and page numbers."""
    def key(line: str) -> str:
        return _DIGITS.sub("#", " ".join(line.lower().split()))
    where: dict[str, list[int]] = {}
    for i, lines in enumerate(pages):
        for k in {key(ln) for ln in lines[:EDGE_LINES] + lines[-EDGE_LINES:] if len(ln) <= RUNNING_CHARS}:
            where.setdefault(k, []).append(i)
    running = {k for k, at in where.items()
               if len(at) >= 3 and len(at) >= RUNNING_SHARE * (at[-1] - at[0] + 1)}

    def furniture(line: str) -> bool:
        return is_page_number(line) or key(line) in running
    out = []
    for lines in pages:
        lo, hi = 0, len(lines)
        while lo < min(hi, EDGE_LINES) and furniture(lines[lo]):
            lo += 1
        while hi > max(lo, len(lines) - EDGE_LINES) and furniture(lines[hi - 1]):
            hi -= 1
        out.append(lines[lo:hi])
    return out


def outline_starts(reader) -> list[tuple[str, int]]:
    """(title, page index) of the outline's chapter level, in order; [] without a usable one."""
    try:
        outline = reader.outline
    except Exception:                          # a damaged outline: read without it
        return []
    level = [o for o in outline if not isinstance(o, list)]
    if len(level) == 1:
        kids = next((o for o in outline if isinstance(o, list)), [])
        level = [o for o in kids if not isinstance(o, list)] or level
    out = []
    for entry in level:
        try:
            page = reader.get_destination_page_number(entry)
        except Exception:
            continue
        title = " ".join(str(entry.title or "").split())
        if page is not None and page >= 0 and title:
            out.append((title, page))
    return out if len(out) >= 2 else []


def _same(a: str, b: str) -> bool:
    return " ".join(a.lower().split()) == " ".join(b.lower().split())


def chapters_from_outline(pages: list[list[str]], starts: list[tuple[str, int]], fallback: str) -> list[Chapter]:
    """Split the pages' lines at the outline's entries; text before the first entry is kept as a
    chapter of its own (a title page, a preface the outline leaves out)."""
    lines = [ln for page in pages for ln in page]
    page_at = []
    n = 0
    for page in pages:
        page_at.append(n)
        n += len(page)
    page_at.append(n)
    cuts: list[tuple[int, str, bool]] = []         # (line index, title, the title line is there)
    for title, page in starts:
        if page >= len(pages):
            continue
        lo = max(page_at[page], cuts[-1][0] + cuts[-1][2] if cuts else 0)
        hi = min(page_at[page + 1], lo + 8)
        hit = next((i for i in range(lo, hi) if _same(lines[i], title)), None)
        cuts.append((hit if hit is not None else lo, title, hit is not None))
    chapters = []
    if cuts and cuts[0][0] > 0:
        chapters.append(Chapter(fallback, paragraphs_from_lines(lines[:cuts[0][0]])))
    for k, (at, title, has_line) in enumerate(cuts):
        end = cuts[k + 1][0] if k + 1 < len(cuts) else len(lines)
        chapters.append(Chapter(title, paragraphs_from_lines(lines[at + has_line:end])))
    return chapters


def read_pdf(data: bytes, path: Path, limits: BookLimits, budget: ReadBudget) -> Book:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError
    warnings.warn(PDF_WARNING, stacklevel=4)
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadablePdf(f"{path}: encrypted (a password is needed)")
        count = len(reader.pages)
        if count > limits.max_pdf_pages:
            raise BookTooLarge(f"{path}: {count} pages, over the {limits.max_pdf_pages} allowed")
        pages, chars, seen = [], 0, {}
        for i, page in enumerate(reader.pages):
            budget.step("page", i, count)
            budget.spend("pdf", page_content_bytes(page))
            key = page_key(page)
            text = seen.get(key) if key is not None else None
            if text is None:
                text = page.extract_text() or ""
                if key is not None:
                    seen[key] = text
            chars += len(text)
            if chars > limits.max_book_chars:
                raise BookTooLarge(f"{path}: over the {limits.max_book_chars} characters a book may have")
            pages.append([ln.strip() for ln in text.splitlines() if ln.strip()])
        budget.step("page", count, count)
        starts = outline_starts(reader)
        meta = reader.metadata or {}
        title, author = str(meta.get("/Title") or ""), str(meta.get("/Author") or "")
    except BookError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError,
            NotImplementedError) as exc:
        raise UnreadablePdf(f"{path}: pypdf cannot read it: {type(exc).__name__}: {str(exc)[:200]}") from None
    if not any(pages):
        raise UnreadablePdf(f"{path}: no text layer (a scanned PDF needs OCR first)")
    pages = drop_furniture(pages)
    fallback = title or path.stem
    if starts:
        return Book(title, author, None, chapters_from_outline(pages, starts, fallback))
    text = "\n\n".join("\n".join(p) for p in pages)
    first, by, chapters = title_page(chapters_from_text(text, fallback, by_lines=True), fallback)
    return Book(title or first, author or by, None, chapters)
