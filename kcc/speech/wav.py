"""Write 24 kHz mono WAV files atomically: a failed or interrupted write leaves no partial file.

WavWriter streams: chunks are appended to a temporary file beside the target (same directory,
so the final rename is atomic), the header's sizes are patched when it is finished, and the
rename happens only then. A new file gets the mode the user's umask allows (mkstemp would
leave it 0600); a file it replaces keeps its own mode.
"""
from __future__ import annotations

import os
import stat
import tempfile
import wave
from pathlib import Path

import numpy as np

SAMPLE_RATE = 24000
# RIFF sizes are 32-bit: 4 GiB less the 36 header bytes counted in the RIFF size. At 24 kHz
# 16-bit mono that is 24.8 hours of audio in one file.
MAX_DATA_BYTES = 0xFFFFFFFF - 36


class WavError(ValueError):
    """The audio cannot be written as asked; the message says why."""


def pcm16(audio: np.ndarray) -> bytes:
    a = np.asarray(audio, dtype=np.float32).reshape(-1)
    if not np.isfinite(a).all():
        raise WavError("audio has non-finite samples; refusing to write it")
    return (np.clip(a, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


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


class WavWriter(AtomicFile):
    """Append float audio chunk by chunk; finish() patches the header, commit() renames."""

    def __init__(self, path: str | Path, sample_rate: int = SAMPLE_RATE):
        super().__init__(path)
        self.samples = 0
        self.wav = wave.open(self.fh, "wb")
        self.wav.setnchannels(1)
        self.wav.setsampwidth(2)
        self.wav.setframerate(sample_rate)

    def write(self, audio: np.ndarray) -> None:
        data = pcm16(audio)
        if 2 * self.samples + len(data) > MAX_DATA_BYTES:
            raise WavError(f"{self.path}: over {MAX_DATA_BYTES} bytes of samples "
                           f"({MAX_DATA_BYTES / 2 / SAMPLE_RATE / 3600:.1f} h), the most a WAV file holds")
        self.wav.writeframesraw(data)
        self.fh.flush()                 # on disk (page cache), not in this process's memory
        self.samples += len(data) // 2

    def close(self) -> None:
        if not self.fh.closed:
            self.wav.close()            # patches the RIFF and data sizes (the file is seekable)
        super().close()

    def abort(self) -> None:
        try:
            self.wav.close()
        except Exception:               # a half-written header is deleted with the file
            pass
        super().abort()


def write_wav(path: str | Path, audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with WavWriter(path, sample_rate) as w:
        w.write(audio)
        return w.commit()
