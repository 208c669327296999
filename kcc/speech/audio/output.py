"""Where `kcc say` puts its audio, chunk by chunk: a file in any format, or stdout.

Each writer takes float audio with write(), and finishes with close() then commit():
- a .wav file: kcc.speech.audio.wav.WavWriter (no codec; its header patched at the end);
- another format's file: the format's encoder (kcc.speech.audio.encoder) writing into a
  temporary file beside the target, renamed onto it at commit (a failure leaves nothing);
- stdout ("-"): the format's streaming form, flushed after every chunk so a pipe
  (`kcc say ... -o - | ffmpeg -i - ...`) starts at the first chunk; WAV then has an open-ended
  header (FFmpeg's unknown-length sizes), as streamed WAV does.
"""
from __future__ import annotations

import io
import sys
from pathlib import Path

import numpy as np

from kcc.files import AtomicFile
from kcc.speech.audio.encoder import Encoder
from kcc.speech.audio.wav import WavWriter

STDOUT = "-"


class _Sink(io.RawIOBase):
    """The temporary file as the muxer sees it; once discarded (an abort), what the muxer still
    writes while closing goes nowhere: a full disk would refuse it again, and PyAV prints each
    exception raised inside its I/O callbacks as 'PyAV library exception being dropped'."""

    def __init__(self, fh):
        self.fh, self.discarded = fh, False

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def write(self, b) -> int:
        return len(b) if self.discarded else self.fh.write(b)

    def seek(self, offset: int, whence: int = 0) -> int:
        return 0 if self.discarded else self.fh.seek(offset, whence)

    def tell(self) -> int:
        return 0 if self.discarded else self.fh.tell()


class EncodedFile(AtomicFile):
    """A file in fmt, encoded as chunks come (a seekable file: complete headers)."""

    def __init__(self, path: str | Path, fmt: str):
        super().__init__(path)
        self.samples = 0
        self.sink = _Sink(self.fh)
        self.encoder = Encoder(fmt, sink=self.sink)

    def write(self, audio: np.ndarray) -> None:
        self.encoder.push(audio)
        self.samples += int(np.asarray(audio).size)

    def close(self) -> None:
        if not self.fh.closed:
            self.encoder.finish()
        super().close()

    def abort(self) -> None:
        self.sink.discarded = True
        self.encoder.close()
        super().abort()


class StdoutAudio:
    """fmt's stream on stdout; nothing to rename, nothing to remove on failure (the reader has
    what was sent, as from any pipe)."""

    def __init__(self, fmt: str, out=None):
        self.out = out if out is not None else sys.stdout.buffer
        self.encoder = Encoder(fmt, streaming=True)
        self.samples = 0
        self.path = STDOUT
        self._done = False

    def write(self, audio: np.ndarray) -> None:
        self._send(self.encoder.push(audio))
        self.samples += int(np.asarray(audio).size)

    def _send(self, data: bytes) -> None:
        if data:
            self.out.write(data)
            self.out.flush()

    def close(self) -> None:
        if not self._done:
            self._done = True
            self._send(self.encoder.finish())

    def commit(self) -> str:
        self.close()
        return STDOUT

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.encoder.close()


def open_audio(out: str | Path, fmt: str):
    """The writer for `-o out` in fmt (kcc.speech.audio.formats.format_for chose it)."""
    if str(out) == STDOUT:
        return StdoutAudio(fmt)
    if fmt == "wav":
        return WavWriter(out)
    return EncodedFile(out, fmt)
