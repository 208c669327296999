"""A book file -> Book: its metadata (title, author, language, cover) and its chapters, each a
title and a list of paragraphs of plain text, in reading order.

EPUB 2/3 (ebooklib): the spine's linear documents in order, chapter titles from the table of
contents (a document the contents do not name continues the chapter before it, or starts one
at its first heading); cover, title page, contents and copyright pages are not read aloud;
footnotes, endnotes and the reference marks that point at them are dropped (read in the middle
of a sentence they break it), as are non-linear spine items (where EPUBs put notes) and page
furniture (markup.py). Markdown (markdown-it-py, front matter `title: / author: / lang:`), HTML
and plain text: chapters start at headings. PDF (pdf.py): the text layer, with a warning.

The file is opened once and read whole within max_file_bytes (kcc.files.read_user_file: a
regular file only); every reader then works on those bytes within one ReadBudget (bounds.py),
linear in their size. Refusals are errors.py's classes.
"""
from __future__ import annotations

import io
import re
import warnings
import zipfile
from pathlib import Path, PurePosixPath
from typing import Callable

from kcc.files import read_user_file
from kcc.speech.book import markup
from kcc.speech.book.bounds import LIMITS, BookLimits, ReadBudget
from kcc.speech.book.errors import (
    BookError,
    BookTooLarge,
    EmptyBook,
    NotARegularFile,
    UnsafeArchive,
    UnsupportedBook,
)
from kcc.speech.book.pdf import PDF_WARNING, read_pdf
from kcc.speech.book.text import (
    Book,
    Chapter,
    chapters_from_blocks,
    chapters_from_text,
    front_matter,
    title_page,
)
from kcc.speech.g2p.g2p import G2PError, decode_text

__all__ = ["Book", "Chapter", "FORMATS", "PDF_WARNING", "read_book", "detect_format", "check_zip"]

FORMATS = ("epub", "markdown", "html", "text", "pdf")
_SUFFIXES = {".epub": "epub", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
             ".xhtml": "html", ".txt": "text", ".text": "text", ".pdf": "pdf"}


def detect_format(path: Path, head: bytes) -> str:
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"PK\x03\x04"):
        return "epub"
    got = _SUFFIXES.get(path.suffix.lower())
    if got is None:
        raise UnsupportedBook(f"{path}: not a format kcc book reads (by suffix: {', '.join(sorted(_SUFFIXES))})")
    if got in ("epub", "pdf"):
        raise UnsupportedBook(f"{path}: named {path.suffix} but the content is no {got.upper()}")
    return got


