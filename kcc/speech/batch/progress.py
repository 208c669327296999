"""A one-line batch progress bar on stderr: items, hours of audio made, failures, ETA."""
from __future__ import annotations

import time

from kcc.speech.progress_bar import WIDTH, ProgressBar


class BatchProgress(ProgressBar):
    def __init__(self, total: int, enabled: bool | None = None, stream=None):
        super().__init__(enabled, stream)
        self.total = total
        self.finished = self.worked = self.failed = 0
        self.audio_s = 0.0

    def update(self, outcome) -> None:
        self.finished += 1
        self.worked += outcome.status != "skipped"
        self.failed += outcome.status == "error"
        self.audio_s += outcome.audio_s
        if self.enabled:
            self.draw(self.line())

    def eta_s(self) -> float | None:
        """Remaining items at the pace of the items worked on so far (skipped ones cost ~0)."""
        if not self.worked:
            return None
        return (time.perf_counter() - self.t0) / self.worked * (self.total - self.finished)

    def line(self) -> str:
        eta = self.eta_s()
        eta_s = "?" if eta is None else time.strftime("%H:%M:%S", time.gmtime(eta))
        return (f"kcc batch: {self.bar(WIDTH * self.finished // max(1, self.total))} {self.finished}/{self.total} "
                f"items, {self.audio_s / 3600:.3f} h audio, {self.failed} failed, ETA {eta_s}")
