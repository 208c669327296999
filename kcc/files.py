"""Files kcc reads and writes, shared by every layer: SHA-256 of a file, kcc's cache directory,
exclusive_lock (one process at a time through a cache entry's slow path), and the one
temporary-file facility every kcc writer uses (say, synth, batch, book, the voices fetch, the
real model's fetch, compile): AtomicFile / write_atomic (a temporary file beside the target,
renamed onto it only when complete, so a failed or interrupted write leaves no partial file; a
new file gets the mode the user's umask allows, a file it replaces keeps its own mode) and
temp_dir. Their names carry the owner's pid (temp_prefix); they are the only thing kcc deletes:
sweep_temporaries removes only such names, owned by this user, whose process is gone."""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import secrets
import shutil
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable

from kcc.cache_trust import ownership_problem, private_dir

# kcc's own temporaries (files and directories) are named '.kcc-tmp.<pid>.<target>.<random>.part',
# so a later run can tell them from the user's files and from a live process's: only names of
# this pattern are ever swept, and only when their process is gone or they are older than
# TEMP_MAX_AGE_S (a pid reused by an unrelated process, or a writer in another pid namespace).
TEMP_TAG = ".kcc-tmp."
TEMP_SUFFIX = ".part"
TEMP_MAX_AGE_S = 24 * 3600
_TEMP_RE = re.compile(r"\.kcc-tmp\.(\d+)\..*\.part\Z", re.S)


