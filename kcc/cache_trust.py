"""Whether kcc may trust what its cache holds: a cache directory only its user can write, and
records (artifact manifests, build-cache sidecars) signed with a key that lives outside it.

The cache holds shared libraries that every kcc process dlopens; dlopen runs a library's
constructors, so whoever can plant one runs code as the user. Two defences, for two attackers:

- Someone who can write the cache directory now (another user, a group, a world-writable
  KCC_CACHE_DIR): the cache root and every directory kcc makes under it must be owned by the
  current user with no group / other write bit, or kcc refuses it (CacheError, naming the path
  and the fix). kcc creates them 0700. With that, nobody else can add, rename or replace an
  entry while kcc checks and loads it.
- Someone who could write it before, or whose files reach it (a cache restored from a backup or
  a CI artifact, copied from another machine, a shared mount, a sandboxed process given the
  cache but not the home directory): an integrity record beside what it checks proves nothing
  (they re-hash it too). So each record is an HMAC-SHA256 under a per-user key in
  $XDG_CONFIG_HOME/kcc/ (default ~/.config/kcc/), created 0600 in a 0700 directory, never inside
  the cache. A record that does not verify (foreign, unsigned, edited) means: rebuild, not run.
  The attacker this stops can write the cache but cannot read the user's config directory.

Not in scope: code already running as the user (it can read the key, or edit kcc itself).
"""
from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

KEY_NAME = "cache-signing.key"
KEY_BYTES = 32


class CacheError(Exception):
    """A cache directory (or kcc's signing key) that another user could write or has made: kcc
    refuses to load code or weights from it. The message names the path and the fix."""


def ownership_problem(st: os.stat_result) -> str | None:
    if st.st_uid != os.geteuid():
        return f"is owned by uid {st.st_uid}, not by you (uid {os.geteuid()})"
    if stat.S_IMODE(st.st_mode) & 0o022:
        return f"can be written by others (mode {stat.S_IMODE(st.st_mode):04o})"
    return None


def check_private_dir(path: Path) -> None:
    """CacheError unless `path` is a directory (not a link) the current user owns and only they
    can write."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise CacheError(f"cache directory {path}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(st.st_mode):
        raise CacheError(f"cache directory {path} is a symbolic link; kcc uses only a real directory "
                         "(point KCC_CACHE_DIR at the link's target, or remove the link)")
    if not stat.S_ISDIR(st.st_mode):
        raise CacheError(f"cache directory {path} is not a directory")
    why = ownership_problem(st)
    if why:
        fix = "chown $USER " if st.st_uid != os.geteuid() else ""
        raise CacheError(f"cache directory {path} {why}; kcc would load code from it. Use a directory only "
                         f"you can write: `{fix}chmod 700 {path}`, or set KCC_CACHE_DIR to another one")


def private_dir(path: Path, root: Path | None = None) -> Path:
    """`path` as a checked private directory, made 0700 where missing. Every component from
    `root` (the cache root, checked itself) down to `path` is checked; the parents above the
    root are the user's business (a root under /tmp or a 0755 home is fine)."""
    path = Path(path)
    root = Path(root) if root is not None else path
    parts = [root, *(p for p in reversed(path.parents) if root in p.parents), path] if path != root else [root]
    if not os.path.lexists(root):
        root.parent.mkdir(parents=True, exist_ok=True)
    for p in dict.fromkeys(parts):
        try:
            os.mkdir(p, 0o700)
        except FileExistsError:
            pass
        check_private_dir(p)
    return path


def config_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "kcc"


@functools.lru_cache(maxsize=4)
def _key(where: Path) -> bytes:
    path = where / KEY_NAME
    private_dir(where)
    if not os.path.lexists(path):
        # written whole under a temporary name, then linked into place: a second process racing
        # this one finds no key or a whole one, never a short one; the first link wins
        tmp = where / f".{KEY_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(secrets.token_bytes(KEY_BYTES))
            try:
                os.link(tmp, path)
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError as exc:
        raise CacheError(f"kcc's cache signing key {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        why = ownership_problem(st) or ("can be read by others" if stat.S_IMODE(st.st_mode) & 0o077 else None)
        if why:
            raise CacheError(f"kcc's cache signing key {path} {why}; `chmod 600 {path}` (or remove it: "
                             "kcc makes a new one and rebuilds its cache)")
        key = fh.read(KEY_BYTES + 1)
    if len(key) != KEY_BYTES:
        raise CacheError(f"kcc's cache signing key {path} is not {KEY_BYTES} bytes; remove it (kcc makes a new "
                         "one and rebuilds its cache)")
    return key


def sign(data: bytes, purpose: str) -> str:
    """HMAC-SHA256 of `data` under the user's key, bound to `purpose` (a manifest's signature
    cannot stand in for a sidecar's)."""
    return hmac.new(_key(config_dir()), purpose.encode() + b"\0" + data, hashlib.sha256).hexdigest()


def verify(data: bytes, purpose: str, signature: str) -> bool:
    return hmac.compare_digest(sign(data, purpose), signature.strip())
