"""A book file -> Book: its metadata (title, author, language, cover) and its chapters, each a
title and a list of paragraphs of plain text, in reading order.

EPUB 2/3 (ebooklib): the spine's linear documents in order, chapter titles from the table of
contents (a document the contents do not name continues the chapter before it, or starts one
at its first heading); cover, title page, contents and copyright pages are not read aloud;
footnotes, endnotes and the reference marks that point at them are dropped (read in the middle
of a sentence they break it), as are non-linear spine items (where EPUBs put notes).
Markdown (markdown-it-py, front matter `title: / author: / lang:`), HTML and plain text:
chapters start at headings. PDF (pypdf): the text layer only, with a warning.

Every input is bounded before it is parsed (bounds.py); refusals are errors.py's classes.
"""
from __future__ import annotations

import re
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from kcc.speech.book.bounds import LIMITS, BookLimits
from kcc.speech.book.errors import (
    BookError,
    BookTooLarge,
    EmptyBook,
    NestingTooDeep,
    UnreadablePdf,
    UnsafeArchive,
    UnsupportedBook,
)
from kcc.speech.g2p.g2p import G2PError, decode_text

FORMATS = ("epub", "markdown", "html", "text", "pdf")
_SUFFIXES = {".epub": "epub", ".md": "markdown", ".markdown": "markdown", ".html": "html", ".htm": "html",
             ".xhtml": "html", ".txt": "text", ".text": "text", ".pdf": "pdf"}
PDF_WARNING = ("PDF: only the text layer is read; images, tables, page layout and the place of footnotes, "
               "headers and footers are lost, and line breaks and hyphenation may be wrong; an EPUB or "
               "HTML edition reads better")


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


