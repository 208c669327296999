"""Float32 24 kHz mono -> the bytes of a format of kcc.speech.audio.formats' table, encoded and
muxed by PyAV (FFmpeg).

One `Encoder` per response or file. `push(audio)` returns whatever container bytes FFmpeg has written
so far (a streamed response sends them at once), `finish()` flushes the codec and the muxer.
Streamed responses use containers that need no seek back: MP3, Ogg Opus, AAC in ADTS, FLAC,
and WAV with open-ended sizes (FFmpeg leaves the RIFF sizes unset when the output cannot
seek, the usual streaming form); a whole response is muxed into a seekable buffer, so its WAV
and FLAC headers carry the real sizes.
"""
from __future__ import annotations

import io

import numpy as np

from kcc.model.kokoro import SAMPLE_RATE
from kcc.speech.audio.formats import FORMATS
from kcc.speech.audio.wav import pcm16


class _Sink(io.RawIOBase):
    """Collects what the muxer writes; not seekable, so muxers write their streaming form."""

    def __init__(self):
        self.parts: list[bytes] = []

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:
        self.parts.append(bytes(b))
        return len(b)

    def take(self) -> bytes:
        out, self.parts = b"".join(self.parts), []
        return out


class Encoder:
    """fmt's encoder and muxer. streaming: push() returns the bytes muxed so far (a non-seekable
    sink: the container's streaming form); else they collect in a seekable buffer, returned by
    finish() with complete headers. sink: a file object to write into instead (a seekable file
    gets complete headers; push() and finish() then return b"")."""

    def __init__(self, fmt: str, streaming: bool = True, sink=None):
        # PyAV is imported here, not at the top: it costs 130-190 ms (measured with -X importtime on
        # a 2-core Xeon, Sapphire Rapids), which a `kcc say -o x.wav` (no codec) should not pay.
        import av
        self._av = av
        self.format = FORMATS[fmt]
        self._sink = sink if sink is not None else _Sink() if streaming else io.BytesIO()
        # flush_packets: every muxed packet reaches the sink at once (no 32 KiB IO buffering);
        # bitexact: no encoder-version tags, so the bytes depend on the audio only.
        self._out = av.open(self._sink, mode="w", format=self.format.container,
                            options={"flush_packets": "1", "fflags": "+bitexact", **dict(self.format.options)})
        self._stream = self._out.add_stream(self.format.codec, rate=SAMPLE_RATE, layout="mono")
        if self.format.bit_rate:
            self._stream.bit_rate = self.format.bit_rate
        self._pts = 0
        self._closed = False

    def _drain(self) -> bytes:
        if isinstance(self._sink, _Sink):
            return self._sink.take()
        return b""

    def push(self, audio: np.ndarray) -> bytes:
        # 16-bit samples as `kcc say` writes them (kcc.speech.audio.wav.pcm16), so wav, flac and pcm carry
        # the same numbers as its WAV files; the lossy codecs are far coarser than 16 bits.
        samples = np.frombuffer(pcm16(audio), dtype="<i2").reshape(1, -1)
        if samples.size:
            frame = self._av.AudioFrame.from_ndarray(samples, format="s16", layout="mono")
            frame.sample_rate, frame.pts = SAMPLE_RATE, self._pts
            self._pts += samples.size
            self._out.mux(self._stream.encode(frame))
        return self._drain()

    def finish(self) -> bytes:
        if not self._closed:
            self._closed = True
            self._out.mux(self._stream.encode(None))
            self._out.close()
        if isinstance(self._sink, _Sink):
            return self._sink.take()
        return self._sink.getvalue() if isinstance(self._sink, io.BytesIO) else b""

    def close(self) -> None:
        """Release FFmpeg's state without producing output (an aborted response)."""
        if not self._closed:
            self._closed = True
            try:
                self._out.close()
            except (self._av.FFmpegError, OSError, ValueError):
                pass


def encode(audio: np.ndarray, fmt: str) -> bytes:
    """A whole file (seekable mux: complete headers)."""
    enc = Encoder(fmt, streaming=False)
    enc.push(audio)
    return enc.finish()
