"""Small public-domain books written at test time in every format `kcc book` reads (Lewis
Carroll's Alice's Adventures in Wonderland, 1865: chapter titles and first lines), and the
measure of clicks at the joins of an assembled chapter (tests and bench/bench_book.py)."""
from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np

TITLE, AUTHOR = "Alice's Adventures in Wonderland", "Lewis Carroll"
CHAPTERS = [
    ("Down the Rabbit-Hole", ["Alice was beginning to get very tired.", "So she was considering."]),
    ("The Pool of Tears", ["Curiouser and curiouser!"]),
    ("A Caucus-Race", ["They were indeed a queer-looking party."]),
]

# The opening of chapter I and of chapter II, for the bench's longer book (bench/bench_book.py).
OPENING = [
    "Alice was beginning to get very tired of sitting by her sister on the bank, and of having nothing to do: "
    "once or twice she had peeped into the book her sister was reading, but it had no pictures or conversations "
    "in it, \u201cand what is the use of a book,\u201d thought Alice \u201cwithout pictures or conversations?\u201d",
    "So she was considering in her own mind (as well as she could, for the hot day made her feel very sleepy and "
    "stupid), whether the pleasure of making a daisy-chain would be worth the trouble of getting up and picking "
    "the daisies, when suddenly a White Rabbit with pink eyes ran close by her.",
    "There was nothing so very remarkable in that; nor did Alice think it so very much out of the way to hear the "
    "Rabbit say to itself, \u201cOh dear! Oh dear! I shall be late!\u201d (when she thought it over afterwards, it "
    "occurred to her that she ought to have wondered at this, but at the time it all seemed quite natural); but "
    "when the Rabbit actually took a watch out of its waistcoat-pocket, and looked at it, and then hurried on, "
    "Alice started to her feet, for it flashed across her mind that she had never before seen a rabbit with "
    "either a waistcoat-pocket, or a watch to take out of it, and burning with curiosity, she ran across the "
    "field after it, and fortunately was just in time to see it pop down a large rabbit-hole under the hedge.",
    "In another moment down went Alice after it, never once considering how in the world she was to get out again.",
    "The rabbit-hole went straight on like a tunnel for some way, and then dipped suddenly down, so suddenly that "
    "Alice had not a moment to think about stopping herself before she found herself falling down a very deep well.",
    "Either the well was very deep, or she fell very slowly, for she had plenty of time as she went down to look "
    "about her and to wonder what was going to happen next. First, she tried to look down and make out what she "
    "was coming to, but it was too dark to see anything; then she looked at the sides of the well, and noticed "
    "that they were filled with cupboards and book-shelves; here and there she saw maps and pictures hung upon pegs.",
    "Down, down, down. Would the fall never come to an end? \u201cI wonder how many miles I\u2019ve fallen by this "
    "time?\u201d she said aloud.",
    "\u201cCuriouser and curiouser!\u201d cried Alice (she was so much surprised, that for the moment she quite "
    "forgot how to speak good English); \u201cnow I\u2019m opening out like the largest telescope that ever was! "
    "Good-bye, feet!\u201d",
]


def write_epub(path: Path, chapters=CHAPTERS, lang: str = "en", cover: bytes | None = None,
               notes: bool = True) -> Path:
    """EPUB 3 built with ebooklib: a cover page and a contents page (not read aloud), the
    chapters, a footnote with its reference mark, and a non-linear notes document."""
    from ebooklib import epub
    book = epub.EpubBook()
    book.set_identifier("kcc-test-alice")
    book.set_title(TITLE)
    book.set_language(lang)
    book.add_author(AUTHOR)
    if cover is not None:
        book.set_cover("cover.png", cover)
    docs = []
    for i, (title, paras) in enumerate(chapters, 1):
        c = epub.EpubHtml(title=title, file_name=f"chap_{i}.xhtml", lang=lang)
        body = "".join(f"<p>{p}</p>" for p in paras)
        if notes and i == 1:
            body += ('<p>Down, down, down.<sup><a epub:type="noteref" href="#n1">1</a></sup></p>'
                     '<aside epub:type="footnote" id="n1"><p>A note nobody should hear.</p></aside>')
        c.content = f"<html><body><h1>{title}</h1>{body}</body></html>"
        book.add_item(c)
        docs.append(c)
    extra = epub.EpubHtml(title="Notes", file_name="notes.xhtml", lang=lang)
    extra.content = "<html><body><p>End notes that are not read.</p></body></html>"
    book.add_item(extra)
    book.toc = [epub.Link(d.file_name, d.title, f"c{i}") for i, d in enumerate(docs, 1)]
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *docs, (extra, "no")]
    epub.write_epub(str(path), book)
    return path


