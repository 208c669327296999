"""Float audio -> the bytes of a wav / flac / mp3 / opus file, the same bytes on every machine.

WAV is written by kcc.wav's PCM-16 path (no extra library). The compressed formats go through
PyAV (FFmpeg's codecs) with the muxer and encoder in bit-exact mode: without it the Ogg muxer
draws a random stream serial number and the muxers stamp the library version, so two runs of
the same item would differ. The PyAV bytes still depend on the FFmpeg build PyAV bundles (pinned
with PyAV). kcc/serve/audio_formats.py (the server's encoder) should become this one function.
"""
from __future__ import annotations

import io
import wave

import numpy as np

from kcc.wav import SAMPLE_RATE, pcm16

# format -> (codec, container); Opus takes 24 kHz input natively, so no resampling anywhere.
CODECS = {"flac": ("flac", "flac"), "mp3": ("libmp3lame", "mp3"), "opus": ("libopus", "ogg")}
FORMATS = ("wav", *CODECS)


class AudioFormatError(ValueError):
    """The format is unknown or its encoder is not installed."""


def encode_audio(audio: np.ndarray, fmt: str, sample_rate: int = SAMPLE_RATE) -> bytes:
    if fmt == "wav":
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(sample_rate)
            w.writeframes(pcm16(audio))
        return buf.getvalue()
    if fmt not in CODECS:
        raise AudioFormatError(f"unknown audio format {fmt!r}; use one of {', '.join(FORMATS)}")
    try:
        import av
    except ImportError:
        raise AudioFormatError(f"format {fmt!r} needs PyAV (pip install av); wav needs nothing") from None
    codec, container = CODECS[fmt]
    samples = np.frombuffer(pcm16(audio), dtype="<i2").reshape(1, -1)
    buf = io.BytesIO()
    with av.open(buf, "w", format=container, options={"fflags": "+bitexact"}) as out:
        stream = out.add_stream(codec, rate=sample_rate)
        stream.layout = "mono"
        stream.codec_context.flags |= av.codec.context.Flags.bitexact
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
        frame.sample_rate = sample_rate
        for packet in stream.encode(frame):
            out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()
