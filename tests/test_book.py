"""kcc book's inputs: each format read into the same chapters, and each class of hostile input
refused by name (several inputs per class), before any synthesis."""
from __future__ import annotations

import io
import warnings
import zipfile
from pathlib import Path

import pytest

from book_fixtures import AUTHOR, CHAPTERS, TITLE, html_text, plain_text, write_all, write_epub, write_pdf
from kcc.speech.book.bounds import BookLimits
from kcc.speech.book.captions import cues, render
from kcc.speech.book.errors import (BookError, BookTooLarge, EmptyBook, NestingTooDeep, UnreadablePdf, UnsafeArchive,
                                    UnsupportedBook)
from kcc.speech.book.layout import Pauses, plan_chapters, split_paragraph
from kcc.speech.book.sources import PDF_WARNING, read_book
from kcc.speech.book.voice_choice import book_language

PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000100e221bc330000000049454e44ae426082")


@pytest.fixture(scope="module")
def books(tmp_path_factory):
    return write_all(tmp_path_factory.mktemp("books"))


def read(path, **kw):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        book = read_book(path, **kw)
    return book, [str(w.message) for w in caught]


@pytest.mark.parametrize("fmt", ["epub", "markdown", "html"])
def test_structured_formats_read_the_chapters_and_metadata(books, fmt):
    book, notes = read(books[fmt])
    assert book.format == fmt and notes == []
    assert (book.title, book.author, book.language) == (TITLE, AUTHOR, "en")
    assert [c.title for c in book.chapters] == [t for t, _ in CHAPTERS]
    assert [c.paragraphs for c in book.chapters[1:]] == [p for _, p in CHAPTERS[1:]]
    assert book.chapters[0].paragraphs[:2] == CHAPTERS[0][1]


def test_epub_drops_footnotes_notes_documents_and_the_contents_page(books, tmp_path):
    book, _ = read(books["epub"])
    text = " ".join(p for c in book.chapters for p in c.paragraphs)
    assert book.chapters[0].paragraphs[-1] == "Down, down, down."          # its reference mark '1' gone
    assert "nobody" not in text and "End notes" not in text and "Contents" not in text
    covered, _ = read(write_epub(tmp_path / "cover.epub", cover=PNG))
    assert covered.cover == PNG and covered.cover_mime == "image/png"
    assert [c.title for c in covered.chapters] == [t for t, _ in CHAPTERS]   # the cover page is not a chapter


def test_epub2_takes_titles_from_its_ncx(tmp_path):
    from book_fixtures import write_epub2
    book, notes = read(write_epub2(tmp_path / "two.epub"))
    assert (book.title, book.author, book.language) == (TITLE, AUTHOR, "en-GB")
    assert [c.title for c in book.chapters] == [t for t, _ in CHAPTERS]          # the NCX's, not the <h2>s
    assert [c.paragraphs for c in book.chapters] == [p for _, p in CHAPTERS]     # the heading is not read twice


@pytest.mark.parametrize("fmt", ["text", "pdf"])
def test_plain_formats_find_chapters_at_headings(books, fmt):
    book, notes = read(books[fmt])
    assert [c.title for c in book.chapters] == [f"CHAPTER {i}. {t}" for i, (t, _) in enumerate(CHAPTERS, 1)]
    assert book.author == AUTHOR and book.language is None
    words = " ".join(" ".join(c.paragraphs) for c in book.chapters).split()
    assert words == " ".join(" ".join(p) for _, p in CHAPTERS).split()
    assert notes == ([PDF_WARNING] if fmt == "pdf" else [])


def test_languages_as_books_declare_them():
    assert [book_language(t) for t in ("en", "en-GB", "fr_FR", "ja-JP", "pt", None)] == \
        ["en-us", "en-gb", "fr-fr", "ja", "pt-br", "en-us"]
    with pytest.warns(UserWarning, match="'tlh'"):
        assert book_language("tlh") == "en-us"


def test_html_and_markdown_declared_languages(tmp_path):
    (tmp_path / "fr.html").write_text(html_text(lang="fr"), encoding="utf-8")
    assert read(tmp_path / "fr.html")[0].language == "fr"


def test_long_paragraphs_become_items_cut_at_sentence_ends():
    para = " ".join(f"Sentence number {i} is here." for i in range(200))
    parts = split_paragraph(para, 300)
    assert all(len(p) <= 300 for p in parts) and " ".join(parts) == para
    assert all(p.endswith(".") for p in parts)
    assert split_paragraph("x" * 700, 300) == ["x" * 300, "x" * 300, "x" * 100]
    book, _ = read_book_from_text(para)
    plans = plan_chapters(book, Pauses(paragraph=0.5, chapter=2.0, sentence=0.1), announce=True, limit=300)
    segs = plans[0].segments
    assert segs[0].text == "CHAPTER 1. One" and segs[0].pause_s == 1.0
    assert [s.pause_s for s in segs[1:-1]] == [0.1] * (len(segs) - 2) and segs[-1].pause_s == 2.0


