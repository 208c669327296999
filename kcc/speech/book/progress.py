"""A one-line book progress bar on stderr: chapters done, hours of audio made, ETA."""
from __future__ import annotations

import time

from kcc.speech.progress_bar import WIDTH, ProgressBar


class BookProgress(ProgressBar):
    def __init__(self, chapters: int, items: int, enabled: bool | None = None, stream=None):
        super().__init__(enabled, stream)
        self.chapters, self.items = chapters, items
        self.chapters_done = self.items_done = self.items_worked = 0
        self.audio_s = 0.0

    def item(self, outcome) -> None:
        self.items_done += 1
        self.items_worked += outcome.status != "skipped"
        self.audio_s += outcome.audio_s
        self._draw()

    def chapter(self) -> None:
        self.chapters_done += 1
        self._draw()

    def eta_s(self) -> float | None:
        """The items left at the pace of those synthesised so far (skipped ones cost ~0)."""
        if not self.items_worked:
            return None
        return (time.perf_counter() - self.t0) / self.items_worked * (self.items - self.items_done)

    def line(self) -> str:
        eta = self.eta_s()
        eta_s = "?" if eta is None else time.strftime("%H:%M:%S", time.gmtime(eta))
        return (f"kcc book: {self.bar(WIDTH * self.items_done // max(1, self.items))} "
                f"{self.chapters_done}/{self.chapters} chapters, {self.audio_s / 3600:.3f} h audio, ETA {eta_s}")

    def _draw(self) -> None:
        if self.enabled:
            self.draw(self.line())
