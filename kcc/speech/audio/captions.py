"""The one caption writer (SRT / WebVTT) from word timestamps (kcc.speech.audio.timestamps), for
`kcc say --subtitles`, the server, batch and `kcc book --subtitles`.

Words are grouped into cues as they come (Cues): a cue ends after a sentence's last word
(kcc.speech.sentences, every script's marks), at a break the caller names (a new book item), or
before it would pass MAX_CUE_CHARS characters or MAX_CUE_SECONDS seconds (what a reader follows
on one or two lines). SubtitleStream writes cues into a temporary file renamed into place at the
end, like the audio: memory does not grow with the text; cues() / render() do a whole list.
"""
from __future__ import annotations

from pathlib import Path

from kcc.files import AtomicFile
from kcc.speech.audio.outputs import OutputError
from kcc.speech.sentences import ends_sentence

MAX_CUE_CHARS = 84               # two lines of 42, the usual broadcast limit
MAX_CUE_SECONDS = 6.0
KINDS = {".srt": "srt", ".vtt": "vtt"}
FORMATS = ("srt", "vtt")


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


def line(words: list[dict]) -> str:
    """The cue's text: punctuation the G2P split off sticks to the word before it."""
    out = ""
    for w in words:
        out += w["word"] if (not out or not w["word"][0].isalnum() and len(w["word"]) <= 2) else " " + w["word"]
    return out


class Cues:
    """Words in, finished cues (start_s, end_s, text) out, by the one rule above."""

    def __init__(self):
        self._words: list[dict] = []

    def add(self, w: dict, new_item: bool = False) -> list[tuple[float, float, str]]:
        text = str(w["word"]).strip()
        if not text:
            return []
        done = []
        if self._words and (new_item or len(line(self._words)) + 1 + len(text) > MAX_CUE_CHARS
                            or float(w["end_s"]) - float(self._words[0]["start_s"]) > MAX_CUE_SECONDS):
            done += self.flush()
        self._words.append({**w, "word": text})
        if ends_sentence(text):
            done += self.flush()
        return done

    def flush(self) -> list[tuple[float, float, str]]:
        if not self._words:
            return []
        start, end = float(self._words[0]["start_s"]), float(self._words[-1]["end_s"])
        cue = (start, max(end, start), line(self._words))
        self._words = []
        return [cue]


def cues(words: list[dict], breaks=frozenset()) -> list[tuple[float, float, str]]:
    """All cues of `words` ([{word, start_s, end_s}]); breaks: indexes of words that start a new item."""
    c, out = Cues(), []
    for i, w in enumerate(words):
        out += c.add(w, i in breaks)
    return out + c.flush()


def cue_text(n: int, cue: tuple[float, float, str], kind: str) -> str:
    start, end, text = cue
    head = f"{n}\n" if kind == "srt" else ""
    return f"{head}{timecode(start, kind)} --> {timecode(end, kind)}\n{text}\n\n"


def render(cue_list: list[tuple[float, float, str]], kind: str) -> str:
    if kind not in FORMATS:
        raise ValueError(f"subtitle format {kind!r} is not one of {', '.join(FORMATS)}")
    return ("WEBVTT\n\n" if kind == "vtt" else "") + "".join(cue_text(n, c, kind) for n, c in enumerate(cue_list, 1))


class SubtitleStream:
    def __init__(self, path: str | Path, kind: str | None = None):
        self.kind = kind or subtitle_kind(path)
        self.file = AtomicFile(path)
        self.cues = 0
        self._cues = Cues()
        if self.kind == "vtt":
            self._put("WEBVTT\n\n")

    def _put(self, text: str) -> None:
        self.file.fh.write(text.encode("utf-8"))

    def _write(self, done) -> None:
        for cue in done:
            self.cues += 1
            self._put(cue_text(self.cues, cue, self.kind))

    def add(self, words: list[dict]) -> None:
        """One chunk's words ({word, start_s, end_s}, offset into the whole audio)."""
        for w in words:
            self._write(self._cues.add(w))

    def finish(self) -> None:
        self._write(self._cues.flush())
        self.file.close()
