"""Cut the near-silence at both ends of a clip, as kokoro-onnx's create(trim=True) does.

A frame (2048 samples, hop 512) is silent when its RMS lies more than `top_db` below the
loudest frame's; the clip keeps everything from the first to the end of the last loud frame.
All-silent audio comes back empty, as it would from kokoro-onnx."""
from __future__ import annotations

import numpy as np

FRAME = 2048
HOP = 512
TOP_DB = 60.0


def trim_silence(audio: np.ndarray, top_db: float = TOP_DB) -> tuple[np.ndarray, tuple[int, int]]:
    """(the trimmed clip, (start, end) sample indices of it in `audio`)."""
    audio = np.asarray(audio, dtype=np.float32)
    if audio.size == 0:
        return audio, (0, 0)
    padded = np.pad(audio.astype(np.float64), FRAME // 2)
    n = 1 + (padded.size - FRAME) // HOP
    frames = np.lib.stride_tricks.as_strided(padded, (n, FRAME), (padded.strides[0] * HOP, padded.strides[0]))
    power = np.mean(frames * frames, axis=1)
    peak = power.max()
    if peak <= 0:
        return audio[:0], (0, 0)
    loud = np.flatnonzero(10.0 * np.log10(np.maximum(power, 1e-20) / peak) > -top_db)
    start = int(loud[0] * HOP)
    end = min(audio.size, int((loud[-1] + 1) * HOP))
    return audio[start:end], (start, end)
