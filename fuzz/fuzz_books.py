"""Bounded fuzzing of the books `kcc book` reads: HTML, XHTML, Markdown, EPUB members and PDF,
with a complexity check on every case.

Each case is a document built from pieces that have broken book readers before: tags left open
('<a' with no '>'), DOCTYPEs with internal subsets (']>' inside a quoted value, a second DOCTYPE,
an open '['), entity declarations and references, comments left open, deep nesting (within and
past the limit), page furniture (nav, footer, aside, page numbers), footnote marks, headings
longer than a paragraph, bytes that are not UTF-8, Markdown's emphasis and list runs; for PDF,
pages of random lines, outlines, and pages that share one content stream. The invariants:

- read_book returns a Book whose every chapter has paragraphs, or raises a BookError (anything
  else is a finding);
- the work is linear: the case's work count (ReadBudget: bytes scanned and parsed, nodes, PDF
  content-stream bytes) is at most WORK_PER_BYTE per input byte plus a constant, and the case with
  its body repeated four times costs at most 4 x (1 + SLACK) the work of the case itself;
- no DOCTYPE or entity declaration text is ever read aloud.

Usage:
    python fuzz/fuzz_books.py [-n 500] [--seed 0] [--seconds 60] [--surface html|xhtml|markdown|epub|pdf|all]
tests/test_fuzz_books.py runs a short loop of each surface.
"""
from __future__ import annotations

import random
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE), str(HERE.parent / "tests")]

from book_fixtures import content_stream, write_epub, write_pages_pdf  # noqa: E402
from kcc.speech.book.bounds import BookLimits, ReadBudget  # noqa: E402
from kcc.speech.book.errors import BookError  # noqa: E402
from kcc.speech.book.sources import read_book  # noqa: E402
from seeded import cases, exit_status, parser  # noqa: E402

SURFACES = ("html", "xhtml", "markdown", "epub", "pdf")
WORK_PER_BYTE = 6          # scanned (once) + parsed (once) + nodes (at most one per 3 bytes): ~2.3 in practice
SLACK = 0.3
LIMITS = BookLimits(max_file_bytes=8 << 20)

_PIECES = [
    lambda r: f"<p>{r.choice(['Hello there.', 'A line of text', 'Ünïcødé ✓', 'x'])}</p>",
    lambda r: "<a" * r.randrange(1, 200),
    lambda r: "<!DOCTYPE[" * r.randrange(1, 20),
    lambda r: '<!DOCTYPE html [<!ENTITY e "v]>w"> <!-- c ]> -->]>',
    lambda r: "<!DOCTYPE x [ <!ENTITY q '" + "]>" * r.randrange(1, 10) + "'>]>",
    lambda r: "&e; &nbsp; &amp; &#x41; &#65; &undefined;",
    lambda r: "<!-- open comment " if r.random() < 0.3 else "<!-- closed -->",
    lambda r: "<div>" * r.randrange(1, 300) + "deep" + "</div>" * r.randrange(0, 300),
    lambda r: r.choice(["<nav>menu</nav>", "<footer>foot</footer>", "<aside>side</aside>",
                        "<span class='pagenum'>[Pg 3]</span>", "<span epub:type='pagebreak'>4</span>"]),
    lambda r: "<p>mark<sup><a href='#n'>1</a></sup></p><aside epub:type='footnote' id='n'>note</aside>",
    lambda r: f"<h{r.randrange(1, 7)}>{'Heading ' * r.choice([1, 3, 600])}</h{r.randrange(1, 7)}>",
    lambda r: "<pre>line one\nline two\n\n</pre><br/><br>text<hr>",
    lambda r: "<script>var x = '<p>not text</p>';</script><style>p{}</style>",
    lambda r: r.choice(["<", ">", "</", "<>", "< p>", "<p/>", "</p></p></div>", "<?pi x?>", "<![CDATA[cd]]>"]),
]
_MD = ["# Title\n\n", "## Part\n\n", "*" * 50 + "a" + "_" * 50, "- item\n" * 20, "> quote\n" * 10,
       "[link](http://x) ![img](y)\n\n", "`code` " * 20, "Text paragraph.\n\n", "<div>raw</div>\n\n",
       "---\ntitle: T\n---\n", "\\" * 30 + "\n\n", "1. one\n   2. two\n" * 5]


def _doc(r: random.Random, xhtml: bool) -> tuple[bytes, bytes, bytes]:
    """(head, body, tail): the body is what the scaling check repeats."""
    body = "".join(r.choice(_PIECES)(r) for _ in range(r.randrange(1, 12)))
    head = ('<?xml version="1.0" encoding="utf-8"?>' if xhtml and r.random() < 0.7 else "") + \
        (r.choice(_PIECES[3:5])(r) if r.random() < 0.4 else "") + \
        ("<html xmlns='http://www.w3.org/1999/xhtml' xmlns:epub='http://www.idpf.org/2007/ops'>" if xhtml else
         "<html>") + "<head><title>Head title</title></head><body><p>Start.</p>"
    enc = "utf-8" if r.random() < 0.9 else "latin-1"
    return head.encode(), body.encode(enc, "replace"), b"<p>End.</p></body></html>"


