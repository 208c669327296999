"""The one-line progress bar `kcc say` and `kcc batch` draw on stderr: on by default only where
the stream is a terminal (a log file or a pipe gets no carriage-return redraws), redrawn in
place, ended with one newline. Each command's bar says its own numbers (speech.engine.Progress,
speech.batch.progress.BatchProgress)."""
from __future__ import annotations

import sys
import time

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
