"""The named refusals of `kcc book`: every input that cannot become an audiobook raises one of
these, with a message naming the file and the reason; nothing is written for it."""
from __future__ import annotations


class BookError(ValueError):
    """The book cannot be read or made; the message names the file and why."""


class UnsupportedBook(BookError):
    """Not a format kcc book reads (by suffix and content), or a zip that is no EPUB."""


class UnsafeArchive(BookError):
    """An EPUB whose zip is hostile: a member path that leaves the archive (.., absolute),
    too many members, or more bytes unpacked than the limits allow (a zip bomb)."""


class BookTooLarge(BookError):
    """The file, a chapter, or the whole text is past a limit of kcc.limits (bounds.BookLimits)."""


class NestingTooDeep(BookError):
    """HTML / XHTML nested deeper than the limit (a parser's recursion is the risk)."""


class UnreadablePdf(BookError):
    """A PDF that pypdf cannot read: encrypted, garbled, or with no extractable text."""


class EmptyBook(BookError):
    """The input holds no text to speak."""


class ReadBudgetExceeded(BookTooLarge):
    """Reading the book would take more work than a book may (bounds.ReadBudget): markup bytes
    parsed, document nodes, or PDF content-stream bytes (a small file can ask for hours)."""


class NotARegularFile(BookError):
    """The input is no regular file (a device such as /dev/zero, a FIFO, a directory) or cannot
    be opened; a book is read from a file, once."""


class UnsafeWorkDir(BookError):
    """The work directory beside the output is another user's, world- or group-writable, or a
    link: kcc would trust the items someone else can put in it."""
