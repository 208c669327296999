"""A one-line book progress bar on stderr: chapters done, hours of audio made, ETA (the bar
itself fills by items)."""
from __future__ import annotations

from kcc.speech.cli.progress_bar import ItemsBar


class BookProgress(ItemsBar):
    def __init__(self, chapters: int, items: int, enabled: bool | None = None, stream=None):
        super().__init__(items, enabled, stream)
        self.chapters, self.chapters_done = chapters, 0

    def item(self, outcome) -> None:
        self.count(outcome)
        self.redraw()

    def chapter(self) -> None:
        self.chapters_done += 1
        self.redraw()

    def line(self) -> str:
        return (f"kcc book: {self.items_bar()} {self.chapters_done}/{self.chapters} chapters, "
                f"{self.audio_s / 3600:.3f} h audio, ETA {self.eta()}")
