"""Books read by their structure, and the files a book job makes and trusts: page furniture not
read (HTML / XHTML, PDF running heads and page numbers), a PDF's outline as its chapters,
per-chapter files tagged, the whole book's captions beside the .m4b, the work directory (private,
removed after success unless kept), kcc's own temporaries the only ones swept, --workers bounded
as kcc serve's, a heading that is really a paragraph."""
from __future__ import annotations

import os
import re
import warnings

import pytest

from book_fixtures import write_all, write_pages_pdf
from kcc.speech.batch.api import Batch, BatchError
from kcc.speech.book.errors import BookError, UnsafeWorkDir
from kcc.speech.book.job import BookJob, BookOptions
from kcc.speech.book.layout import ITEM_CHARS, TITLE_CHARS, plan_chapters
from kcc.speech.book.m4b import read_chapters
from kcc.speech.book.pdf import drop_furniture
from kcc.speech.book.sources import read_book
from kcc.speech.book.tags import read_chapter_tags
from kcc.speech.book.text import Book, Chapter
from kcc.speech.worker_budget import MAX_WORKERS, MemoryBudgetError, TooManyWorkers, check_workers
from test_book_audio import batch_kw, run, voices  # noqa: F401  (the fixture)


def texts(book) -> str:
    return " | ".join(p for c in book.chapters for p in c.paragraphs)


# -- HTML / XHTML page furniture ---------------------------------------------------------------
FURNITURE = [
    "<nav><a href='/'>Home</a> Site menu</nav>",
    "<footer>Copyright footer text</footer>",
    "<aside>Sidebar aside text</aside>",
    "<header role='banner'>Banner header text</header>",
    "<div role='navigation'>Role navigation text</div>",
    "<span class='pagenum'>[Pg 12]</span>",
    "<span epub:type='pagebreak' title='13'>13 pagebreak</span>",
    "<form><button>Button text</button></form>",
]


@pytest.mark.parametrize("piece", FURNITURE)
@pytest.mark.parametrize("suffix", [".html", ".xhtml"])
def test_page_furniture_is_not_read(tmp_path, piece, suffix):
    doc = ("<html xmlns='http://www.w3.org/1999/xhtml' xmlns:epub='http://www.idpf.org/2007/ops'><body>"
           f"<h1>One</h1><p>Before the piece.</p>{piece}<p>After the piece.</p>"
           "<h1>Two</h1><p>Second chapter.</p></body></html>")
    path = tmp_path / f"page{suffix}"
    path.write_text(doc, encoding="utf-8")
    book = read_book(path)
    assert [c.title for c in book.chapters] == ["One", "Two"]
    assert book.chapters[0].paragraphs == ["Before the piece.", "After the piece."], texts(book)


# -- PDF: running heads, page numbers, outline -------------------------------------------------
WORDS = ["dark", "grim", "cold", "wet", "long", "late", "odd", "bad", "sad"]
COUNT = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]


def novel_pages(headings: dict[int, str]) -> list[list[str]]:
    pages = []
    for i in range(9):
        lines = ["The Storm Book" if i % 2 else "A Novel In Parts"]            # alternating running heads
        if i in headings:
            lines.append(headings[i])
        lines += [f"It was a {WORDS[i]} and stormy night and the rain fell in torrents over the town.",
                  f"Then {COUNT[i]} of them went home.", f"Page {i + 1}" if i % 3 else str(i + 1)]
        pages.append(lines)
    return pages