def write_epub2(path: Path, chapters=CHAPTERS) -> Path:
    """EPUB 2.0.1 written by hand (ebooklib writes only EPUB 3): an OPF 2.0 package, the table
    of contents in an NCX only, XHTML 1.1 chapters whose headings differ from the NCX titles."""
    import zipfile
    items = "".join(f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
                    for i in range(1, len(chapters) + 1))
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(1, len(chapters) + 1))
    opf = (f'<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="2.0" unique-identifier="id">'
           f'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>{TITLE}</dc:title>'
           f'<dc:creator>{AUTHOR}</dc:creator><dc:language>en-GB</dc:language><dc:identifier id="id">x</dc:identifier>'
           f'</metadata><manifest><item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>{items}'
           f'</manifest><spine toc="ncx">{spine}</spine></package>')
    points = "".join(f'<navPoint id="n{i}" playOrder="{i}"><navLabel><text>{t}</text></navLabel>'
                     f'<content src="c{i}.xhtml"/></navPoint>' for i, (t, _) in enumerate(chapters, 1))
    ncx = (f'<?xml version="1.0"?><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><head/>'
           f'<docTitle><text>{TITLE}</text></docTitle><navMap>{points}</navMap></ncx>')
    container = ('<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
                 '<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
                 '</rootfiles></container>')
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        zf.writestr("META-INF/container.xml", container)
        zf.writestr("OEBPS/content.opf", opf)
        zf.writestr("OEBPS/toc.ncx", ncx)
        for i, (t, paras) in enumerate(chapters, 1):
            body = "".join(f"<p>{p}</p>" for p in paras)
            zf.writestr(f"OEBPS/c{i}.xhtml", '<?xml version="1.0"?><!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.1//EN" '
                        '"http://www.w3.org/TR/xhtml11/DTD/xhtml11.dtd"><html xmlns="http://www.w3.org/1999/xhtml">'
                        f'<head><title>c{i}</title></head><body><h2>Chapter {i}</h2>{body}</body></html>')
    return path


def markdown_text(chapters=CHAPTERS, lang: str = "en") -> str:
    body = "".join(f"## {t}\n\n" + "".join(f"{p}\n\n" for p in paras) for t, paras in chapters)
    return f"---\ntitle: {TITLE}\nauthor: {AUTHOR}\nlang: {lang}\n---\n\n# {TITLE}\n\n{body}"


def html_text(chapters=CHAPTERS, lang: str = "en") -> str:
    body = "".join(f"<h2>{t}</h2>\n" + "".join(f"<p>{p}</p>\n" for p in paras) for t, paras in chapters)
    return (f'<!DOCTYPE html><html lang="{lang}"><head><title>{TITLE}</title>'
            f'<meta name="author" content="{AUTHOR}"></head><body><h1>{TITLE}</h1>\n{body}</body></html>')


def plain_text(chapters=CHAPTERS) -> str:
    out = f"{TITLE}\n\nby {AUTHOR}\n\n"
    for i, (t, paras) in enumerate(chapters, 1):
        out += f"CHAPTER {i}. {t}\n\n" + "".join(f"{p}\n\n" for p in paras)
    return out


