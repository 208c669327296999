"""Reading a book costs work linear in its size, within a budget: the hostile inputs of the
round-four red team scaled x1, x2, x4, x8 with the work counted (bytes scanned and parsed, tree
nodes, PDF content-stream bytes), each budget's refusal, DTDs handled by an XML parser, and the
input read once from a regular file only."""
from __future__ import annotations

import os
import threading
import warnings
from pathlib import Path

import pytest

from book_fixtures import content_stream, write_pages_pdf
from kcc.speech.book import markup
from kcc.speech.book.bounds import BookLimits, ReadBudget
from kcc.speech.book.errors import BookTooLarge, NotARegularFile, ReadBudgetExceeded
from kcc.speech.book.sources import read_book

PARAGRAPH = b"<p>It was a dark and stormy night; the rain fell in torrents, except at occasional intervals.</p>\n"
# name -> (suffix, the input at scale k): each a shape that was quadratic before
SCALED = {
    "unclosed tags": (".html", lambda k: b"<p>x</p>" + b"<a" * (4096 * k)),          # the depth regex rescanned
    "open doctypes": (".html", lambda k: b"<p>x</p>" + b"<!DOCTYPE[" * (1024 * k)),   # the subset regex rescanned
    "doctype quotes": (".xhtml", lambda k: b'<!DOCTYPE html [<!ENTITY a "' + b"]>" * (2048 * k) + b'">]>'
                                           b"<html><body><p>x</p></body></html>"),
    "paragraphs": (".html", lambda k: b"<html><body>" + PARAGRAPH * (300 * k) + b"</body></html>"),  # sibling search
    "markdown": (".md", lambda k: b"# T\n\n" + b"A paragraph of a novel, with words.\n\n" * (1500 * k)),
}


def texts_of(book) -> str:
    return " ".join(p for c in book.chapters for p in c.paragraphs)


def work(budget: ReadBudget) -> int:
    return budget.counts["scanned"] + budget.counts["bytes"] + budget.counts["nodes"]


@pytest.mark.parametrize("name", list(SCALED))
def test_reading_work_grows_linearly_with_the_input(tmp_path, name):
    suffix, make = SCALED[name]
    counts, sizes = [], []
    for k in (1, 2, 4, 8):
        path = tmp_path / f"in{k}{suffix}"
        path.write_bytes(make(k))
        budget = ReadBudget(BookLimits(), str(path))
        book = read_book(path, budget=budget)
        assert book.chapters[0].paragraphs
        counts.append(work(budget))
        sizes.append(path.stat().st_size)
    for k, c, s in zip((1, 2, 4, 8), counts, sizes):
        # each byte is scanned and parsed a bounded number of times: work per byte stays flat
        assert c / s == pytest.approx(counts[0] / sizes[0], rel=0.25), (name, counts, sizes)
        assert c <= 4 * s, (name, c, s)


def test_the_depth_scan_examines_each_byte_once():
    budget = ReadBudget()
    data = b"<p>x</p>" + b"<a" * 50_000
    markup.check_depth(data, "x", budget=budget)
    assert budget.counts["scanned"] <= len(data) + 2


