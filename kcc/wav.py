"""Write 24 kHz mono WAV files atomically: a failed or interrupted write leaves no partial file."""
from __future__ import annotations

import os
import tempfile
import wave
from pathlib import Path

import numpy as np

SAMPLE_RATE = 24000


def pcm16(audio: np.ndarray) -> bytes:
    a = np.asarray(audio, dtype=np.float32).reshape(-1)
    if not np.isfinite(a).all():
        raise ValueError("audio has non-finite samples; refusing to write it")
    return (np.clip(a, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def write_wav(path: str | Path, audio: np.ndarray, sample_rate: int = SAMPLE_RATE) -> Path:
    path = Path(path)
    data = pcm16(audio)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh, wave.open(fh, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(sample_rate)
            w.writeframes(data)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
