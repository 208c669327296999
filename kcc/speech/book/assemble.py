"""A chapter's items (the batch's WAV files and sidecars) -> its audio, streamed into a sink one
item at a time, with the planned silences between them, plus its word timestamps and sidecar.

Each item is faded in and out over FADE_S before the silence that follows it: Kokoro's
utterances start and end near zero but not at it, and a step from a nonzero sample into digital
silence is an audible click; a 5 ms fade is far shorter than any phoneme.
"""
from __future__ import annotations

import json
import wave
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kcc.version import __version__
from kcc.files import AtomicFile
from kcc.speech.audio.encoder import Encoder
from kcc.speech.audio.timestamps import SAMPLE_RATE
from kcc.speech.audio.wav import WavWriter
from kcc.speech.book import AUDIO_FORMATS    # re-exported: the table lives where --help reads it
from kcc.speech.book.errors import BookError
from kcc.speech.book.layout import ChapterPlan
from kcc.speech.book.tags import ChapterTags, tag_chapter

FADE_S = 0.005


class MissingItem(BookError):
    """An item's audio or sidecar is missing or damaged when its chapter is assembled."""


def read_item(work: Path, item_id: str) -> tuple[np.ndarray, dict]:
    """(float32 samples exactly as the WAV holds them, sidecar)."""
    try:
        side = json.loads((work / f"{item_id}.json").read_text(encoding="utf-8"))
        with wave.open(str(work / f"{item_id}.wav"), "rb") as w:
            pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2")
    except (OSError, ValueError, wave.Error, EOFError) as exc:
        raise MissingItem(f"item {item_id}: {exc}") from None
    return pcm.astype(np.float32) / 32767.0, side          # kcc.speech.audio.wav.pcm16 maps these back exactly


def fade(audio: np.ndarray, n: int = int(FADE_S * SAMPLE_RATE)) -> np.ndarray:
    n = min(n, audio.size // 2)
    if n:
        ramp = (0.5 - 0.5 * np.cos(np.pi * (np.arange(n, dtype=np.float32) + 1) / (n + 1))).astype(np.float32)
        audio = audio.copy()
        audio[:n] *= ramp
        audio[-n:] *= ramp[::-1]
    return audio


@dataclass
class Assembled:
    samples: int = 0
    words: list[dict] = field(default_factory=list)
    items: list[dict] = field(default_factory=list)
    fingerprints: list[str] = field(default_factory=list)
    model_digest: str = ""
    voice: str | None = None
    lang: str = ""


def assemble(plan: ChapterPlan, work: Path, write, at: int = 0) -> Assembled:
    """Streams the chapter through write(float32 audio); times are relative to the chapter
    (`at`: samples before it in the output, only for the item spans' book times)."""
    out = Assembled()
    for seg in plan.segments:
        audio, side = read_item(work, seg.item_id)
        audio = fade(audio)
        start = out.samples
        write(audio)
        out.samples += audio.size
        for w in side["words"]:
            out.words.append({**w, "start_s": round(w["start_s"] + start / SAMPLE_RATE, 6),
                              "end_s": round(w["end_s"] + start / SAMPLE_RATE, 6), "item": seg.item_id})
        out.items.append({"id": seg.item_id, "text": seg.text, "phonemes": side["phonemes"],
                          "durations": side["durations"], "start_s": round(start / SAMPLE_RATE, 6),
                          "end_s": round(out.samples / SAMPLE_RATE, 6), "pause_s": seg.pause_s})
        out.fingerprints.append(side["fingerprint"])
        out.model_digest, out.voice, out.lang = side["model_digest"], side["voice"], side["lang"]
        gap = int(round(seg.pause_s * SAMPLE_RATE))
        if gap:
            write(np.zeros(gap, np.float32))
            out.samples += gap
    return out


class ChapterFile:
    """One chapter's audio file, written as it comes and renamed into place by commit():
    WAV through kcc.speech.audio.wav.WavWriter, the others through the server's PyAV encoder in its
    streaming form (kcc.speech.audio.encoder: bit-exact muxing, so the same audio gives
    the same bytes)."""

    def __init__(self, path: Path, fmt: str, tags: ChapterTags | None = None):
        if fmt not in AUDIO_FORMATS:
            raise BookError(f"audio format {fmt!r} is not one of {', '.join(AUDIO_FORMATS)}")
        self.path, self.fmt, self.bytes, self.tags = path, fmt, 0, tags
        if fmt == "wav":
            self.file = WavWriter(path)
            self.encoder = None
        else:
            self.file, self.encoder = AtomicFile(path), Encoder(fmt, streaming=True)

    def write(self, audio: np.ndarray) -> None:
        if self.encoder is None:
            self.file.write(audio)
        else:
            self.file.fh.write(self.encoder.push(audio))

    def commit(self) -> Path:
        if self.encoder is not None:
            self.file.fh.write(self.encoder.finish())
        if self.tags is not None:              # on the whole temporary, before it is renamed into place
            self.file.close()
            tag_chapter(self.file.tmp, self.fmt, self.tags)
        return self.file.commit()

    def abort(self) -> None:
        if self.encoder is not None:
            self.encoder.close()
        self.file.abort()


def chapter_sidecar(plan: ChapterPlan, got: Assembled, fingerprint: str, audio: dict) -> dict:
    """The chapter's record, the batch item sidecar's fields gathered over its items."""
    return {"schema": "kcc.speech.book.chapter/1", "chapter": plan.index, "title": plan.title,
            "fingerprint": fingerprint, "text": plan.paragraphs, "items": got.items, "words": got.words,
            "voice": got.voice, "lang": got.lang, "model_digest": got.model_digest, "kcc_version": __version__,
            "audio": audio}
