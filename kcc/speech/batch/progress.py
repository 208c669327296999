"""A one-line batch progress bar on stderr: items, hours of audio made, failures, ETA."""
from __future__ import annotations

import sys
import time


class BatchProgress:
    def __init__(self, total: int, enabled: bool | None = None, stream=None):
        self.total, self.stream = total, stream or sys.stderr
        isatty = getattr(self.stream, "isatty", lambda: False)()
        self.enabled = bool(enabled) if enabled is not None else isatty
        self.t0 = time.perf_counter()
        self.finished = self.worked = self.failed = 0
        self.audio_s = 0.0

    def update(self, outcome) -> None:
        self.finished += 1
        self.worked += outcome.status != "skipped"
        self.failed += outcome.status == "error"
        self.audio_s += outcome.audio_s
        if self.enabled:
            self.stream.write("\r" + self.line())
            self.stream.flush()

    def eta_s(self) -> float | None:
        """Remaining items at the pace of the items worked on so far (skipped ones cost ~0)."""
        if not self.worked:
            return None
        return (time.perf_counter() - self.t0) / self.worked * (self.total - self.finished)

    def line(self) -> str:
        n = 30 * self.finished // max(1, self.total)
        eta = self.eta_s()
        eta_s = "?" if eta is None else time.strftime("%H:%M:%S", time.gmtime(eta))
        return (f"kcc batch: [{'#' * n}{'.' * (30 - n)}] {self.finished}/{self.total} items, "
                f"{self.audio_s / 3600:.3f} h audio, {self.failed} failed, ETA {eta_s}")

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False