def read_book(path: str | Path, fmt: str | None = None, limits: BookLimits = LIMITS,
              progress: Callable[[str, int, int], None] | None = None, budget: ReadBudget | None = None) -> Book:
    """progress(stage, done, total): called now and then while a long book is read ('page' of a
    PDF, 'document' of an EPUB). budget: the work counters to spend (a fresh one by default)."""
    path = Path(path)
    budget = budget or ReadBudget(limits, str(path), progress)
    data = read_user_file(path, limits.max_file_bytes, "book", NotARegularFile, regular=True,
                          too_large=BookTooLarge)
    fmt = fmt or detect_format(path, data[:8])
    if fmt not in FORMATS:
        raise UnsupportedBook(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    reader = {"epub": _read_epub, "pdf": read_pdf, "markdown": _read_markdown, "html": _read_html,
              "text": _read_text}[fmt]
    book = reader(data, path, limits, budget)
    book.format = fmt
    book.chapters = [c for c in book.chapters if c.paragraphs]
    if not book.chapters:
        raise EmptyBook(f"{path}: no text to speak")
    if len(book.chapters) > limits.max_chapters:
        raise BookTooLarge(f"{path}: {len(book.chapters)} chapters, over the {limits.max_chapters} allowed")
    total = 0
    for i, c in enumerate(book.chapters, 1):
        if c.chars > limits.max_chapter_chars:
            raise BookTooLarge(f"{path}: chapter {i} ({c.title[:80]!r}) has {c.chars} characters, over the "
                               f"{limits.max_chapter_chars} a chapter may have")
        total += c.chars
    if total > limits.max_book_chars:
        raise BookTooLarge(f"{path}: {total} characters of text, over the {limits.max_book_chars} a book may have")
    book.title = book.title or path.stem
    return book


def _decode(data: bytes, path: Path) -> str:
    try:
        return decode_text(data, str(path)).removeprefix("\ufeff")
    except G2PError as exc:
        raise BookError(str(exc)) from None


# -- HTML -----------------------------------------------------------------------------------
_SKIP_DOCS = {"cover", "titlepage", "toc", "copyright-page", "landmarks", "loi", "lot", "index",
              "doc-cover", "doc-toc", "doc-index"}


def _read_html(data: bytes, path: Path, limits: BookLimits, budget: ReadBudget) -> Book:
    root = markup.parse(data, str(path), limits, budget, xml=path.suffix.lower() == ".xhtml")
    html = root if root is not None and markup.local(root) == "html" else None
    lang = (html.get("lang") or html.get("{http://www.w3.org/XML/1998/namespace}lang")) if html is not None else None
    head = markup.find(root, "head") if root is not None else None
    head_title, author = "", ""
    if head is not None:
        for el in head.iter():
            name = markup.local(el)
            if name == "title" and not head_title:
                head_title = " ".join("".join(el.itertext()).split())
            elif name == "meta" and (el.get("name") or "").lower() == "author" and not author:
                author = el.get("content") or ""
    chapters, title = chapters_from_blocks(markup.blocks(root, budget), head_title or path.stem)
    return Book(head_title or title, author, lang or None, chapters)


# -- Markdown -------------------------------------------------------------------------------
def _read_markdown(data: bytes, path: Path, limits: BookLimits, budget: ReadBudget) -> Book:
    from markdown_it import MarkdownIt
    fields, body = front_matter(_decode(data, path))
    html = MarkdownIt("commonmark").render(body).encode("utf-8")
    blocks = markup.blocks(markup.parse(html, str(path), limits, budget), budget)
    chapters, title = chapters_from_blocks(blocks, fields.get("title") or path.stem)
    return Book(fields.get("title") or title, fields.get("author", ""),
                fields.get("lang") or fields.get("language") or None, chapters)


# -- plain text -----------------------------------------------------------------------------
def _read_text(data: bytes, path: Path, limits: BookLimits, budget: ReadBudget) -> Book:
    budget.spend("bytes", len(data))
    title, author, chapters = title_page(chapters_from_text(_decode(data, path), path.stem), path.stem)
    return Book(title, author, None, chapters)


# -- EPUB -----------------------------------------------------------------------------------
RATIO_FLOOR = 1 << 20        # below this, a high ratio is a small repetitive file, not a bomb


def check_zip(path: Path, limits: BookLimits = LIMITS, data: bytes | None = None) -> None:
    """The EPUB's zip, from its central directory, before anything is unpacked: a zip, members
    within limits, no member path leaving the archive. (zipfile stops unpacking a member at its
    declared size and checks its CRC, so the declared sizes are what is unpacked.)"""
    try:
        with zipfile.ZipFile(io.BytesIO(data) if data is not None else path) as zf:
            infos = zf.infolist()
            names = {i.filename for i in infos}
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise UnsupportedBook(f"{path}: not a readable zip: {exc}") from None
    if len(infos) > limits.max_members:
        raise UnsafeArchive(f"{path}: {len(infos)} zip members, over the {limits.max_members} allowed")
    total = 0
    for i in infos:
        name = i.filename
        p = PurePosixPath(name.replace("\\", "/"))
        if p.is_absolute() or ".." in p.parts or re.match(r"^[A-Za-z]:", name) or "\x00" in name:
            raise UnsafeArchive(f"{path}: member {name!r} points outside the archive")
        if i.file_size > limits.max_member_bytes:
            raise UnsafeArchive(f"{path}: member {name!r} unpacks to {i.file_size} bytes, over the "
                                f"{limits.max_member_bytes >> 20} MiB allowed")
        if i.file_size > RATIO_FLOOR and i.file_size > limits.max_ratio * max(1, i.compress_size):
            raise UnsafeArchive(f"{path}: member {name!r} unpacks {i.file_size // max(1, i.compress_size)}x its "
                                f"packed size, over the {limits.max_ratio}x allowed (a zip bomb)")
        total += i.file_size
        if total > limits.max_unpacked_bytes:
            raise UnsafeArchive(f"{path}: unpacks to over {limits.max_unpacked_bytes >> 20} MiB (a zip bomb)")
    if "META-INF/container.xml" not in names:
        raise UnsupportedBook(f"{path}: a zip without META-INF/container.xml is no EPUB")


def _toc_titles(toc) -> dict[str, str]:
    """href (fragment dropped) -> the first title the table of contents gives it."""
    from ebooklib import epub
    out: dict[str, str] = {}
    stack = list(toc)[::-1]
    while stack:
        node = stack.pop()
        if isinstance(node, tuple):              # (Section, [children])
            section, children = node
            stack.extend(list(children)[::-1])
            node = section
        if isinstance(node, (epub.Link, epub.Section)) and getattr(node, "href", None):
            out.setdefault(node.href.split("#")[0], node.title.strip())
        elif isinstance(node, list):
            stack.extend(node[::-1])
    return out


def _marked(body) -> list:
    """The body and its first few sections / divs: where a document says what it is."""
    out = [body]
    for el in body.iter():
        if len(out) > 3:
            break
        if el is not body and markup.local(el) in ("section", "div"):
            out.append(el)
    return out


def _read_epub(data: bytes, path: Path, limits: BookLimits, budget: ReadBudget) -> Book:
    import ebooklib
    from ebooklib import epub
    check_zip(path, limits, data)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            book = epub.read_epub(io.BytesIO(data), options={"ignore_ncx": False})
    except BookError:
        raise
    except Exception as exc:                     # ebooklib raises bare KeyErrors / lxml errors on broken EPUBs
        raise UnsupportedBook(f"{path}: not a readable EPUB: {type(exc).__name__}: {str(exc)[:200]}") from None

    def meta(name: str) -> str:
        got = book.get_metadata("DC", name)
        return str(got[0][0]).strip() if got else ""
    titles = _toc_titles(book.toc)
    chapters: list[Chapter] = []
    spine = list(book.spine)
    for n, (idref, linear) in enumerate(spine):
        budget.step("document", n, len(spine))
        item = book.get_item_with_id(idref)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT or str(linear).lower() == "no":
            continue
        if isinstance(item, epub.EpubNav) or "nav" in (getattr(item, "properties", None) or []):
            continue
        # the raw bytes: EpubHtml.get_content() re-serialises through lxml, which silently
        # drops what is nested past libxml2's depth limit (text lost without a word)
        root = markup.parse(item.content, f"{path}:{item.get_name()}", limits, budget, xml=True)
        body = markup.find(root, "body") if root is not None else None
        if body is not None and any(markup.types(t) & _SKIP_DOCS for t in _marked(body)):
            continue
        blocks = markup.blocks(root, budget)
        if not blocks:
            continue
        title = titles.get(item.get_name())
        first_heading = next((t for lv, t in blocks if lv), None)
        if title is None and first_heading is None and chapters:
            chapters[-1].paragraphs += [t for _, t in blocks]
            continue
        title = title or first_heading or meta("title") or path.stem
        paragraphs = [t for _, t in blocks]
        if paragraphs and first_heading is not None and paragraphs[0] == first_heading:
            paragraphs = paragraphs[1:]             # the heading: the title says it
        chapters.append(Chapter(title, paragraphs))
    cover, mime = None, ""
    for item in book.get_items():
        if item.get_type() == ebooklib.ITEM_COVER or (item.get_type() == ebooklib.ITEM_IMAGE
                                                      and "cover" in item.get_name().lower()):
            cover, mime = item.get_content(), item.media_type
            break
    return Book(meta("title"), meta("creator"), meta("language") or None, chapters, cover, mime)
