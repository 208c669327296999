"""Output paths checked before any work: a bad -o fails in milliseconds, not after synthesis.

Outputs are written to a temporary file beside the target and renamed onto it (kcc.speech.audio.wav), which
would replace whatever the name points at. So a name must be a regular file or nothing yet,
in an existing, writable directory: a directory, a device (-o /dev/null as root would become a
regular file), a FIFO or a socket is refused, and so is a symbolic link (the rename would
replace the link, not write through it). Two outputs of one command must be different files.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path


class OutputError(ValueError):
    """An output path cannot be written as asked; the message names the path and why."""


def check_output(path: str | Path, what: str = "output") -> Path:
    p = Path(path)
    if not str(path):
        raise OutputError(f"{what}: the path is empty")
    try:
        st = os.lstat(p)
    except (FileNotFoundError, NotADirectoryError):      # the parent check below names which
        st = None
    except OSError as exc:
        raise OutputError(f"{what} {p}: cannot be checked: {exc.strerror}") from None
    if st is not None:
        kind = _kind(st.st_mode)
        if kind:
            raise OutputError(f"{what} {p} is {kind}; name a regular file (it would be replaced by one)")
        if not os.access(p, os.W_OK):
            raise OutputError(f"{what} {p} exists and is not writable")
    parent = p.parent
    if not parent.is_dir():
        raise OutputError(f"{what} {p}: the directory {parent} does not exist" if not parent.exists()
                          else f"{what} {p}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"{what} {p}: the directory {parent} is not writable")
    return p


def check_output_dir(path: str | Path, what: str = "output directory") -> Path:
    """A directory files are written into: an existing writable one (a link to one is fine:
    files go inside it), or a new name in an existing writable directory."""
    p = Path(path)
    if not str(path):
        raise OutputError(f"{what}: the path is empty")
    if p.exists():
        if not p.is_dir():
            raise OutputError(f"{what} {p} exists and is not a directory")
        if not os.access(p, os.W_OK | os.X_OK):
            raise OutputError(f"{what} {p} is not writable")
        return p
    if os.path.lexists(p):
        raise OutputError(f"{what} {p} is a dangling symbolic link")
    return check_output(p, what)


def _kind(mode: int) -> str | None:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if not stat.S_ISREG(mode):
        return "not a regular file"
    return None


def check_outputs(**named: str | Path | None) -> dict[str, Path]:
    """Each named output checked (None: not asked for), and no two of them the same file."""
    paths = {what: check_output(p, what) for what, p in named.items() if p is not None}
    seen: dict[tuple, str] = {}
    for what, p in paths.items():
        key = (os.path.realpath(p.parent), p.name)
        if key in seen:
            raise OutputError(f"{what} and {seen[key]} are the same file ({p}); the second would overwrite the first")
        seen[key] = what
    return paths