def read_book_from_text(para):
    from kcc.speech.book.sources import Book, Chapter
    return Book("T", chapters=[Chapter("CHAPTER 1. One", [para])]), []


def test_captions_follow_the_words():
    words = [{"word": w, "start_s": i * 0.5, "end_s": i * 0.5 + 0.5, "item": "a"} for i, w in
             enumerate(["Alice", "was", "tired", ".", "So", "she", "sat", "."])]
    got = cues(words)
    assert got == [(0.0, 2.0, "Alice was tired."), (2.0, 4.0, "So she sat.")]
    assert render(got, "srt").startswith("1\n00:00:00,000 --> 00:00:02,000\nAlice was tired.\n\n2\n")
    assert render(got, "vtt").startswith("WEBVTT\n\n00:00:00.000 --> 00:00:02.000\nAlice was tired.\n")


# -- refusals, by class ---------------------------------------------------------------------
def _zip(path: Path, members: dict[str, bytes], container: bool = True) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        if container:
            zf.writestr("mimetype", "application/epub+zip")
            zf.writestr("META-INF/container.xml", "<container/>")
        for name, data in members.items():
            zf.writestr(name, data)
    return path


SMALL = BookLimits(max_member_bytes=1 << 20, max_unpacked_bytes=3 << 20, max_members=50)


@pytest.mark.parametrize("members, limits, match", [
    ({"OEBPS/bomb.xhtml": b"\0" * (8 << 20)}, BookLimits(), "zip bomb"),                    # ratio ~1000:1
    ({"OEBPS/big.xhtml": b"a" * (2 << 20)}, SMALL, "unpacks to"),                          # one member too big
    ({f"OEBPS/{i}.xhtml": bytes(range(256)) * 3000 for i in range(6)}, SMALL, "zip bomb"),  # all together too big
    ({f"OEBPS/{i}.xhtml": b"x" for i in range(60)}, SMALL, "zip members"),                 # too many members
    ({"../evil.xhtml": b"x"}, BookLimits(), "outside"),
    ({"/etc/evil.xhtml": b"x"}, BookLimits(), "outside"),
    ({"OEBPS/../../evil.xhtml": b"x"}, BookLimits(), "outside"),
    ({"C:\\evil.xhtml": b"x"}, BookLimits(), "outside"),
])
def test_hostile_epub_archives_are_refused(tmp_path, members, limits, match):
    path = _zip(tmp_path / "hostile.epub", members)
    with pytest.raises(UnsafeArchive, match=match):
        read_book(path, limits=limits)


def test_too_many_members_at_the_default_limit(tmp_path):
    path = _zip(tmp_path / "many.epub", {f"m/{i}": b"" for i in range(BookLimits().max_members + 1)})
    with pytest.raises(UnsafeArchive, match="zip members"):
        read_book(path)


@pytest.mark.parametrize("make", [
    lambda p: _zip(p, {"content.opf": b"<package/>"}, container=False),                 # a zip, no EPUB
    lambda p: _zip(p, {"OEBPS/a.xhtml": b"<p>hi</p>"}),                                  # container.xml is junk
    lambda p: p.write_bytes(b"PK\x03\x04" + b"\x00garbage" * 50),                        # not a readable zip
    lambda p: p.write_text("just text named .epub"),                                     # no zip at all
    lambda p: p.write_bytes(b"\x7fELF\x02\x01\x01"),                                     # .exe named .epub
])
def test_epubs_that_are_no_epub_are_refused(tmp_path, make):
    path = tmp_path / "book.epub"
    make(path)
    with pytest.raises(UnsupportedBook):
        read_book(path)


def test_unknown_suffixes_are_refused(tmp_path):
    for name in ("book.docx", "book.mobi", "book"):
        (tmp_path / name).write_text("text")
        with pytest.raises(UnsupportedBook, match="not a format"):
            read_book(tmp_path / name)


DEEP = "<div>" * 5000 + "deep" + "</div>" * 5000


@pytest.mark.parametrize("suffix, content", [
    (".html", f"<html><body>{DEEP}</body></html>"),
    (".html", "<html><body>" + "<span><b>" * 3000 + "x</body></html>"),                  # never closed
    (".md", f"# T\n\n{DEEP}\n"),                                                         # raw HTML in Markdown
    (".epub", None),
])
def test_deeply_nested_markup_is_refused(tmp_path, suffix, content):
    path = tmp_path / f"deep{suffix}"
    if content is None:                  # ebooklib would tidy the markup: put it in by hand
        _replace_member(write_epub(tmp_path / "plain.epub", notes=False), path, "chap_2.xhtml",
                        lambda _: f"<html><body><h1>Deep</h1>{DEEP}</body></html>".encode())
    else:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(NestingTooDeep):
        read_book(path)