def write_pdf(path: Path, text: str = None, encrypt: bool = False) -> Path:
    """A one-font text PDF written by hand (each line a Tj), and, encrypted, through pypdf."""
    lines = (text or plain_text()).splitlines()
    ops = ["BT /F1 11 Tf 14 TL 50 780 Td"]
    for line in lines:
        esc = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops.append(f"({esc}) Tj T*")
    ops.append("ET")
    stream = zlib.compress("\n".join(ops).encode("latin-1"))
    objs = ["<< /Type /Catalog /Pages 2 0 R >>", "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Resources << /Font << /F1 4 0 R >> >> "
            "/Contents 5 0 R >>", "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n{o}\nendobj\n".encode()
    offsets.append(len(out))
    out += f"5 0 obj\n<< /Length {len(stream)} /Filter /FlateDecode >>\nstream\n".encode() + stream + b"\nendstream\nendobj\n"
    xref = len(out)
    out += f"xref\n0 6\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size 6 /Root 1 0 R /Info << /Title ({TITLE.replace(chr(39), '')}) /Author ({AUTHOR}) >> >>\n" \
           f"startxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    if encrypt:
        from pypdf import PdfReader, PdfWriter
        w = PdfWriter(clone_from=PdfReader(str(path)))
        w.encrypt(user_password="secret", owner_password="owner", algorithm="RC4-128")  # RC4: no cryptography package
        with open(path, "wb") as fh:
            w.write(fh)
    return path


def write_all(folder: Path, chapters=CHAPTERS) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {"epub": write_epub(folder / "alice.epub", chapters),
           "markdown": folder / "alice.md", "html": folder / "alice.html", "text": folder / "alice.txt",
           "pdf": write_pdf(folder / "alice.pdf", plain_text(chapters))}
    out["markdown"].write_text(markdown_text(chapters), encoding="utf-8")
    out["html"].write_text(html_text(chapters), encoding="utf-8")
    out["text"].write_text(plain_text(chapters), encoding="utf-8")
    return out


def join_clicks(audio: np.ndarray, joins: list[int], speech: list[tuple[int, int]], window: int = 24) -> tuple[float, float]:
    """(largest |sample step| within `window` samples of any join, the 99.9th percentile of
    |sample step| inside speech): a click is a join step that stands out of the speech's steps."""
    steps = np.abs(np.diff(audio.astype(np.float64)))
    at_joins = max((steps[max(0, j - window):j + window].max() for j in joins if 0 < j < audio.size), default=0.0)
    inside = np.concatenate([steps[a + window:b - window] for a, b in speech if b - a > 2 * window + 1])
    return float(at_joins), float(np.percentile(inside, 99.9))


def content_stream(lines: list[str]) -> bytes:
    ops = ["BT /F1 11 Tf 14 TL 50 780 Td"]
    for line in lines:
        esc = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        ops.append(f"({esc}) Tj T*")
    ops.append("ET")
    return "\n".join(ops).encode("latin-1")


def write_pages_pdf(path: Path, pages: list[list[str]] | None = None, outline: list[tuple[str, int]] = (),
                    shared: bytes | None = None, count: int = 0) -> Path:
    """A text PDF written by hand, one content stream per page (`pages`: each page's lines), or
    `count` pages that all draw the one content stream `shared` (the work-budget case); with
    `outline`: (title, page index) bookmarks added through pypdf."""
    n = count if shared is not None else len(pages)
    streams = [zlib.compress(shared)] if shared is not None else [zlib.compress(content_stream(p)) for p in pages]
    # objects: 1 catalog, 2 pages, 3 font, 4.. page objects, then the content streams
    first_stream = 4 + n
    kids = " ".join(f"{4 + i} 0 R" for i in range(n))
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>", f"<< /Type /Pages /Kids [{kids}] /Count {n} >>".encode(),
            b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"]
    for i in range(n):
        ref = first_stream if shared is not None else first_stream + i
        objs.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 842] /Resources << /Font << /F1 3 0 R >> >> "
                    f"/Contents {ref} 0 R >>".encode())
    for s in streams:
        objs.append(f"<< /Length {len(s)} /Filter /FlateDecode >>\nstream\n".encode() + s + b"\nendstream")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + o + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{o:010d} 00000 n \n" for o in offsets).encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    if outline:
        from pypdf import PdfReader, PdfWriter
        w = PdfWriter(clone_from=PdfReader(str(path)))
        for title, page in outline:
            w.add_outline_item(title, page)
        with open(path, "wb") as fh:
            w.write(fh)
    return path
