"""Float audio -> the bytes of a wav / flac / mp3 / opus file, the same bytes on every machine.

Every format is the product's one encoder (kcc.speech.audio.encoder: PyAV / FFmpeg, muxed
bit-exact so no encoder version or random Ogg serial gets into the file; its WAV is byte for
byte what Python's wave module writes). Their bytes depend on the audio and the FFmpeg build
PyAV bundles, which the PyAV pin fixes.
"""
from __future__ import annotations

import numpy as np

from kcc.speech.audio.encoder import encode
from kcc.speech.audio.formats import AudioFormatError
from kcc.speech.batch import FORMATS             # the files batch writes

__all__ = ["FORMATS", "AudioFormatError", "encode_audio"]


def encode_audio(audio: np.ndarray, fmt: str) -> bytes:
    if fmt not in FORMATS:
        raise AudioFormatError(f"unknown audio format {fmt!r}; use one of {', '.join(FORMATS)}")
    return encode(audio, fmt)            # it quantises as the WAV does (pcm16): FLAC holds the WAV's samples
