"""A one-line batch progress bar on stderr: items, hours of audio made, failures, ETA."""
from __future__ import annotations

from kcc.speech.cli.progress_bar import ItemsBar


class BatchProgress(ItemsBar):
    def __init__(self, total: int, enabled: bool | None = None, stream=None):
        super().__init__(total, enabled, stream)
        self.failed = 0

    def update(self, outcome) -> None:
        self.count(outcome)
        self.failed += outcome.status == "error"
        self.redraw()

    def line(self) -> str:
        return (f"kcc batch: {self.items_bar()} {self.finished}/{self.total} items, {self.audio_s / 3600:.3f} h audio, "
                f"{self.failed} failed, ETA {self.eta()}")