def file_sha256(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class InputTooLarge(ValueError):
    """An input file past the size its reader allows (counted as read: /dev/zero, a FIFO or a
    /proc file reports size 0)."""


class NotRegularFile(ValueError):
    """A path that names no regular file (a device, a FIFO, a directory) where only a file is meant."""


def _read_regular(path: str | Path, n: int) -> bytes:
    # O_NONBLOCK: opening a FIFO with no writer returns at once (instead of blocking) so that
    # fstat can refuse it; one open, so what was checked is what is read.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else \
                "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket" if stat.S_ISSOCK(mode) else \
                "not a regular file"
            raise NotRegularFile(f"{path} is {kind}, not a regular file")
        return fh.read(n)


def read_bounded(path: str | Path, limit: int, what: str = "file", regular: bool = False) -> bytes:
    """The bytes of `path` ('-': standard input), at most `limit` of them: reads limit + 1 and
    raises InputTooLarge if they came, so a source that never ends stops here. regular: only a
    regular file (NotRegularFile otherwise), opened once. OSError as the system gives it."""
    if str(path) == "-" and not regular:
        data = sys.stdin.buffer.read(limit + 1)
    elif regular:
        data = _read_regular(path, limit + 1)
    else:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    if len(data) > limit:
        size = f"{limit >> 20} MiB" if limit % (1 << 20) == 0 else f"{limit} bytes"
        raise InputTooLarge(f"{what} {path} is over {size}; split it")
    return data


def read_user_file(path: str | Path, limit: int, what: str, error: type[Exception], *, regular: bool = False,
                   too_large: type[Exception] | None = None) -> bytes:
    """read_bounded for a file a user named (a text, a manifest, a lexicon, a book), its failures
    raised as the reader's own named `error` (`too_large` for the size, where given):
    '{what} PATH is over N; split it', '{what} PATH is a FIFO, not a regular file' or
    '{what} PATH: the system's reason'."""
    try:
        return read_bounded(path, limit, what, regular)
    except InputTooLarge as exc:
        raise (too_large or error)(str(exc)) from None
    except NotRegularFile as exc:
        raise error(f"{what} {exc}") from None
    except OSError as exc:
        raise error(f"{what} {path}: {exc.strerror or exc}") from None


def cache_dir() -> Path:
    """kcc's cache root (KCC_CACHE_DIR, default ~/.cache/kcc), made 0700 where missing; a
    CacheError (kcc.cache_trust) unless only the current user can write it."""
    return private_dir(cache_root())


def cache_root() -> Path:
    return Path(os.environ.get("KCC_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "kcc"))


def cache_subdir(*names: str) -> Path:
    """A directory under the cache root, each component made 0700 and checked like the root."""
    root = cache_dir()
    return private_dir(root.joinpath(*names), root)


def temp_prefix(target_name: str) -> str:
    """The mkstemp / mkdtemp prefix for a temporary that becomes `target_name` (suffix TEMP_SUFFIX)."""
    return f"{TEMP_TAG}{os.getpid()}.{target_name}."


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:                 # another user's process: alive
        return True
    return True


def sweep_temporaries(directory: str | Path, max_age_s: float = TEMP_MAX_AGE_S) -> list[Path]:
    """Remove kcc's temporaries in `directory` (not below it) whose process is gone or that are
    older than max_age_s; nothing else (a user's '.notes.part' stays). Returns what it removed."""
    removed = []
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return removed
    now = time.time()
    for e in entries:
        m = _TEMP_RE.match(e.name)
        if not m:
            continue
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid != os.geteuid():
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or (_pid_alive(pid) and now - st.st_mtime < max_age_s):
            continue
        if _remove_entry(e.path, st):
            removed.append(Path(e.path))
    return removed


def _remove_entry(path: str, st: os.stat_result) -> bool:
    """Remove one swept entry (a directory tree or a file, as lstat saw it); False if it could not be."""
    try:
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    except OSError:
        return False
    return True


def sweep_locked(directory: str | Path, prefix: str) -> list[Path]:
    """Remove the entries of `directory` whose names start with `prefix` and that the current
    user owns: temporaries named by an older kcc without a pid. Call it only while holding the
    lock that every maker of such names held while using them (so none is in use), and only in
    a directory kcc owns (the cache). Returns what it removed."""
    removed = []
    try:
        entries = [e for e in os.scandir(directory) if e.name.startswith(prefix)]
    except OSError:
        return removed
    for e in entries:
        try:
            st = e.stat(follow_symlinks=False)
        except OSError:
            continue
        if st.st_uid == os.geteuid() and _remove_entry(e.path, st):
            removed.append(Path(e.path))
    return removed


@contextlib.contextmanager
def temp_dir(parent: Path, target_name: str):
    """A fresh kcc temporary directory in `parent` (0700) for the block, removed after it unless
    the block renamed it away; listed in AtomicFile.live meanwhile, so an interrupted process
    removes it too (and a killed one leaves a name the next sweep recognises)."""
    tmp = AtomicFile.make_live(lambda: Path(tempfile.mkdtemp(prefix=temp_prefix(target_name), suffix=TEMP_SUFFIX,
                                                             dir=parent)))
    try:
        yield tmp
    finally:
        AtomicFile.live.discard(tmp)
        shutil.rmtree(tmp, ignore_errors=True)


class UnsafeWorkDir(ValueError):
    """A work directory kcc would trust between runs that someone else can write or has made."""


def private_work_dir(path: str | Path, error: type[Exception] = UnsafeWorkDir) -> Path:
    """A directory a resumable job keeps its work in between runs (items it trusts on a rerun),
    made 0700 where missing; `error` when it is a link, no directory, another user's, or writable
    by group or others: in a shared directory (mode 1777) another user could have made it first
    and would put in it what the next run trusts."""
    path = Path(path)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise error(f"work directory {path}: {exc.strerror or exc}") from None
    st = os.lstat(path)
    why = ("is a symbolic link" if stat.S_ISLNK(st.st_mode) else "is not a directory" if not stat.S_ISDIR(st.st_mode)
           else ownership_problem(st))
    if why:
        raise error(f"work directory {path} {why}; kcc would trust what others put in it. Remove it "
                    "(or write the output to a directory only you can write)")
    return path


def disk_bytes(path: str | Path) -> int:
    """The disk space the files under directory `path` take (links are counted, not followed)."""
    total = 0
    for top, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(top, name)).st_blocks * 512
            except OSError:
                pass
    return total


def remove_dir_atomically(path: str | Path) -> int:
    """Remove directory `path` by renaming it to a kcc temporary beside it first, then deleting
    that: a reader finds the whole directory or no directory, never a half-deleted one, and a
    removal cut short leaves a name sweep_temporaries recognises. Returns the disk bytes freed
    (0: nothing was there); other OSErrors of the rename as the system gives them."""
    path = Path(path)
    tmp = path.parent / f"{temp_prefix(path.name)}{secrets.token_hex(4)}{TEMP_SUFFIX}"

    def rename() -> Path:
        os.rename(path, tmp)
        return tmp
    try:
        AtomicFile.make_live(rename)
    except FileNotFoundError:
        return 0
    try:
        freed = disk_bytes(tmp)
        shutil.rmtree(tmp, ignore_errors=True)
    finally:
        AtomicFile.live.discard(tmp)
    return freed


@contextlib.contextmanager
def exclusive_lock(path: Path):
    """Hold an exclusive flock on `path` (created if absent) for the block: a second process
    waits here, then finds what the first made."""
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process umask (reading it means setting it; this restores it at once). Under a lock:
    two threads reading at once (batch workers) would otherwise each see the other's 022."""
    with _UMASK_LOCK:
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


class ProcessEnding(RuntimeError):
    """kcc is ending on a signal: no new temporary file is made (AtomicFile.make_live), no new worker
    pool (kcc.speech.batch.local_pool)."""


_LIVE_LOCK = threading.Lock()


def _remove(tmp: Path) -> None:
    try:
        if os.path.isdir(tmp) and not os.path.islink(tmp):
            shutil.rmtree(tmp)
        else:
            os.unlink(tmp)
    except OSError:
        pass


def named_for(exc: OSError, target: Path) -> OSError:
    """exc as the system gave it, but naming the file the user asked for instead of kcc's
    temporary beside it (whose name means nothing to them): '[Errno 28] No space left on device:
    'out.wav''."""
    return type(exc)(exc.errno, exc.strerror or str(exc), str(target))


class AtomicFile:
    """A temporary file beside `path`, renamed onto it by commit(); abort() (or an exception
    inside `with`) removes it. Commit is two steps (close, then replace) so that two outputs can
    be completed before either is renamed. Unfinished temporaries are listed in `live`, so a
    process ending at once on a signal can remove them (discard_live)."""

    live: set[Path] = set()
    swept: set[Path] = set()
    ending = False

    def __init__(self, path: str | Path):
        self.path = Path(path)
        if self.path.parent not in AtomicFile.swept:      # once per directory and process
            AtomicFile.swept.add(self.path.parent)
            sweep_temporaries(self.path.parent)
        fds: list[int] = []

        def make() -> Path:
            fd, tmp = tempfile.mkstemp(prefix=temp_prefix(self.path.name), suffix=TEMP_SUFFIX, dir=self.path.parent)
            fds.append(fd)
            return Path(tmp)
        try:
            self.tmp = AtomicFile.make_live(make)
        except OSError as exc:
            raise named_for(exc, self.path) from None
        self.fh = os.fdopen(fds[0], "wb")

    @staticmethod
    def make_live(make: Callable[[], Path]) -> Path:
        """make() (the mkstemp, mkdtemp or rename that brings a temporary into being) and its path
        listed in `live`, under one lock with discard_live: a temporary that exists is always
        listed, so the clean-up of an interrupted process finds it (made first and listed after,
        one could appear between the two while the main thread ended the process, and stay).
        Once the process is ending (discard_live(ending=True)) none is made: ProcessEnding, for
        the command's thread, which runs on while the main thread ends the process."""
        with _LIVE_LOCK:
            if AtomicFile.ending:
                raise ProcessEnding("kcc is ending; no new temporary is made")
            tmp = make()
            AtomicFile.live.add(tmp)
        return tmp

    @staticmethod
    def discard_live(ending: bool = False) -> None:
        """Remove every unfinished temporary; ending: and refuse new ones from now on."""
        with _LIVE_LOCK:
            AtomicFile.ending = AtomicFile.ending or ending
            doomed = list(AtomicFile.live)
            AtomicFile.live.clear()
        for tmp in doomed:
            _remove(tmp)

    def close(self) -> None:
        if not self.fh.closed:
            try:
                self.fh.flush()
            except OSError as exc:                 # a full disk: named by the file the user asked for
                raise named_for(exc, self.path) from None
            os.fchmod(self.fh.fileno(), target_mode(self.path))
            self.fh.close()

    def commit(self) -> Path:
        self.close()
        try:
            os.replace(self.tmp, self.path)
        except OSError as exc:
            raise named_for(exc, self.path) from None
        AtomicFile.live.discard(self.tmp)
        self.tmp = None
        return self.path

    def abort(self) -> None:
        if not self.fh.closed:
            try:
                self.fh.close()
            except OSError:        # a full disk refuses the buffered bytes; the file is removed below all the same
                pass
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


def write_atomic(path: str | Path, data: bytes, durable: bool = True) -> Path:
    """A complete file at `path` or none (an AtomicFile); durable: fsynced before the rename, so
    a crash cannot leave the new name with missing bytes (batch items, which a rerun trusts)."""
    with AtomicFile(path) as out:
        try:
            out.fh.write(data)
            out.fh.flush()
            if durable:
                os.fsync(out.fh.fileno())
        except OSError as exc:
            raise named_for(exc, out.path) from None
        return out.commit()
