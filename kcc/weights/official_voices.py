"""The 54 official Kokoro-82M v1.0 voice packs, fetched once from the npm package kokoro-js@1.2.1.

kokoro-js (Apache-2.0, Kokoro's JavaScript port) ships every official voice as a raw
little-endian float32 file `package/voices/<name>.bin` of shape (510, 1, 256). `npm pack` downloads
the package's tarball only (no dependencies, no install scripts run). The tarball's SHA-256 and
each voice's are pinned in kcc/data/official_voices.json; the voices are written one by one into
the cache beside the weights (cache_dir()/real/voices), each under a temporary name renamed into
place when whole, and each is checked against the table again when a process first reads it,
so a swapped cached file is refused, not spoken.

Without npm, offline, or with the fetch refused, official_voices() says so once per process on
stderr and returns None: the caller falls back to the real model's 5 Japanese voices (which are
bit-identical to the official ones of the same names; tests/test_voices_official.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from kcc.files import AtomicFile, exclusive_lock, file_sha256, sweep_locked, sweep_temporaries, temp_dir
from kcc.weights.real_model import FetchError, default_cache

LEGACY_TEMP_PREFIX = ".npm-pack."         # what kcc before the one temp facility named its npm work directory
_TABLE_PATH = Path(__file__).resolve().parents[1] / "data" / "official_voices.json"
# A failed fetch is not retried by every command for this long (an offline npm waits on its
# own timeouts); `kcc voices --fetch` retries at once.
RETRY_AFTER_S = 24 * 3600
NPM_TIMEOUT_S = 300


class VoiceFetchError(FetchError):
    """The official voices could not be fetched or failed a check; the message says which and why."""


@dataclass(frozen=True)
class Table:
    package: str                     # npm spec, 'kokoro-js@1.2.1'
    tarball_sha256: str
    tarball_max_bytes: int
    member_dir: str                  # 'package/voices/'
    voice_bytes: int
    voices: dict[str, str]           # name -> sha256 of its .bin


def load_table(path: Path = _TABLE_PATH) -> Table:
    doc = json.loads(Path(path).read_text())
    return Table(doc["package"], doc["tarball_sha256"], doc["tarball_max_bytes"], doc["member_dir"],
                 doc["voice_bytes"], dict(doc["voices"]))


TABLE = load_table()


def voices_dir(cache: Path | None = None) -> Path:
    return (Path(cache) if cache else default_cache()) / "voices"


def _complete(directory: Path, table: Table) -> dict[str, Path] | None:
    paths = {name: directory / f"{name}.bin" for name in table.voices}
    ok = all(p.is_file() and p.stat().st_size == table.voice_bytes for p in paths.values())
    return paths if ok else None


def fetch(cache: Path | None = None, npm: str | None = None, table: Table = TABLE, log=None) -> dict[str, Path]:
    """{name: path} of every official voice in the cache, fetching the package when any is absent.
    Raises VoiceFetchError (npm missing or failing, a digest or a member check failing)."""
    directory = voices_dir(cache)
    done = _complete(directory, table)
    if done is not None:
        return done
    directory.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(directory / ".fetch.lock"):
        done = _complete(directory, table)        # another process may have fetched them meanwhile
        if done is None:
            _fetch_into(directory, npm, table, log)
            done = _complete(directory, table)
    assert done is not None
    return done


def _fetch_into(directory: Path, npm: str | None, table: Table, log) -> None:
    npm = npm or shutil.which("npm")
    if not npm:
        raise VoiceFetchError(f"the npm client is not installed (Debian: apt-get install npm); it fetches {table.package}")
    if log is not None:
        print(f"kcc: fetching the {len(table.voices)} official Kokoro voices ({table.package}, about 27 MB) "
              f"with npm into {directory} -- once; later runs use the cache", file=log, flush=True)
    # kcc's own temporary directory (pid in its name, removed by an interrupt, swept when its
    # process is gone); the '.npm-pack.*' directories of older kcc are removed here, under the
    # fetch lock that every fetch holds, so none of them is in use.
    sweep_temporaries(directory)
    sweep_locked(directory, LEGACY_TEMP_PREFIX)
    with temp_dir(directory, "npm-pack") as tmp:
        try:
            res = subprocess.run([npm, "pack", table.package, "--silent", "--fetch-retries=1"], cwd=tmp,
                                 capture_output=True, text=True, timeout=NPM_TIMEOUT_S,
                                 env={**os.environ, "npm_config_update_notifier": "false"})
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise VoiceFetchError(f"npm pack {table.package}: {exc}") from None
        if res.returncode != 0:
            tail = (res.stderr or res.stdout or "").strip()[-600:]
            raise VoiceFetchError(f"npm pack {table.package} failed ({res.returncode}): {tail}")
        tarballs = [p for p in Path(tmp).iterdir() if p.name.endswith(".tgz") and p.is_file() and not p.is_symlink()]
        if len(tarballs) != 1:
            raise VoiceFetchError(f"npm pack {table.package} left {len(tarballs)} tarballs, expected one")
        extract_voices(tarballs[0], directory, table)


def extract_voices(tarball: Path, directory: Path, table: Table = TABLE) -> None:
    """Check the tarball's digest, then write each listed voice (a regular member of the pinned
    size and digest; nothing else is read out) into `directory` atomically."""
    size = tarball.stat().st_size
    if size > table.tarball_max_bytes:
        raise VoiceFetchError(f"{tarball.name}: {size} bytes, more than the {table.tarball_max_bytes} expected")
    got = file_sha256(tarball)
    if got != table.tarball_sha256:
        raise VoiceFetchError(f"{tarball.name}: sha256 {got} != pinned {table.tarball_sha256} ({table.package})")
    wanted = {f"{table.member_dir}{name}.bin": name for name in table.voices}
    found: set[str] = set()
    with tarfile.open(tarball, "r:gz") as tar:
        for member in tar:
            name = wanted.get(member.name)
            if name is None:
                continue                  # only the listed members are read; nothing is extracted by its own path
            try:
                tarfile.data_filter(member, str(directory))   # refuses links, devices, absolute and '..' paths
            except tarfile.FilterError as exc:
                raise VoiceFetchError(f"{tarball.name}: member {member.name}: {exc}") from None
            if not member.isreg() or member.size != table.voice_bytes:
                raise VoiceFetchError(f"{tarball.name}: member {member.name}: not a regular file of "
                                      f"{table.voice_bytes} bytes ({member.size} bytes, type {member.type!r})")
            if name in found:
                raise VoiceFetchError(f"{tarball.name}: member {member.name} appears twice")
            data = tar.extractfile(member).read(table.voice_bytes + 1)
            _write_checked(directory / f"{name}.bin", data, table.voices[name], table)
            found.add(name)
    missing = sorted(set(table.voices) - found)
    if missing:
        raise VoiceFetchError(f"{tarball.name}: {len(missing)} voices missing: {', '.join(missing[:5])}")


def _write_checked(path: Path, data: bytes, digest: str, table: Table) -> None:
    got = hashlib.sha256(data).hexdigest()
    if len(data) != table.voice_bytes or got != digest:
        raise VoiceFetchError(f"{path.name}: sha256 {got} ({len(data)} bytes) != pinned {digest} "
                              f"({table.voice_bytes} bytes)")
    with AtomicFile(path) as out:
        out.fh.write(data)
        out.commit()


# -- use: once per process -------------------------------------------------------------------

_verified: dict[tuple, bool] = {}
_state_lock = threading.Lock()
_warned = False


def verify(path: Path, table: Table = TABLE) -> None:
    """Refuse a cached official voice whose bytes are not the pinned ones (hashed once per process
    per file: 522 KB, ~1 ms)."""
    path = Path(path)
    name = path.name.removesuffix(".bin")
    st = path.stat()
    key = (str(path), st.st_ino, st.st_size, st.st_mtime_ns)
    with _state_lock:
        if _verified.get(key):
            return
    expected = table.voices.get(name)
    got = file_sha256(path)
    if expected is None or got != expected:
        raise VoiceFetchError(f"{path}: sha256 {got} is not the pinned digest of official voice {name!r} "
                              f"({table.package}); delete the file and it is fetched again")
    with _state_lock:
        _verified[key] = True


def official_voices(cache: Path | None = None, force: bool = False, log=sys.stderr) -> dict[str, Path] | None:
    """The official voices, fetched if need be; None (said once per process on `log`) when they
    cannot be had. A failure is remembered in the cache for RETRY_AFTER_S unless `force`."""
    global _warned
    directory = voices_dir(cache)
    done = _complete(directory, TABLE)
    if done is not None:
        return done
    marker = directory / ".unavailable"
    try:
        recent = not force and time.time() - marker.stat().st_mtime < RETRY_AFTER_S
    except OSError:
        recent = False
    try:
        if recent:
            raise VoiceFetchError(marker.read_text(errors="replace").strip()[:600] + " (tried less than a day ago; "
                                  "`kcc voices --fetch` tries again)")
        done = fetch(cache, log=log)
        marker.unlink(missing_ok=True)
        return done
    except (VoiceFetchError, OSError) as exc:
        if not recent:
            try:
                directory.mkdir(parents=True, exist_ok=True)
                marker.write_text(str(exc))
            except OSError:
                pass
        with _state_lock:
            say, _warned = not _warned, True
        if say and log is not None:
            print(f"kcc: warning: the official Kokoro voices are not available ({exc}); using the real model's "
                  f"5 Japanese voices instead", file=log, flush=True)
        if force:
            raise
        return None