def read_book(path: str | Path, fmt: str | None = None, limits: BookLimits = LIMITS) -> Book:
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > limits.max_file_bytes:
            raise BookTooLarge(f"{path}: {size} bytes, over the {limits.max_file_bytes >> 20} MiB a book may be")
        with open(path, "rb") as fh:
            head = fh.read(8)
    except OSError as exc:
        raise BookError(f"{path}: {exc.strerror or exc}") from None
    fmt = fmt or detect_format(path, head)
    if fmt not in FORMATS:
        raise UnsupportedBook(f"format {fmt!r} is not one of {', '.join(FORMATS)}")
    reader = {"epub": _read_epub, "pdf": _read_pdf, "markdown": _read_markdown, "html": _read_html,
              "text": _read_text}[fmt]
    book = reader(path, limits)
    book.format = fmt
    book.chapters = [c for c in book.chapters if c.paragraphs]
    if not book.chapters:
        raise EmptyBook(f"{path}: no text to speak")
    if len(book.chapters) > limits.max_chapters:
        raise BookTooLarge(f"{path}: {len(book.chapters)} chapters, over the {limits.max_chapters} allowed")
    total = 0
    for i, c in enumerate(book.chapters, 1):
        if c.chars > limits.max_chapter_chars:
            raise BookTooLarge(f"{path}: chapter {i} ({c.title!r}) has {c.chars} characters, over the "
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
_INTERNAL_SUBSET = re.compile(rb"<!DOCTYPE[^\[>]*\[.*?\]\s*>", re.S | re.I)
_TAG = re.compile(rb"<(/?)([A-Za-z][A-Za-z0-9:-]*)[^>]*?(/?)>")
# Elements with no end tag, or whose end tag HTML lets an author leave out: they add no depth.
_FLAT = frozenset(b"area base br col embed hr img input link meta param source track wbr p li dt dd tr td th "
                  b"option thead tbody tfoot colgroup rt rp".split())
_BLOCKS = ("p", "div", "li", "blockquote", "pre", "tr", "dt", "dd", "figcaption", "section", "article",
           "header", "footer", "td", "th", "table", "ul", "ol", "dl")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
# EPUB 3 structural semantics (epub:type) and the roles ARIA gives the same things.
_NOTE_TYPES = {"footnote", "endnote", "rearnote", "note", "footnotes", "endnotes", "rearnotes",
               "doc-footnote", "doc-endnote", "doc-endnotes", "doc-noteref", "noteref"}
_SKIP_DOCS = {"cover", "titlepage", "toc", "copyright-page", "landmarks", "loi", "lot", "index",
              "doc-cover", "doc-toc", "doc-index"}


def check_depth(data: bytes, where: str, limits: BookLimits = LIMITS) -> None:
    """Refuses markup nested past limits.max_depth, counted by one linear scan of the tags."""
    depth = 0
    for m in _TAG.finditer(data):
        name = m.group(2).lower()
        if m.group(3) or name in _FLAT or name.startswith(b"!"):
            continue
        depth += -1 if m.group(1) else 1
        if depth > limits.max_depth:
            raise NestingTooDeep(f"{where}: elements nested deeper than {limits.max_depth}")
        depth = max(depth, 0)


def _soup(data: bytes | str, where: str, limits: BookLimits):
    from bs4 import BeautifulSoup
    raw = data.encode("utf-8") if isinstance(data, str) else data
    check_depth(raw, where, limits)
    # An XHTML internal DTD subset (entity declarations): the HTML parser neither expands it
    # (no entity bomb) nor understands it, and would read its tail aloud; it holds no text.
    raw = _INTERNAL_SUBSET.sub(b"", raw, count=1)
    with warnings.catch_warnings():            # XHTML through the HTML parser: fine for text
        warnings.simplefilter("ignore")
        return BeautifulSoup(raw, "lxml")


def _types(tag) -> set[str]:
    return set((tag.get("epub:type") or "").split()) | set((tag.get("role") or "").split())


def html_blocks(soup) -> list[tuple[int, str]]:
    """The document's text as (heading level 1-6, or 0 for a paragraph, text), in order; notes
    and their reference marks dropped, whitespace inside a block collapsed."""
    from bs4 import NavigableString
    for tag in soup.find_all(["script", "style", "head", "nav", "aside", "rt", "rp"]):
        tag.decompose()
    for tag in soup.find_all(lambda t: bool(_types(t) & _NOTE_TYPES)):
        tag.decompose()
    for sup in soup.find_all("sup"):           # a reference mark: <sup><a href="#n1">1</a></sup>
        if sup.find("a") is not None or sup.get_text().strip().strip("[]*†‡").isdigit():
            sup.decompose()
    for s in list(soup.find_all(string=True)):
        if type(s) is not NavigableString:     # doctype, comment, <?xml?>: not text
            s.extract()
        elif not s.find_parent("pre"):
            s.replace_with(re.sub(r"\s+", " ", str(s)))
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for tag in soup.find_all(_HEADINGS):
        tag.insert_before(f"\n\x01{tag.name[1]}")
        tag.insert_after("\n")
    for tag in soup.find_all(_BLOCKS):
        tag.insert_before("\n")
        tag.insert_after("\n")
    out = []
    for line in soup.get_text().split("\n"):
        level = 0
        if line.startswith("\x01"):
            level, line = int(line[1]), line[2:]
        line = " ".join(line.split())
        if line:
            out.append((level, line))
    return out


def chapters_from_blocks(blocks: list[tuple[int, str]], fallback: str) -> tuple[list[Chapter], str]:
    """Chapters start at the top heading level that occurs more than once (a single top heading
    is the book's title) -> (chapters, title or '')."""
    levels = sorted({lv for lv, _ in blocks if lv})
    title, level = "", None
    for lv in levels:
        heads = [t for l2, t in blocks if l2 == lv]
        if len(heads) > 1 or lv == levels[-1]:
            level = lv
            break
        title = title or heads[0]
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


def _read_html(path: Path, limits: BookLimits) -> Book:
    data = path.read_bytes()
    soup = _soup(data, str(path), limits)
    html = soup.find("html")
    lang = (html.get("lang") or html.get("xml:lang")) if html is not None else None
    head_title = soup.title.get_text(" ", strip=True) if soup.title else ""
    author = ""
    meta = soup.find("meta", attrs={"name": "author"})
    if meta is not None:
        author = meta.get("content", "")
    chapters, title = chapters_from_blocks(html_blocks(soup), head_title or path.stem)
    return Book(head_title or title, author, lang or None, chapters)


# -- Markdown -------------------------------------------------------------------------------
_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n(?:---|\.\.\.)[ \t]*\n", re.S)


def front_matter(text: str) -> tuple[dict[str, str], str]:
    """`key: value` lines of a leading '---' block (the fields books use; not all of YAML)."""
    m = _FRONT.match(text)
    if not m:
        return {}, text
    fields = {}
    for line in m.group(1).splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip():
            fields[key.strip().lower()] = value.strip().strip("\"'")
    return fields, text[m.end():]


def _read_markdown(path: Path, limits: BookLimits) -> Book:
    from markdown_it import MarkdownIt
    fields, body = front_matter(_decode(path.read_bytes(), path))
    html = MarkdownIt("commonmark").render(body)
    blocks = html_blocks(_soup(html, str(path), limits))
    chapters, title = chapters_from_blocks(blocks, fields.get("title") or path.stem)
    return Book(fields.get("title") or title, fields.get("author", ""),
                fields.get("lang") or fields.get("language") or None, chapters)


# -- plain text -----------------------------------------------------------------------------
_TEXT_HEADING = re.compile(r"^(?:#{1,6}\s+\S.*|(?:chapter|book|part|prologue|epilogue|preface|introduction)\b.{0,80})$",
                           re.I)


def _blocks(text: str, by_lines: bool) -> list[list[str]]:
    """Blocks between blank lines; by_lines (PDF text, where blank lines are lost): a block
    also ends at a heading line and at a short line ending a sentence (a paragraph's last line)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not by_lines:
        return [[ln.strip() for ln in b.strip().splitlines() if ln.strip()] for b in re.split(r"\n\s*\n", text)]
    lines = [ln.strip() for ln in text.splitlines()]
    full = sorted(len(ln) for ln in lines if ln)
    short = 0.7 * full[len(full) // 2] if full else 0
    out, cur = [], []
    for ln in lines:
        if not ln or _TEXT_HEADING.match(ln):
            if cur:
                out.append(cur)
            out.append([ln]) if ln else None
            cur = []
            continue
        cur.append(ln)
        if len(ln) < short and ln.rstrip("\"'”’)").endswith((".", "!", "?", "…")):
            out.append(cur)
            cur = []
    if cur:
        out.append(cur)
    return out


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


def _read_text(path: Path, limits: BookLimits) -> Book:
    title, author, chapters = title_page(chapters_from_text(_decode(path.read_bytes(), path), path.stem), path.stem)
    return Book(title, author, None, chapters)


# -- PDF ------------------------------------------------------------------------------------
def _read_pdf(path: Path, limits: BookLimits) -> Book:
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError
    warnings.warn(PDF_WARNING, stacklevel=3)
    try:
        reader = PdfReader(str(path))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadablePdf(f"{path}: encrypted (a password is needed)")
        if len(reader.pages) > limits.max_pdf_pages:
            raise BookTooLarge(f"{path}: {len(reader.pages)} pages, over the {limits.max_pdf_pages} allowed")
        pages, chars = [], 0
        for page in reader.pages:
            text = page.extract_text() or ""
            chars += len(text)
            if chars > limits.max_book_chars:
                raise BookTooLarge(f"{path}: over the {limits.max_book_chars} characters a book may have")
            pages.append(text)
        meta = reader.metadata or {}
        title, author = str(meta.get("/Title") or ""), str(meta.get("/Author") or "")
    except BookError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError, RecursionError,
            NotImplementedError) as exc:
        raise UnreadablePdf(f"{path}: pypdf cannot read it: {type(exc).__name__}: {str(exc)[:200]}") from None
    text = "\n\n".join(pages)
    if not text.strip():
        raise UnreadablePdf(f"{path}: no text layer (a scanned PDF needs OCR first)")
    fallback = title or path.stem
    first, by, chapters = title_page(chapters_from_text(text, fallback, by_lines=True), fallback)
    return Book(title or first, author or by, None, chapters)


# -- EPUB -----------------------------------------------------------------------------------
RATIO_FLOOR = 1 << 20        # below this, a high ratio is a small repetitive file, not a bomb


def check_zip(path: Path, limits: BookLimits = LIMITS) -> None:
    """The EPUB's zip, from its central directory, before anything is unpacked: a zip, members
    within limits, no member path leaving the archive. (zipfile stops unpacking a member at its
    declared size and checks its CRC, so the declared sizes are what is unpacked.)"""
    try:
        with zipfile.ZipFile(path) as zf:
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


def _read_epub(path: Path, limits: BookLimits) -> Book:
    import ebooklib
    from ebooklib import epub
    check_zip(path, limits)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            book = epub.read_epub(str(path), options={"ignore_ncx": False})
    except BookError:
        raise
    except Exception as exc:                     # ebooklib raises bare KeyErrors / lxml errors on broken EPUBs
        raise UnsupportedBook(f"{path}: not a readable EPUB: {type(exc).__name__}: {str(exc)[:200]}") from None

    def meta(name: str) -> str:
        got = book.get_metadata("DC", name)
        return str(got[0][0]).strip() if got else ""
    titles = _toc_titles(book.toc)
    chapters: list[Chapter] = []
    for idref, linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT or str(linear).lower() == "no":
            continue
        if isinstance(item, epub.EpubNav) or "nav" in (getattr(item, "properties", None) or []):
            continue
        # the raw bytes: EpubHtml.get_content() re-serialises through lxml, which silently
        # drops what is nested past libxml2's depth limit (text lost without a word)
        data = item.content
        soup = _soup(data, f"{path}:{item.get_name()}", limits)
        body = soup.find("body")
        marked = [body, *body.find_all(["section", "div"], limit=3)] if body is not None else []
        if any(_types(t) & _SKIP_DOCS for t in marked):
            continue
        blocks = html_blocks(soup)
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
