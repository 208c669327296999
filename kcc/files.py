"""Files kcc reads and writes, shared by every layer: SHA-256 of a file, kcc's cache directory,
exclusive_lock (one process at a time through a cache entry's slow path), and AtomicFile (a temporary file beside the target, renamed onto it only when complete, so a
failed or interrupted write leaves no partial file; a new file gets the mode the user's umask
allows, a file it replaces keeps its own mode)."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import stat
import tempfile
from pathlib import Path


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_dir() -> Path:
    root = os.environ.get("KCC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kcc")
    p = Path(root)
    p.mkdir(parents=True, exist_ok=True)
    return p



@contextlib.contextmanager
def exclusive_lock(path: Path):
    """Hold an exclusive flock on `path` (created if absent) for the block: a second process
    waits here, then finds what the first made."""
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def current_umask() -> int:
    """The process umask (reading it means setting it; this restores it at once)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def target_mode(path: Path) -> int:
    try:
        st = os.stat(path)
        if stat.S_ISREG(st.st_mode):
            return stat.S_IMODE(st.st_mode)
    except OSError:
        pass
    return 0o666 & ~current_umask()


class AtomicFile:
    """A temporary file beside `path`, renamed onto it by commit(); abort() (or an exception
    inside `with`) removes it. Commit is two steps (close, then replace) so that two outputs can
    be completed before either is renamed. Unfinished temporaries are listed in `live`, so a
    process ending at once on a signal can remove them (discard_live)."""

    live: set[Path] = set()

    def __init__(self, path: str | Path):
        self.path = Path(path)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", suffix=".part", dir=self.path.parent)
        self.tmp = Path(tmp)
        AtomicFile.live.add(self.tmp)
        self.fh = os.fdopen(fd, "wb")

    @staticmethod
    def discard_live() -> None:
        for tmp in list(AtomicFile.live):
            try:
                os.unlink(tmp)
            except OSError:
                pass
            AtomicFile.live.discard(tmp)

    def close(self) -> None:
        if not self.fh.closed:
            self.fh.flush()
            os.fchmod(self.fh.fileno(), target_mode(self.path))
            self.fh.close()

    def commit(self) -> Path:
        self.close()
        os.replace(self.tmp, self.path)
        AtomicFile.live.discard(self.tmp)
        self.tmp = None
        return self.path

    def abort(self) -> None:
        if not self.fh.closed:
            self.fh.close()
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass
            AtomicFile.live.discard(self.tmp)
            self.tmp = None

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None or self.tmp is not None:
            self.abort()