def test_a_pdf_whose_pages_share_one_stream_counts_it_on_every_page(tmp_path, monkeypatch):
    monkeypatch.setattr(ReadBudget, "PROGRESS_S", 0.0)
    # five lines: the middle one is no page edge, so it is read on every page, not taken as a running head
    stream = content_stream(["Top.", "Second.", "The middle line, read on every page.", "Fourth.", "Bottom."]) + b"\n0 0 m" * 2000
    for count in (2, 4, 8):
        path = write_pages_pdf(tmp_path / f"s{count}.pdf", shared=stream, count=count)
        budget = ReadBudget()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read_book(path, budget=budget)
        assert budget.counts["pdf"] == count * len(stream)
    calls = []
    from pypdf import PageObject
    extract = PageObject.extract_text
    monkeypatch.setattr(PageObject, "extract_text", lambda self, *a, **k: calls.append(1) or extract(self, *a, **k))
    book = read_book(write_pages_pdf(tmp_path / "s8.pdf", shared=stream, count=8))
    assert len(calls) == 1 and texts_of(book).count("The middle line, read on every page.") == 8
    path = write_pages_pdf(tmp_path / "many.pdf", shared=stream, count=50)
    limits = BookLimits(max_pdf_content_bytes=3 * len(stream))
    seen = []
    with pytest.raises(ReadBudgetExceeded, match="PDF content streams"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        read_book(path, limits=limits, budget=ReadBudget(limits, str(path), lambda *a: seen.append(a)))
    assert seen and seen[-1][1] == 3                  # refused on the 4th page, before extracting it


@pytest.mark.parametrize("limits, match", [
    (BookLimits(max_parse_bytes=50_000), "bytes of markup"),
    (BookLimits(max_nodes=1_000), "document nodes"),
])
def test_each_work_budget_is_a_named_refusal(tmp_path, limits, match):
    path = tmp_path / "big.html"
    path.write_bytes(b"<html><body>" + PARAGRAPH * 3000 + b"</body></html>")
    with pytest.raises(ReadBudgetExceeded, match=match) as got:
        read_book(path, limits=limits)
    assert isinstance(got.value, BookTooLarge)
    assert read_book(path).chapters[0].paragraphs[0].startswith("It was a dark")    # the default budget reads it


def test_progress_is_shown_while_a_long_book_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(ReadBudget, "PROGRESS_S", 0.0)
    pages = [[f"Line {w} of page {p}, which goes on for a while." for w in ("one", "two")]
             for p in ("one", "two", "three", "four", "five")]
    path = write_pages_pdf(tmp_path / "p.pdf", pages)
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        read_book(path, progress=lambda *a: seen.append(a))
    assert seen == [("page", i, 5) for i in range(6)]


# -- DTDs: an XML parser, nothing expanded -----------------------------------------------------
SUBSET = b'<!DOCTYPE html [<!ENTITY x "tail]> read aloud"> <!ENTITY y "why">]>'
BODY = b"<html xmlns='http://www.w3.org/1999/xhtml'><head><title>Head title</title></head><body>" \
       b"<h1>One</h1><p>First &y; here.</p>%s<p>Second.</p></body></html>"


@pytest.mark.parametrize("suffix", [".xhtml", ".html"])
@pytest.mark.parametrize("doc", [
    b'<?xml version="1.0" encoding="utf-8"?>' + SUBSET + BODY % b"",                       # ']>' inside a value
    b'<?xml version="1.0"?>' + SUBSET + BODY % b'<!DOCTYPE again [<!ENTITY z "more]> text">]>',   # a second DOCTYPE
    SUBSET + BODY % b"&nbsp;",                                                  # no XML declaration, an HTML entity
], ids=["bracket-in-value", "second-doctype", "html-entity"])
def test_an_internal_dtd_subset_is_never_read_aloud(tmp_path, suffix, doc):
    path = tmp_path / f"dtd{suffix}"
    path.write_bytes(doc)
    book = read_book(path)
    text = " ".join(p for c in book.chapters for p in c.paragraphs)
    assert "Second." in text and "First" in text
    for leak in ("tail", "read aloud", "ENTITY", "more", "Head title", "]>", "why"):
        assert leak not in text, (leak, text)
    assert book.title == "Head title"


def test_strip_doctypes_keeps_everything_outside_the_declarations():
    got = markup.strip_doctypes(b'a<!DOCTYPE x [<!-- a "quote ]> --><!ENTITY e \']>\'>]>b<!doctype html>c')
    assert got == b"abc"


# -- the input: one open of a regular file -----------------------------------------------------
def test_a_link_to_a_device_is_refused_without_reading_it(tmp_path):
    link = tmp_path / "zero.txt"
    link.symlink_to("/dev/zero")
    with pytest.raises(NotARegularFile, match="a device, not a regular file"):
        read_book(link)


def test_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "book.txt"
    os.mkfifo(fifo)
    got = []
    t = threading.Thread(target=lambda: got.append(_refusal(fifo)), daemon=True)
    t.start()
    t.join(10)
    assert got == ["NotARegularFile"], "reading a FIFO blocked or was not refused"


def _refusal(path: Path) -> str:
    try:
        read_book(path)
    except Exception as exc:
        return type(exc).__name__
    return "read"


@pytest.mark.parametrize("make, match", [
    (lambda p: p.mkdir(), "a directory"),
    (lambda p: None, "No such file"),
])
def test_other_non_files_are_refused_by_name(tmp_path, make, match):
    path = tmp_path / "book.txt"
    make(path)
    with pytest.raises(NotARegularFile, match=match):
        read_book(path)


def test_the_command_line_shows_reading_progress_on_stderr(capsys):
    from kcc.speech.book.cli import reading_progress
    assert reading_progress(False) is None or reading_progress(False).__name__ == "show"   # a tty shows it
    show = reading_progress(True)
    show("page", 3, 10)
    show("page", 10, 10)
    err = capsys.readouterr().err
    assert err == "\rkcc book: reading page 3/10\rkcc book: reading page 10/10\n"
