"""Ctrl-C and SIGTERM for one-shot commands (`kcc say`, `kcc synth`): the signal ends the command
at once, even inside a C stage call, and its unfinished outputs are removed."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from kcc.files import AtomicFile


class Interrupted(BaseException):
    """SIGINT or SIGTERM: caught at the top of a command, which removes its partial outputs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.exit_code = 128 + signum


def _interrupt(signum, frame):
    raise Interrupted(signum)


def interruptible(fn, *args):
    """fn(*args) in a worker thread while the main thread waits, so a signal is handled at once:
    Python runs handlers only in the main thread between bytecodes, and one C stage call can
    take seconds on a loaded machine. Interrupted while fn still runs: its unfinished outputs
    are removed (kcc.files.AtomicFile.discard_live) and the process ends there (os._exit: the C
    call cannot be cancelled). Interrupted raised inside fn comes back as an exception."""
    box: dict = {}

    def work():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:    # handed to the main thread as it is
            box["error"] = exc
    worker = threading.Thread(target=work, name="kcc-work", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.25)
    except Interrupted as exc:
        AtomicFile.discard_live()
        print("\nkcc: interrupted; no output written", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(exc.exit_code)
    if "error" in box:
        raise box["error"]
    return box["value"]


@contextlib.contextmanager
def interrupts_raise():
    """SIGINT / SIGTERM raise Interrupted in the main thread, between two bytecodes: at the
    latest when the running C stage returns (a stage is 0.1-1 s of a chunk). The previous
    handlers come back afterwards (off the main thread nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
