"""How many compiled artifacts (kcc.compiler.artifact) the cache keeps per model, and which go.

Every distinct `--max-frames`, build option set, stage list and kcc version compiles an artifact
of its own (the real model: ~555 MB each). After each new one is saved, the model's artifacts
beyond MAX_CACHED_ARTIFACTS_PER_MODEL are removed, least recently used first.

- Recency: each load stamps the artifact directory's mtime (one futimens on a descriptor the
  loader holds anyway); atime is not used (noatime / relatime mounts).
- In use: a process that maps an artifact holds a shared flock on its directory for as long as
  the Synthesizer over it lives (ArtifactUse). Eviction takes an exclusive flock without waiting
  and skips a directory it cannot lock, then evicts the next oldest instead, so the bound holds
  unless more artifacts than it are in use at once.
- Atomic: a victim is renamed to a kcc temporary name while locked, then deleted
  (kcc.files.remove_dir_atomically); a loader finds the whole artifact or none, and one that finds
  none compiles it again. A loader that opened the directory just before the rename sees, once it
  has its shared lock, that the name no longer leads to what it locked, and compiles too.
- Only kcc's own: a real directory (not a link) named as artifact_dir names this model's, owned
  by the user, whose manifest this user's kcc signed for this model id, or, from a kcc older than
  signed manifests (artifact version 1, which no kcc now loads), whose manifest names this model
  id: the cache directory is the user's alone (kcc.cache_trust), so what is in it the user's kcc
  wrote. Nothing else in the cache is read past its name.
"""
from __future__ import annotations

import fcntl
import json
import os
import stat
import time
import weakref
from pathlib import Path

from kcc.cache_trust import CacheError, check_private_dir
from kcc.compiler.artifact import ArtifactError, is_artifact_name, signed_manifest
from kcc.files import remove_dir_atomically

# Per model id, not per model and options: the growth comes from variety in any key component
# (max_frames, precision, -march, stage lists, and every kcc upgrade, which changes every key),
# so bounding each option set on its own would still let a model's total grow without limit.
# Three: a default and two experiments stay warm; each further one costs a recompile (minutes).
MAX_CACHED_ARTIFACTS_PER_MODEL = 3
# Manifests are signed from artifact version 2 on; version 1 artifacts (kcc 0.2) are never loaded
# again but are the user's own, ~555 MB each for the real model, so they count and go first.
FIRST_SIGNED_VERSION = 2
MAX_UNSIGNED_MANIFEST_BYTES = 64 << 20      # the real model's manifest (graphs and plans): ~2 MB


def _open_dir(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:                      # absent, a link, not a directory: not an artifact to use
        return None


def _still_there(path: Path, fd: int) -> bool:
    """Whether `path` still names the directory open at `fd` (not renamed away, not replaced)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return False
    held = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)


class ArtifactUse:
    """A shared flock on an artifact directory: eviction leaves it alone while this is held."""

    def __init__(self, path: Path, fd: int):
        self._path, self._fd = path, fd

    @classmethod
    def take(cls, path: Path) -> "ArtifactUse | None":
        """Hold the artifact at `path`, or None where there is none (or it was just evicted); a
        CacheError where a link or a file stands in its place (as artifact.load would say)."""
        fd = _open_dir(path)
        if fd is None:
            if os.path.lexists(path):
                check_private_dir(path)
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)       # waits out an evictor mid-rename
            if _still_there(path, fd):
                return cls(path, fd)
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
        return None

    def record_use(self) -> None:
        t = time.time_ns()                       # explicit: the file system's own clock is coarse
        try:
            os.utime(self._fd, ns=(t, t))
        except OSError:                          # a read-only cache: recency is only a hint
            pass

    def keep_while(self, owner: object) -> None:
        """Hold until `owner` (the Synthesizer mapping this artifact) is collected."""
        fd, self._fd = self._fd, -1
        weakref.finalize(owner, os.close, fd)

    def vanished(self) -> bool:
        """Whether the artifact was removed (or replaced) since it was taken: by a kcc that removes
        without the lock (a damaged artifact's remover, an older kcc), or by hand."""
        return self._fd >= 0 and not _still_there(self._path, self._fd)

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _last_used_ns(path: Path) -> int | None:
    try:
        return os.stat(path, follow_symlinks=False).st_mtime_ns
    except OSError:
        return None


def _unsigned_manifest(path: Path) -> dict:
    """The manifest of an artifact from before signed manifests (so: never loaded again), else
    ArtifactError: an unsigned manifest of a later version is someone's edit, not kcc's."""
    with open(path / "manifest.json", "rb") as fh:
        text = fh.read(MAX_UNSIGNED_MANIFEST_BYTES + 1)
    manifest = json.loads(text) if len(text) <= MAX_UNSIGNED_MANIFEST_BYTES else None
    version = manifest.get("artifact_version") if isinstance(manifest, dict) else None
    if not isinstance(version, int) or isinstance(version, bool) or version >= FIRST_SIGNED_VERSION:
        raise ArtifactError(f"{path}/manifest.json: unsigned, and not from a kcc before signed manifests")
    return manifest


def _models_artifacts(models: Path, model_id: str) -> list[Path]:
    """`model_id`'s artifact directories in `models` (kcc's own only, see the module docstring)."""
    found = []
    try:
        entries = list(os.scandir(models))
    except OSError:
        return found
    for e in entries:
        if not is_artifact_name(e.name, model_id) or not e.is_dir(follow_symlinks=False):
            continue
        path = Path(e.path)
        try:
            check_private_dir(path)
            # regular files only: a FIFO or a link to /dev/zero under the name would stall the read
            if not stat.S_ISREG(os.lstat(path / "manifest.json").st_mode):
                continue
            if os.path.lexists(path / "manifest.sig"):
                if not stat.S_ISREG(os.lstat(path / "manifest.sig").st_mode):
                    continue
                manifest = signed_manifest(path)
            else:
                manifest = _unsigned_manifest(path)
            if manifest.get("model_id") != model_id:
                continue
        except (CacheError, ArtifactError, OSError, ValueError):
            continue
        found.append(path)
    return found


def _evict(path: Path) -> int | None:
    """Remove the artifact at `path` unless a process holds it; the disk bytes freed, or None."""
    fd = _open_dir(path)
    if fd is None:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:                          # held by a live Synthesizer somewhere
            return None
        if not _still_there(path, fd):           # another evictor or a rebuild got there first
            return None
        return remove_dir_atomically(path)
    except OSError:
        return None
    finally:
        os.close(fd)


def evict_least_recently_used(model_id: str, keep: Path, log, bound: int | None = None) -> list[Path]:
    """Remove `model_id`'s least recently used artifacts until at most `bound` (default
    MAX_CACHED_ARTIFACTS_PER_MODEL) remain, never `keep` (the one just saved) nor one in use.
    Says one line per artifact removed on `log` (None: silent). Returns what it removed."""
    bound = MAX_CACHED_ARTIFACTS_PER_MODEL if bound is None else bound
    keep = Path(keep)
    dated = [(t, p) for p in _models_artifacts(keep.parent, model_id)
             if p != keep and (t := _last_used_ns(p)) is not None]
    excess = len(dated) + 1 - bound
    removed = []
    for _, path in sorted(dated):
        if excess <= 0:
            break
        freed = _evict(path)
        if freed is None:
            continue
        excess -= 1
        removed.append(path)
        if log is not None:
            print(f"kcc: removed the least recently used compiled model {path.name} ({freed / 1e6:.1f} MB freed; "
                  f"the cache keeps {bound} per model)", file=log, flush=True)
    return removed