def _md(r: random.Random) -> tuple[bytes, bytes, bytes]:
    return b"# Book\n\nStart.\n\n", "".join(r.choice(_MD) for _ in range(r.randrange(1, 10))).encode(), b"\n\nEnd.\n"


def _work(budget: ReadBudget) -> int:
    return sum(budget.counts.values())


def _read(path: Path) -> tuple[str, int]:
    budget = ReadBudget(LIMITS, str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            book = read_book(path, limits=LIMITS, budget=budget)
        except BookError as exc:
            return type(exc).__name__, _work(budget)
    for c in book.chapters:
        assert c.paragraphs, f"{path.name}: chapter {c.title!r} without paragraphs"
        for p in c.paragraphs:
            assert "<!ENTITY" not in p and "DOCTYPE" not in p.upper(), f"{path.name}: a declaration read aloud: {p!r}"
    return "read", _work(budget)


def _epub(r: random.Random, path: Path, doc: bytes) -> Path:
    src = write_epub(path.with_suffix(".src.epub"), notes=False)
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zout:
        for info in zin.infolist():
            data = zin.read(info)
            zout.writestr(info, doc if info.filename.endswith("chap_2.xhtml") else data)
    return path


def _pdf(r: random.Random, path: Path) -> int | None:
    """Writes a PDF case; returns the content-stream bytes its pages draw when they share one."""
    words = ["alpha", "beta", "gamma", "delta", "Chapter 1", "Page 3", "7", "The Title", "(", ")", "\\"]
    n = r.randrange(1, 24)
    if r.random() < 0.3:
        lines = [" ".join(r.choice(words) for _ in range(6)) for _ in range(5)]
        stream = content_stream(lines) + b"\n0 0 m" * r.randrange(0, 2000)
        write_pages_pdf(path, shared=stream, count=n)
        return n * len(stream)
    pages = [[" ".join(r.choice(words) for _ in range(r.randrange(1, 12))) for _ in range(r.randrange(0, 8))]
             for _ in range(n)]
    outline = [(r.choice(words), r.randrange(n)) for _ in range(r.randrange(0, 4))]
    write_pages_pdf(path, pages, outline=sorted(outline, key=lambda t: t[1]))
    return None


def one_case(surface: str, r: random.Random, where: Path) -> str:
    if surface == "pdf":
        shared = _pdf(r, where / "a.pdf")
        got, work = _read(where / "a.pdf")
        # a shared stream is counted on every page that draws it (pypdf parses it again each time)
        assert shared is None or work == shared or got != "read", (work, shared)
        return got
    head, body, tail = _md(r) if surface == "markdown" else _doc(r, surface in ("xhtml", "epub"))
    suffix = {"html": ".html", "xhtml": ".xhtml", "markdown": ".md", "epub": ".epub"}[surface]
    results = []
    for k in (1, 4):
        data = head + body * k + tail
        path = where / f"case{k}{suffix}"
        if surface == "epub":
            _epub(r, path, data)
        else:
            path.write_bytes(data)
        got, work = _read(path)
        # the markup is the measure: an EPUB's zip and OPF add a constant
        assert work <= WORK_PER_BYTE * len(data) + 200_000, f"{surface}: work {work} for {len(data)} bytes"
        results.append((got, work))
    (g1, w1), (g4, w4) = results
    if g1 == g4 == "read":
        assert w4 <= 4 * (1 + SLACK) * w1 + 50_000, f"{surface}: x4 body costs {w4}, x1 {w1}: not linear"
    return g1


def run(surface: str, n: int, seed: int = 0, seconds: float | None = None, log=print) -> dict[str, int]:
    counts: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for i in cases(n, seconds):
            r = random.Random(seed * 1_000_003 + i)
            s = surface if surface != "all" else SURFACES[i % len(SURFACES)]
            got = one_case(s, r, Path(tmp))
            counts[got] = counts.get(got, 0) + 1
    log(f"fuzz_books {surface}: {sum(counts.values())} cases, {counts}")
    return counts


def main() -> int:
    ap = parser(__doc__, 500)
    ap.add_argument("--surface", default="all", choices=[*SURFACES, "all"])
    args = ap.parse_args()
    return exit_status("fuzz_books", lambda: run(args.surface, args.n, args.seed, args.seconds))


if __name__ == "__main__":
    sys.exit(main())