LOL_DTD = "<!ENTITY a \"aaaaaaaaaa\">" + "".join(f"<!ENTITY {chr(98 + i)} \"{('&' + chr(97 + i) + ';') * 10}\">"
                                                 for i in range(9))          # &j; would be 10^10 characters


def _replace_member(src: Path, dst: Path, suffix: str, edit) -> Path:
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, edit(data) if info.filename.endswith(suffix) else data)
    return dst


def test_entity_expansion_bombs_are_not_expanded(tmp_path):
    src = write_epub(tmp_path / "plain.epub", notes=False)
    doc = (f'<?xml version="1.0"?><!DOCTYPE html [{LOL_DTD}]><html xmlns="http://www.w3.org/1999/xhtml">'
           '<body><h1>Lol</h1><p>&j;</p><p>After.</p></body></html>').encode()
    in_chapter = _replace_member(src, tmp_path / "chapter.epub", "chap_2.xhtml", lambda _: doc)
    book = read_book(in_chapter)
    assert sum(c.chars for c in book.chapters) < 1000
    assert book.chapters[1].paragraphs == ["&j;", "After."]            # the reference as written, not expanded
    in_package = _replace_member(src, tmp_path / "opf.epub", "content.opf", lambda d: d.replace(
        b"<package", f"<!DOCTYPE package [{LOL_DTD}]><package".encode(), 1).replace(b"<dc:title>", b"<dc:title>&j;", 1))
    with pytest.raises(UnsupportedBook):
        read_book(in_package)


def test_flat_html_with_unclosed_paragraphs_is_fine(tmp_path):
    path = tmp_path / "flat.html"
    path.write_text("<html><body><h1>A</h1>" + "<p>para" * 2000 + "</body></html>", encoding="utf-8")
    assert len(read_book(path).chapters[0].paragraphs) == 2000


@pytest.mark.parametrize("name, content, limits, match", [
    ("huge.txt", "CHAPTER 1\n\n" + "word " * 5000, BookLimits(max_chapter_chars=10_000), "chapter 1"),
    ("huge.md", "# A\n\nshort\n\n# B\n\n" + "word " * 5000, BookLimits(max_chapter_chars=10_000), "chapter 2"),
    ("huge.html", "<h2>A</h2><p>" + "word " * 5000, BookLimits(max_chapter_chars=10_000), "chapter 1"),
    ("many.txt", "".join(f"CHAPTER {i}\n\nx.\n\n" for i in range(30)), BookLimits(max_chapters=20), "30 chapters"),
    ("long.txt", "".join(f"CHAPTER {i}\n\n{'w ' * 900}\n\n" for i in range(30)),
     BookLimits(max_book_chars=20_000), "characters of text"),
    ("big.txt", "x" * 3000, BookLimits(max_file_bytes=2000), "bytes"),
    ("default.txt", "CHAPTER 1\n\n" + "word " * (BookLimits().max_chapter_chars // 5 + 1), BookLimits(), "chapter 1"),
])
def test_huge_chapters_and_books_are_refused(tmp_path, name, content, limits, match):
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(BookTooLarge, match=match):
        read_book(tmp_path / name, limits=limits)


@pytest.mark.parametrize("make, match", [
    (lambda p: write_pdf(p, encrypt=True), "encrypted"),
    (lambda p: p.write_bytes(write_pdf(p).read_bytes()[:200]), "pypdf cannot read|no text"),    # truncated
    (lambda p: p.write_bytes(b"%PDF-1.4\n" + bytes(range(256)) * 40), "pypdf cannot read|no text"),  # garbled
    (lambda p: write_pdf(p, text=" "), "no text layer"),                                # nothing to extract
])
def test_unreadable_pdfs_are_refused(tmp_path, make, match):
    path = tmp_path / "bad.pdf"
    make(path)
    with pytest.raises(UnreadablePdf, match=match), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        read_book(path)


@pytest.mark.parametrize("name, content", [("empty.txt", ""), ("blank.md", "---\ntitle: x\n---\n\n   \n"),
                                           ("tags.html", "<html><body><div></div></body></html>")])
def test_books_without_text_are_refused(tmp_path, name, content):
    (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(EmptyBook):
        read_book(tmp_path / name)


def test_every_refusal_is_a_book_error_and_the_cli_exits_2(tmp_path, capsys):
    from kcc.cli import main
    for cls in (UnsupportedBook, UnsafeArchive, BookTooLarge, NestingTooDeep, UnreadablePdf, EmptyBook):
        assert issubclass(cls, BookError) and issubclass(cls, ValueError)
    path = _zip(tmp_path / "evil.epub", {"../x": b"x"})
    assert main(["book", str(path), "-o", str(tmp_path / "out.m4b")]) == 2
    assert "UnsafeArchive" in capsys.readouterr().err
    assert not (tmp_path / "out.m4b").exists() and not list(tmp_path.glob(".out*"))
