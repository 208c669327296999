"""kcc's standard streams: closed ones filled with /dev/null at start, a closed stdout refused
where it carries the product, a reader that goes away (a broken pipe) ended quietly."""
from __future__ import annotations

import errno
import os
import sys


class StdoutClosed(OSError):
    """The command writes its product to stdout, and stdout is closed (`kcc voices >&-`)."""

    def __init__(self, what: str):
        super().__init__(errno.EBADF, f"stdout is closed; {what} has nowhere to go (redirect it to a file or "
                                      "a pipe, or use -o FILE)")

    def __str__(self) -> str:                 # the sentence, without OSError's '[Errno 9]'
        return self.strerror


CLOSED_FDS: set[int] = set()         # the standard fds that were closed when kcc started


def guard_standard_fds() -> None:
    """Open /dev/null on whichever of fds 0, 1, 2 is closed, remembering which: otherwise the
    next file kcc opens gets that number, and whatever is printed to 'stdout' lands in it (an
    audio file, a cache entry). Python has then set sys.stdout / sys.stderr to None; they get
    the /dev/null stream, so prints are dropped (a summary line), and require_stdout() refuses
    where stdout is the product."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            CLOSED_FDS.add(fd)
    for fd in sorted(CLOSED_FDS):
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:                   # lowest free number first: it normally is fd already
            os.dup2(null, fd)
            os.close(null)
    if 1 in CLOSED_FDS or sys.stdout is None:
        sys.stdout = open(1, "w", closefd=False)
    if 2 in CLOSED_FDS or sys.stderr is None:
        sys.stderr = open(2, "w", closefd=False)


def require_stdout(what: str) -> None:
    """A command whose product is stdout (`kcc say -o -`, `kcc voices`) calls this before any
    work: a closed stdout is a named error (exit 2), as `cat file >&-` reports one."""
    if 1 in CLOSED_FDS:
        raise StdoutClosed(what)


def quiet_stdout() -> None:
    """After a broken pipe, point fd 1 at /dev/null: the interpreter's final flush of what is
    still buffered then succeeds instead of printing 'Exception ignored ... BrokenPipeError'."""
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.close(null)


def is_broken_pipe(exc: BaseException) -> bool:
    return isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE)
