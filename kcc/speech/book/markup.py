"""HTML / XHTML bytes -> a tree -> the text as (heading level, text) blocks, every step linear in
the document's size.

- check_depth and strip_doctypes scan the bytes forward once: each search starts where the last
  one ended, so no byte is examined twice (a regex that rescans to the end of the document from
  every unclosed '<x' or '<!DOCTYPE[' made a 1 MiB file cost an hour). The bytes each scan
  examines are counted in the ReadBudget (bounds.py), which is what the tests scale.
- XHTML goes through libxml2's XML parser with entity expansion, DTD loading and the network
  off: it understands an internal DTD subset (a ']>' inside an entity value included) and
  expands nothing. A document the XML parser refuses (an HTML entity such as &nbsp; that only the
  external DTD declares, a second DOCTYPE, tag soup) goes through libxml2's HTML parser with
  every DOCTYPE removed first (the HTML parser would read a subset's tail aloud).
- blocks() walks the tree once, with an explicit stack, appending text to the current line:
  nothing is inserted into or searched in the tree.

Page furniture is not read: navigation, headers of the site (role=banner), footers, asides,
page-number markers, forms; footnotes and endnotes and the marks that point at them.
"""
from __future__ import annotations

import re

from lxml import etree

from kcc.speech.book.bounds import LIMITS, BookLimits, ReadBudget
from kcc.speech.book.errors import NestingTooDeep

# Elements with no end tag, or whose end tag HTML lets an author leave out: they add no depth.
_FLAT = frozenset(b"area base br col embed hr img input link meta param source track wbr p li dt dd tr td th "
                  b"option thead tbody tfoot colgroup rt rp".split())
_NAME = re.compile(rb"[A-Za-z][A-Za-z0-9:_.-]*")          # anchored at one position: linear in the name
# Inside a DOCTYPE: the next byte that changes the scanner's state (a character class, searched
# forward from the current position: it cannot backtrack).
_DECL = re.compile(rb"[\"'\[\]>]|<!--")

BLOCKS = frozenset("p div li blockquote pre tr dt dd figcaption section article header td th table ul ol dl "
                   "main body h1 h2 h3 h4 h5 h6 hr caption address center".split())
HEADINGS = {f"h{i}": i for i in range(1, 7)}
# Never read: not text (script, style), the document's head, and page furniture.
SKIP = frozenset("script style head nav aside footer rt rp noscript template form button select textarea iframe "
                 "object svg title".split())
# EPUB 3 structural semantics (epub:type) and the ARIA roles for the same things.
NOTE_TYPES = frozenset({"footnote", "endnote", "rearnote", "note", "footnotes", "endnotes", "rearnotes",
                        "doc-footnote", "doc-endnote", "doc-endnotes", "doc-noteref", "noteref"})
FURNITURE_TYPES = frozenset({"navigation", "banner", "contentinfo", "complementary", "search", "pagebreak",
                             "doc-pagebreak", "page-list", "doc-pagelist", "toc", "doc-toc", "landmarks"})
# Page numbers as books put them in the text: Project Gutenberg's <span class="pagenum">[Pg 12]</span>.
FURNITURE_CLASSES = frozenset({"pagenum", "page-num", "pagenumber", "page-number", "pageno", "folio"})
EPUB_TYPE = "{http://www.idpf.org/2007/ops}type"


def check_depth(data: bytes, where: str, limits: BookLimits = LIMITS, budget: ReadBudget | None = None) -> None:
    """Refuses markup nested past limits.max_depth, counted by one forward scan of the tags."""
    depth, pos, n, scanned = 0, 0, len(data), 0
    while True:
        lt = data.find(b"<", pos)
        if lt < 0:
            scanned += n - pos
            break
        scanned += lt - pos + 1
        if data.startswith(b"<!--", lt):
            end = data.find(b"-->", lt + 4)
            scanned += (end if end >= 0 else n) - lt
            if end < 0:
                break
            pos = end + 3
            continue
        close = data.startswith(b"/", lt + 1)
        m = _NAME.match(data, lt + 1 + close)
        if m is None:                  # '<' in text, '<!', '<?': no element
            pos = lt + 1
            continue
        gt = data.find(b">", m.end())
        if gt < 0:                     # no tag ends after this one: the rest is text
            scanned += n - lt
            break
        scanned += gt - lt
        pos = gt + 1
        if data[gt - 1] == 0x2F or m.group().lower() in _FLAT:      # <x/>, or no depth
            continue
        depth += -1 if close else 1
        if depth > limits.max_depth:
            raise NestingTooDeep(f"{where}: elements nested deeper than {limits.max_depth}")
        depth = max(depth, 0)
    if budget is not None:
        budget.spend("scanned", scanned)


