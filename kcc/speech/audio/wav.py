"""Write 24 kHz mono WAV files atomically: a failed or interrupted write leaves no partial file.

WavWriter streams: chunks are appended to a temporary file beside the target (same directory,
so the final rename is atomic), the header's sizes are patched when it is finished, and the
rename happens only then. A new file gets the mode the user's umask allows (mkstemp would
leave it 0600); a file it replaces keeps its own mode.
"""
from __future__ import annotations

import wave
from pathlib import Path

import numpy as np

from kcc.files import AtomicFile
from kcc.model.kokoro import SAMPLE_RATE      # the WAV rate is the model's (re-exported)

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
