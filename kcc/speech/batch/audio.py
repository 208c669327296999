"""Float audio -> the bytes of a wav / flac / mp3 / opus file, the same bytes on every machine.

WAV goes through kcc.speech.wav (what `kcc say` writes; no extra library). The compressed formats are
the server's encoder (kcc.speech.serve.audio_formats, PyAV / FFmpeg, muxed bit-exact so no encoder
version or random Ogg serial gets into the file); their bytes depend on the audio and the
FFmpeg build PyAV bundles, which the PyAV pin fixes.
"""
from __future__ import annotations

import io
import wave

import numpy as np

from kcc.speech.wav import SAMPLE_RATE, pcm16

FORMATS = ("wav", "flac", "mp3", "opus")


class AudioFormatError(ValueError):
    """The format is unknown or its encoder is not installed."""


def encode_audio(audio: np.ndarray, fmt: str) -> bytes:
    if fmt == "wav":
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(SAMPLE_RATE)
            w.writeframes(pcm16(audio))
        return buf.getvalue()
    if fmt not in FORMATS:
        raise AudioFormatError(f"unknown audio format {fmt!r}; use one of {', '.join(FORMATS)}")
    try:
        from kcc.speech.serve.audio_formats import encode
    except ImportError as exc:
        raise AudioFormatError(f"format {fmt!r} needs PyAV (pip install av); wav needs nothing: {exc}") from None
    return encode(audio, fmt)            # it quantises as the WAV does (pcm16): FLAC holds the WAV's samples