def strip_doctypes(data: bytes, budget: ReadBudget | None = None) -> bytes:
    """`data` without any <!DOCTYPE ...> declaration, internal subset included: quoted strings
    and comments inside it are skipped whole, so a ']>' inside an entity value does not end it."""
    lower = data.lower()               # ASCII case folding: the same length, the same offsets
    out, pos, n, scanned = [], 0, len(data), 0
    while True:
        start = lower.find(b"<!doctype", pos)
        if start < 0:
            out.append(data[pos:])
            scanned += n - pos
            break
        out.append(data[pos:start])
        j, subset = start + 9, False
        while True:
            m = _DECL.search(data, j)
            if m is None:
                j = n
                break
            tok = m.group()
            if tok in (b'"', b"'"):
                k = data.find(tok, m.end())
                j = n if k < 0 else k + 1
            elif tok == b"<!--":
                k = data.find(b"-->", m.end())
                j = n if k < 0 else k + 3
            else:
                j = m.end()
                if tok == b"[":
                    subset = True
                elif tok == b"]":
                    subset = False
                elif not subset:       # '>' outside the subset: the declaration's end
                    break
            if j >= n:
                break
        scanned += j - pos
        pos = j
    if budget is not None:
        budget.spend("scanned", scanned)
    return b"".join(out)


def _xml_parser() -> etree.XMLParser:
    return etree.XMLParser(resolve_entities=False, load_dtd=False, no_network=True, dtd_validation=False,
                           huge_tree=False, remove_comments=True, remove_pis=True, recover=False)


def parse(data: bytes, where: str, limits: BookLimits = LIMITS, budget: ReadBudget | None = None,
          xml: bool = False):
    """The document's root element (None: no element at all). xml: try the XML parser first
    (XHTML); the HTML parser otherwise and whenever the XML parser refuses the document."""
    budget = budget or ReadBudget(limits, where)
    budget.spend("bytes", len(data))
    check_depth(data, where, limits, budget)
    if xml or data.lstrip()[:5] == b"<?xml":
        try:
            return etree.fromstring(data, _xml_parser())
        except etree.XMLSyntaxError:
            pass
    body = strip_doctypes(data, budget)
    try:
        body.decode("utf-8")
        encoding = "utf-8"             # libxml2's HTML parser would take undeclared bytes as Latin-1
    except UnicodeDecodeError:
        encoding = None
    parser = etree.HTMLParser(encoding=encoding, no_network=True, remove_comments=True, remove_pis=True,
                              huge_tree=False)
    try:
        return etree.fromstring(body, parser)
    except etree.XMLSyntaxError:
        return None


def local(el) -> str:
    """An element's tag without its namespace, lower case ('' for comments, entities, PIs)."""
    tag = el.tag
    if not isinstance(tag, str):
        return ""
    return tag.rpartition("}")[2].lower()


def attr(el, name: str) -> str:
    return el.get(name) or ""


def types(el) -> set[str]:
    """epub:type and role tokens (epub:type is namespaced in XHTML, a plain attribute in HTML)."""
    return set((attr(el, EPUB_TYPE) or attr(el, "epub:type")).split()) | set(attr(el, "role").split())


def _skipped(el, name: str) -> bool:
    if name in SKIP:
        return True
    kinds = types(el)
    if kinds & NOTE_TYPES or kinds & FURNITURE_TYPES:
        return True
    if FURNITURE_CLASSES & set(attr(el, "class").lower().split()):
        return True
    if name == "sup":                  # a reference mark: <sup><a href="#n1">1</a></sup>, <sup>[2]</sup>
        if any(local(c) == "a" for c in el):
            return True
        if len(el) == 0 and (el.text or "").strip().strip("[]*†‡").isdigit():
            return True
    return False


def find(root, name: str):
    """The first element called `name` in document order (an iterative walk, no recursion)."""
    for el in root.iter():
        if local(el) == name:
            return el
    return None


def blocks(root, budget: ReadBudget | None = None) -> list[tuple[int, str]]:
    """The document's text as (heading level 1-6, or 0 for a paragraph, text), in order; page
    furniture, notes and their reference marks dropped, whitespace inside a block collapsed."""
    out: list[tuple[int, str]] = []
    if root is None:
        return out
    line: list[str] = []
    level = [0]
    nodes = 0

    def flush() -> None:
        text = " ".join("".join(line).split())
        if text:
            out.append((level[0], text))
        line.clear()
        level[0] = 0

    def text(s: str | None, pre: int) -> None:
        if not s:
            return
        if pre:
            first, *rest = s.split("\n")
            line.append(first)
            for part in rest:
                flush()
                line.append(part)
        else:
            line.append(s)

    # (element, pre-depth, phase): phase 0 opens the element, phase 1 closes it (then its tail)
    stack = [(root, 0, 0)]
    while stack:
        el, pre, phase = stack.pop()
        name = local(el)
        if phase == 1:
            if name in BLOCKS or name in HEADINGS:
                flush()
            text(el.tail, pre - (name == "pre"))
            continue
        nodes += 1
        if nodes & 0xFFF == 0 and budget is not None:
            budget.spend("nodes", 0x1000)
        if not name:                   # an entity reference left unexpanded: written as it stands
            if isinstance(el, etree._Entity):
                line.append(el.text or "")
            text(el.tail, pre)
            continue
        if _skipped(el, name):
            text(el.tail, pre)
            continue
        if name == "br":
            flush()
            text(el.tail, pre)
            continue
        if name in BLOCKS or name in HEADINGS:
            flush()
            level[0] = HEADINGS.get(name, 0)
        inner = pre + (name == "pre")
        text(el.text, inner)
        stack.append((el, inner, 1))
        stack.extend((child, inner, 0) for child in reversed(el))
    flush()
    if budget is not None:
        budget.spend("nodes", nodes & 0xFFF)
    return out
