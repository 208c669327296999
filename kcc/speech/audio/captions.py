"""`kcc say --subtitles out.srt|out.vtt`: captions from the word timestamps (kcc.speech.audio.timestamps).

Words are grouped into cues as chunks come: a cue ends after a sentence's last word, or before
it would pass MAX_CUE_CHARS characters or MAX_CUE_SECONDS seconds (what a reader follows on one
or two lines). Cues are streamed into a temporary file and renamed into place at the end, like
the audio: memory does not grow with the text.
"""
from __future__ import annotations

from pathlib import Path

from kcc.files import AtomicFile
from kcc.speech.audio.outputs import OutputError

MAX_CUE_CHARS = 84               # two lines of 42, the usual broadcast limit
MAX_CUE_SECONDS = 6.0
SENTENCE_END = (".", "!", "?", "…", "。", "！", "？")
KINDS = {".srt": "srt", ".vtt": "vtt"}


def subtitle_kind(path: str | Path) -> str:
    """srt or vtt, from the extension; anything else is refused before any synthesis."""
    ext = Path(path).suffix.lower()
    if ext not in KINDS:
        raise OutputError(f"--subtitles {path}: name a .srt or .vtt file (the extension picks the format)")
    return KINDS[ext]


def timecode(seconds: float, kind: str) -> str:
    ms = max(0, int(round(seconds * 1000)))
    h, rest = divmod(ms, 3_600_000)
    m, rest = divmod(rest, 60_000)
    s, ms = divmod(rest, 1000)
    return f"{h:02d}:{m:02d}:{s:02d}{',' if kind == 'srt' else '.'}{ms:03d}"


class SubtitleStream:
    def __init__(self, path: str | Path, kind: str | None = None):
        self.kind = kind or subtitle_kind(path)
        self.file = AtomicFile(path)
        self.cues = 0
        self._words: list[dict] = []
        if self.kind == "vtt":
            self._put("WEBVTT\n\n")

    def _put(self, text: str) -> None:
        self.file.fh.write(text.encode("utf-8"))

    def add(self, words: list[dict]) -> None:
        """One chunk's words ({word, start_s, end_s}, offset into the whole audio)."""
        for w in words:
            text = str(w["word"]).strip()
            if not text:
                continue
            if self._words and (len(self._line()) + 1 + len(text) > MAX_CUE_CHARS
                                or float(w["end_s"]) - float(self._words[0]["start_s"]) > MAX_CUE_SECONDS):
                self._flush()
            self._words.append({**w, "word": text})
            if text.endswith(SENTENCE_END):
                self._flush()

    def _line(self) -> str:
        out = ""
        for w in self._words:       # punctuation the G2P split off sticks to the word before it
            out += w["word"] if (not out or not w["word"][0].isalnum() and len(w["word"]) <= 2) else " " + w["word"]
        return out

    def _flush(self) -> None:
        if not self._words:
            return
        self.cues += 1
        start, end = float(self._words[0]["start_s"]), float(self._words[-1]["end_s"])
        head = f"{self.cues}\n" if self.kind == "srt" else ""
        self._put(f"{head}{timecode(start, self.kind)} --> {timecode(max(end, start), self.kind)}\n{self._line()}\n\n")
        self._words = []

    def finish(self) -> None:
        self._flush()
        self.file.close()