def test_running_heads_footers_and_page_numbers_are_dropped(tmp_path):
    heads = {0: "Chapter 1", 3: "Chapter 2", 6: "Chapter 3"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        book = read_book(write_pages_pdf(tmp_path / "n.pdf", novel_pages(heads)))
    text = texts(book)
    for furniture in ("Storm Book", "A Novel In Parts", "Page ", "| 4 |"):
        assert furniture not in text, (furniture, text)
    assert [c.title for c in book.chapters] == ["Chapter 1", "Chapter 2", "Chapter 3"]      # headings kept
    assert sum(len(c.paragraphs) for c in book.chapters) == 9 and "a sad and stormy night" in text


def test_a_line_repeated_far_apart_is_text_not_a_running_head():
    pages = [[f"Body {i} line one.", "A refrain.", f"Body {i} line two."] if i in (0, 5, 10) else
             [f"Body {i} line one.", f"Body {i} line two."] for i in range(11)]
    kept = drop_furniture(pages)
    assert sum("A refrain." in p for p in kept) == 3                   # 3 times in 11 pages: under half


def test_the_pdf_outline_gives_the_chapters(tmp_path):
    heads = {0: "The First Part", 3: "The Second Part", 6: "The Third Part"}
    outline = [("The First Part", 0), ("The Second Part", 3), ("The Third Part", 6)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        book = read_book(write_pages_pdf(tmp_path / "o.pdf", novel_pages(heads), outline=outline))
    assert [c.title for c in book.chapters] == ["The First Part", "The Second Part", "The Third Part"]
    assert [len(c.paragraphs) for c in book.chapters] == [3, 3, 3]
    assert "Part" not in texts(book)                                     # the title line is not read twice
    assert book.chapters[1].paragraphs[0].startswith("It was a wet")


def test_an_outline_entry_in_mid_page_splits_at_its_title_line(tmp_path):
    pages = [["Alpha opening line of the book, which is long.", "Beta", "Beta text follows here, also long."],
             ["More of beta on the next page, long enough."]]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        book = read_book(write_pages_pdf(tmp_path / "m.pdf", pages, outline=[("Alpha", 0), ("Beta", 0)]))
    assert [c.title for c in book.chapters] == ["Alpha", "Beta"]
    assert texts(book).count("Beta") == 0 or "Beta text" in book.chapters[1].paragraphs[0]
    assert book.chapters[0].paragraphs == ["Alpha opening line of the book, which is long."]


# -- outputs: tags, whole-book captions, the work directory ------------------------------------
@pytest.mark.parametrize("fmt", ["flac", "opus", "mp3", "wav"])
def test_chapter_files_carry_tags(tmp_path, voices, fmt):  # noqa: F811
    files = write_all(tmp_path / "in")
    job, _ = run(files["epub"], tmp_path / "out", voices, BookOptions(format=fmt, voice="va.npy"))
    got = sorted((tmp_path / "out").glob(f"*.{fmt}"))
    assert len(got) == 3
    tags = read_chapter_tags(got[1])
    assert tags["title"] == "The Pool of Tears" and tags["album"] == job.book.title
    assert tags["artist"] == job.book.author and tags["track"].split("/")[0] == "2"


def _cue_starts(srt: str) -> list[float]:
    return [int(h) * 3600 + int(m) * 60 + int(s) + int(ms) / 1000
            for h, m, s, ms in re.findall(r"^(\d\d):(\d\d):(\d\d),(\d\d\d) -->", srt, re.M)]


def test_the_whole_book_has_one_caption_file_on_the_m4b_timeline(tmp_path, voices):  # noqa: F811
    files = write_all(tmp_path / "in")
    out = tmp_path / "book.m4b"
    run(files["epub"], out, voices, BookOptions(voice="va.npy", subtitles="srt"))
    whole = (tmp_path / "book.srt").read_text()
    starts = _cue_starts(whole)
    assert starts == sorted(starts)
    per_chapter = [(tmp_path / f"book.{i:03d}.srt").read_text() for i in (1, 2, 3)]
    assert len(starts) == sum(len(_cue_starts(c)) for c in per_chapter)
    chapters = read_chapters(out)
    first_of_two = _cue_starts(per_chapter[1])[0]
    assert chapters[1][1] + first_of_two in [pytest.approx(s, abs=0.002) for s in starts]


def test_the_work_directory_is_removed_after_success_unless_kept(tmp_path, voices):  # noqa: F811
    files = write_all(tmp_path / "in")
    run(files["markdown"], tmp_path / "a", voices, BookOptions(format="wav", voice="va.npy"))
    assert not (tmp_path / "a" / ".kcc-book").exists()
    run(files["markdown"], tmp_path / "b", voices, BookOptions(format="wav", voice="va.npy", keep_work=True))
    work = tmp_path / "b" / ".kcc-book"
    assert work.is_dir() and (os.stat(work).st_mode & 0o777) == 0o700
    assert sorted(p.name for p in work.glob("c0001-*.wav"))


def _another_users(w, monkeypatch) -> None:
    if os.geteuid() == 0:
        os.chown(w, 4242, -1)
    else:                                # as another user would see it: the directory is not theirs
        uid = os.geteuid()
        monkeypatch.setattr(os, "geteuid", lambda: uid + 1)


@pytest.mark.parametrize("spoil", [
    lambda w, _: os.chmod(w, 0o777),                                    # world-writable
    lambda w, _: os.chmod(w, 0o770),                                    # group-writable
    _another_users,
    lambda w, _: (os.rmdir(w), os.symlink(w.parent / "elsewhere", w)),  # a link
], ids=["world-writable", "group-writable", "another-user", "symlink"])
def test_a_work_directory_someone_else_could_write_is_refused(tmp_path, voices, spoil, monkeypatch):  # noqa: F811
    files = write_all(tmp_path / "in")
    out = tmp_path / "shared" / "book.m4b"
    work = out.parent / ".book.m4b.kcc-book"
    work.parent.mkdir()
    (work.parent / "elsewhere").mkdir()
    work.mkdir()
    spoil(work, monkeypatch)
    job = BookJob(files["epub"], out, BookOptions(voice="va.npy"), **batch_kw(voices))
    with pytest.raises(UnsafeWorkDir, match="work directory"):
        list(job)
    assert not out.exists() and not list((work.parent / "elsewhere").iterdir())


def test_only_kcc_temporaries_of_dead_runs_are_swept(tmp_path, voices):  # noqa: F811
    files = write_all(tmp_path / "in")
    out = tmp_path / "out"
    out.mkdir()
    theirs = [out / ".notes.part", out / ".001-down-the-rabbit-hole.abc123.part", tmp_path / ".out.m4b.x.part"]
    for p in theirs:
        p.write_text("not kcc's")
    dead = out / f".kcc-tmp.{2 ** 22 + 12345}.001.wav.deadbeef.part"      # a pid above pid_max: gone
    dead.write_text("a killed run's")
    run(files["markdown"], out, voices, BookOptions(format="wav", voice="va.npy"))
    assert all(p.read_text() == "not kcc's" for p in theirs)
    assert not dead.exists()


# -- --workers: the limit kcc serve has ---------------------------------------------------------
@pytest.mark.parametrize("workers", [0, MAX_WORKERS + 1, 100_000])
def test_book_and_batch_refuse_workers_past_the_cap(tmp_path, voices, workers):  # noqa: F811
    files = write_all(tmp_path / "in")
    with pytest.raises(BookError, match=rf"outside \[1, {MAX_WORKERS}\]"):
        BookJob(files["text"], tmp_path / "o.m4b", BookOptions(voice="va.npy"), **batch_kw(voices, workers=workers))
    with pytest.raises(BatchError, match=rf"outside \[1, {MAX_WORKERS}\]"):
        Batch([{"id": "a", "text": "x"}], tmp_path / "b", workers=workers)


def test_workers_past_the_memory_are_refused_like_kcc_serve():
    check_workers(3, available=(400 << 20) + 3 * (600 << 20))
    with pytest.raises(MemoryBudgetError, match="use --workers 3 or fewer"):
        check_workers(4, available=(400 << 20) + 3 * (600 << 20))
    check_workers(200, available=1, local=False)                     # a Ray cluster's memory is its own
    with pytest.raises(TooManyWorkers):
        check_workers(True)


def test_the_cli_refuses_workers_past_the_cap_with_exit_2(tmp_path, capsys):
    from kcc.cli import main
    files = write_all(tmp_path / "in")
    assert main(["book", str(files["text"]), "-o", str(tmp_path / "o.m4b"), "--workers", "100000"]) == 2
    assert f"outside [1, {MAX_WORKERS}]" in capsys.readouterr().err


def test_clean_is_deprecated_with_a_message(tmp_path, capsys):
    from kcc.cli import main
    assert main(["book", str(tmp_path / "missing.txt"), "-o", str(tmp_path / "o.m4b"), "--clean"]) == 2
    err = capsys.readouterr().err
    assert "--clean is deprecated" in err and "--keep-work" in err and "NotARegularFile" in err


# -- a heading that is really a paragraph --------------------------------------------------------
LONG = " ".join(f"This sentence number {i} belongs to a heading that is really a paragraph." for i in range(50))


def test_a_long_heading_is_read_as_a_paragraph(tmp_path):
    assert len(LONG) > 3000
    path = tmp_path / "wp.html"
    path.write_text(f"<h1>One</h1><p>a.</p><h1>{LONG}</h1><p>b.</p><h1>Two</h1><p>c.</p>", encoding="utf-8")
    book = read_book(path)
    assert [c.title for c in book.chapters] == ["One", "Two"] and book.chapters[0].paragraphs == ["a.", LONG, "b."]


def test_a_long_title_is_spoken_in_pieces_and_shortened_as_a_marker():
    book = Book("B", chapters=[Chapter(LONG, ["Text."])])
    plan = plan_chapters(book)[0]
    spoken = [s.text for s in plan.segments[:-1]]
    assert len(spoken) > 2 and all(len(t) <= ITEM_CHARS for t in spoken) and " ".join(spoken) == LONG
    assert len(plan.title) <= TITLE_CHARS and plan.title.endswith("…") and LONG.startswith(plan.title[:-1])


def test_a_book_with_a_long_title_is_made(tmp_path, voices):  # noqa: F811
    book = Book("B", chapters=[Chapter(LONG, ["Text after it."])])
    job, _ = run(book, tmp_path / "o", voices, BookOptions(format="wav", voice="va.npy"))
    assert job.ok and len(list((tmp_path / "o").glob("001-*.wav"))) == 1
