"""Float32 24 kHz mono -> every audio format kcc writes, encoded and muxed by PyAV (FFmpeg).

FORMATS is the one table of formats: its name (the server's response_format, `kcc say
--format`, a batch manifest's format), the file extensions that choose it, its media type and
its FFmpeg muxer and codec. `kcc say`, the server, Wyoming and batch all encode through it.

One `Encoder` per response or file. `push(audio)` returns whatever container bytes FFmpeg has written
so far (a streamed response sends them at once), `finish()` flushes the codec and the muxer.
Streamed responses use containers that need no seek back: MP3, Ogg Opus, AAC in ADTS, FLAC,
and WAV with open-ended sizes (FFmpeg leaves the RIFF sizes unset when the output cannot
seek, the usual streaming form); a whole response is muxed into a seekable buffer, so its WAV
and FLAC headers carry the real sizes.
"""
from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kcc.speech.audio.timestamps import SAMPLE_RATE
from kcc.speech.audio.wav import pcm16


@dataclass(frozen=True)
class Format:
    container: str            # FFmpeg muxer
    codec: str                # FFmpeg encoder
    media_type: str
    bit_rate: int | None = None
    options: tuple[tuple[str, str], ...] = ()
    extensions: tuple[str, ...] = ()     # file name endings that choose it (`kcc say -o`), lower case


FORMATS: dict[str, Format] = {
    "mp3": Format("mp3", "libmp3lame", "audio/mpeg", 64_000, extensions=(".mp3",)),
    # Ogg holds pages back up to 1 s by default; 100 ms pages let a stream start sooner.
    "opus": Format("ogg", "libopus", "audio/ogg; codecs=opus", 48_000, (("page_duration", "100000"),),
                   extensions=(".opus", ".ogg")),
    # AAC in ADTS: what a .aac file is; .m4a names the MP4 container (a seekable file only)
    "aac": Format("adts", "aac", "audio/aac", 64_000, extensions=(".aac",)),
    "m4a": Format("ipod", "aac", "audio/mp4", 64_000, extensions=(".m4a",)),
    "flac": Format("flac", "flac", "audio/flac", extensions=(".flac",)),
    "wav": Format("wav", "pcm_s16le", "audio/wav", extensions=(".wav",)),
    "pcm": Format("s16le", "pcm_s16le", f"audio/pcm;rate={SAMPLE_RATE};channels=1;encoding=s16le",
                  extensions=(".pcm", ".raw")),
}
# Formats a stream can carry (no seek back to finish the file): all but MP4's m4a. The server's
# response_format and `kcc say -o -` take these.
STREAMABLE: dict[str, Format] = {name: fmt for name, fmt in FORMATS.items() if name != "m4a"}


class AudioFormatError(ValueError):
    """The format is unknown, or cannot be told from a file name; the message lists the choices."""


def format_for(path: str | None, asked: str | None = None) -> str:
    """The format a file is written in: `asked` (--format) if given, else the one its extension
    names ("-", stdout: wav). An unknown or missing extension, an unknown format, or a format
    the extension contradicts is an AudioFormatError, raised before any synthesis."""
    known = ", ".join(e for f in FORMATS.values() for e in f.extensions)
    if asked is not None and asked not in FORMATS:
        raise AudioFormatError(f"unknown audio format {asked!r}; use one of {', '.join(FORMATS)}")
    if path is None or path == "-":
        if asked == "m4a":
            raise AudioFormatError("m4a (MP4) cannot be streamed to stdout; use aac, mp3, opus, flac or wav")
        return asked or "wav"
    ext = Path(path).suffix.lower()          # ".wav" alone is a hidden file with no extension
    by_ext = next((name for name, f in FORMATS.items() if ext in f.extensions), None)
    if asked is not None:
        if by_ext is not None and by_ext != asked and not {by_ext, asked} <= {"aac", "m4a"}:
            raise AudioFormatError(f"{path}: the extension {ext} names {by_ext}, but --format says {asked}")
        return asked
    if by_ext is None:
        what = f"the extension {ext!r}" if ext else "a name without an extension"
        raise AudioFormatError(f"{path}: {what} names no audio format kcc writes ({known}); "
                               "rename it or pass --format")
    return by_ext


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
