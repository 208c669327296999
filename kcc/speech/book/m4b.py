"""The one-file audiobook: AAC in an MP4 container (.m4b), streamed chapter by chapter, with
chapter markers and title / author / cover.

PyAV (FFmpeg's mp4 muxer, 'ipod' flavour) encodes and muxes; its chapters go in both forms
players read, a QuickTime chapter text track and Nero's 'chpl' atom. Title and author are
container metadata; the cover is a 'covr' atom added with mutagen (FFmpeg would need it as an
attached-picture stream). Muxed bit-exact: the bytes depend on the audio and the tags only.
"""
from __future__ import annotations

from fractions import Fraction
from pathlib import Path

import numpy as np

from kcc.files import AtomicFile
from kcc.speech.audio.timestamps import SAMPLE_RATE
from kcc.speech.audio.wav import pcm16

BIT_RATE = 64_000            # mono speech: transparent for Kokoro's 24 kHz output


class M4bWriter:
    def __init__(self, path: Path, bit_rate: int = BIT_RATE):
        import av
        self.file = AtomicFile(path)
        self.out = av.open(self.file.fh, mode="w", format="ipod", options={"fflags": "+bitexact"})
        self.stream = self.out.add_stream("aac", rate=SAMPLE_RATE, layout="mono")
        self.stream.bit_rate = bit_rate
        self.samples = 0

    def write(self, audio: np.ndarray) -> None:
        import av
        pcm = np.frombuffer(pcm16(audio), dtype="<i2").reshape(1, -1)
        if pcm.size:
            frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
            frame.sample_rate, frame.pts = SAMPLE_RATE, self.samples
            self.samples += pcm.size
            self.out.mux(self.stream.encode(frame))

    def commit(self, chapters: list[tuple[str, int, int]], title: str, author: str,
               cover: bytes | None = None, cover_mime: str = "") -> Path:
        """chapters: (title, first sample, end sample)."""
        self.out.mux(self.stream.encode(None))
        self.out.set_chapters([{"id": i, "start": a, "end": b, "time_base": Fraction(1, SAMPLE_RATE),
                                "metadata": {"title": t}} for i, (t, a, b) in enumerate(chapters, 1)])
        self.out.close()
        self.file.close()
        tag(self.file.tmp, title, author, cover, cover_mime)
        return self.file.commit()

    def abort(self) -> None:
        try:
            self.out.close()
        except Exception:           # a half-muxed file is deleted with the temporary
            pass
        self.file.abort()


def tag(path: Path, title: str, author: str, cover: bytes | None, cover_mime: str) -> None:
    from mutagen.mp4 import MP4, MP4Cover
    mp4 = MP4(str(path))
    mp4.tags["©nam"] = [title]
    mp4.tags["©alb"] = [title]
    mp4.tags["stik"] = [2]                     # media kind: audiobook
    if author:
        mp4.tags["©ART"] = [author]
    if cover and cover_mime in ("image/jpeg", "image/png"):
        kind = MP4Cover.FORMAT_PNG if cover_mime == "image/png" else MP4Cover.FORMAT_JPEG
        mp4.tags["covr"] = [MP4Cover(cover, imageformat=kind)]
    mp4.save()


def read_chapters(path: Path) -> list[tuple[str, float]]:
    """(title, start seconds) of each chapter, as mutagen reads the file (what the tests check)."""
    from mutagen.mp4 import MP4
    return [(c.title, c.start) for c in MP4(str(path)).chapters or []]
