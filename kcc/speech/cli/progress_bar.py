"""The one-line progress bar `kcc say` and `kcc batch` draw on stderr: on by default only where
the stream is a terminal (a log file or a pipe gets no carriage-return redraws), redrawn in
place, ended with one newline. Each command's bar says its own numbers (Progress here, `kcc say`'s, fed by the engine's per-chunk callback;
speech.batch.progress.BatchProgress, speech.book.progress.BookProgress); batch and book count
the same items (ItemsBar)."""
from __future__ import annotations

import sys
import time

from kcc.model.kokoro import SAMPLE_RATE

WIDTH = 30     # characters of the bar itself


class ProgressBar:
    def __init__(self, enabled: bool | None = None, stream=None):
        self.stream = stream or sys.stderr
        isatty = getattr(self.stream, "isatty", lambda: False)()
        self.enabled = bool(enabled) if enabled is not None else isatty
        self.t0 = time.perf_counter()

    @staticmethod
    def bar(filled: int) -> str:
        """`[###...]`: `filled` of WIDTH cells."""
        return f"[{'#' * filled}{'.' * (WIDTH - filled)}]"

    def draw(self, line: str) -> None:
        if self.enabled:
            self.stream.write("\r" + line)
            self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False


class ItemsBar(ProgressBar):
    """A bar over a known number of items (kcc batch's records, kcc book's segments): those
    finished, those worked on, the audio made and the time left at the pace of the worked ones
    (a skipped item, already on disk, costs ~0, so it must not speed the estimate up)."""

    def __init__(self, total: int, enabled: bool | None = None, stream=None):
        super().__init__(enabled, stream)
        self.total = total
        self.finished = self.worked = 0
        self.audio_s = 0.0

    def count(self, outcome) -> None:
        """One item's outcome (its .status and .audio_s), not drawn yet."""
        self.finished += 1
        self.worked += outcome.status != "skipped"
        self.audio_s += outcome.audio_s

    def eta_s(self) -> float | None:
        """The items left at the pace of those worked on so far; None before the first."""
        if not self.worked:
            return None
        return (time.perf_counter() - self.t0) / self.worked * (self.total - self.finished)

    def eta(self) -> str:
        eta = self.eta_s()
        return "?" if eta is None else time.strftime("%H:%M:%S", time.gmtime(eta))

    def items_bar(self) -> str:
        return self.bar(WIDTH * self.finished // max(1, self.total))

    def line(self) -> str:
        raise NotImplementedError

    def redraw(self) -> None:
        if self.enabled:
            self.draw(self.line())


class Progress(ProgressBar):
    """`kcc say`'s bar, the engine's progress callback (kcc.speech.engine.synthesize_chunks calls
    it with each Chunk made): how much of the text is spoken (characters of the chunks done,
    against the text's), chunks and audio made, time spent and an estimate of the time left."""

    def __init__(self, text_chars: int = 0, enabled: bool | None = None, stream=None, total_chunks: int = 0):
        super().__init__(enabled, stream)
        self.text_chars, self.chars, self.total_chunks = text_chars, 0, total_chunks
        self.done, self.audio_s = 0, 0.0

    def __call__(self, chunk) -> None:
        self.chars += len(chunk.encoded.text) + 1
        self.update(chunk.index + 1, (chunk.offset + chunk.audio.size) / SAMPLE_RATE)

    def update(self, done: int, audio_s: float) -> None:
        self.done, self.audio_s = done, audio_s
        if not self.enabled:
            return
        frac = min(1.0, self.chars / self.text_chars if self.text_chars
                   else done / self.total_chunks if self.total_chunks else 1.0)
        spent = time.perf_counter() - self.t0
        left = f", ~{spent * (1 - frac) / frac:.0f} s left" if 0 < frac < 1 else ""
        self.draw(f"kcc say: {self.bar(int(WIDTH * frac))} {100 * frac:3.0f}% of the text, {done} chunks, "
                  f"{audio_s:.1f} s audio, {spent:.1f} s{left}  ")
