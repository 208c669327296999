"""A value kcc would otherwise recompute on every load (a compiler's `--version`, the digest of
the compiler's sources), remembered in the cache under a stamp of what it was computed from.

The memo is recomputed whenever the stamp differs (files' inode, size, mtime and ctime: an edit,
an upgrade or a copy changes at least the ctime, which no unprivileged process can set back) and
is signed with the user's cache key (kcc.cache_trust), so a cache writer cannot plant one. These
values only choose which artifact directory a load looks in; what it then maps is still checked
against its signed manifest and digests (kcc.compiler.artifact.load).
"""
from __future__ import annotations

import hashlib
import json
import os
from typing import Callable

from kcc.cache_trust import CacheError, sign, verify
from kcc.files import cache_subdir, write_atomic


def file_stamp(path: str) -> list:
    """What changes when a file's bytes may have: device, inode, size, mtime, ctime."""
    st = os.stat(path)
    return [str(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]


def remembered(kind: str, name: str, stamp, compute: Callable[[], str]) -> str:
    """compute(), or what it returned before for this `kind` / `name` under the same `stamp`
    (JSON-able). A cache that cannot hold the memo only costs the recomputation."""
    text = json.dumps(stamp, sort_keys=True)
    try:
        memo = cache_subdir(kind) / (hashlib.sha256(name.encode()).hexdigest()[:32] + ".json")
    except (OSError, CacheError):
        return compute()
    try:
        known = json.loads(memo.read_text(encoding="utf-8"))
        if (isinstance(known, dict) and known.get("stamp") == text and isinstance(known.get("value"), str)
                and verify(f"{text}\0{known['value']}".encode(), kind, str(known.get("sig")))):
            return known["value"]
    except (OSError, ValueError, CacheError):
        pass
    value = compute()
    try:
        record = {"stamp": text, "value": value, "sig": sign(f"{text}\0{value}".encode(), kind)}
        write_atomic(memo, json.dumps(record).encode(), durable=False)
    except (OSError, CacheError):
        pass
    return value
