"""Ctrl-C and SIGTERM for every one-shot command (say, synth, batch, book, voices, export,
compile): the signal ends the command at once, even inside a C stage call, its unfinished
outputs are removed and its worker processes stopped (kcc.speech.cli.run runs each command
this way; the servers drain instead)."""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

from kcc.files import AtomicFile


INTERRUPTED_MESSAGE = "kcc: interrupted; unfinished outputs removed"
CHILD_GRACE_S = 0.3          # how long a worker process has to end on SIGTERM before SIGKILL


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
        end_now(exc.exit_code)
    if "error" in box:
        raise box["error"]
    return box["value"]


def clean_up_interrupted(ending: bool = False) -> None:
    """What an interrupted command leaves: nothing half made. Unfinished outputs removed, worker
    processes (batch and book --processes) stopped, and multiprocessing's finalizers run, which
    release the pools' semaphores (skipping them is what makes its resource tracker warn of
    'leaked semaphore objects'). ending: the process ends next, and the command's thread, still
    running, may start no new temporary and no new process."""
    AtomicFile.discard_live(ending)
    # Worker processes exist only if multiprocessing was imported: looked up, never imported
    # here (13 modules `kcc --help` does not need).
    mp = sys.modules.get("multiprocessing")
    if mp is not None:
        _stop_children(mp, ending)
    try:
        print(f"\n{INTERRUPTED_MESSAGE}", file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass


def _stop_children(mp, ending: bool) -> None:
    if ending:
        # The command's thread runs on meanwhile, and a batch rebuilds a pool whose workers died:
        # a daemonic process may start no children, so from here on none can be started.
        mp.current_process().daemon = True
    children = mp.active_children()
    for child in children:
        child.terminate()
    deadline = time.monotonic() + CHILD_GRACE_S
    for child in children:
        child.join(max(0.0, deadline - time.monotonic()))
        if child.is_alive():              # inside a call that holds signals off: no grace left
            child.kill()
            child.join(1.0)
    util = sys.modules.get("multiprocessing.util")         # a pool's semaphores register here
    if util is not None:
        util._run_finalizers()          # private, but the one hook: what exit runs itself


def end_now(exit_code: int) -> None:
    """clean_up_interrupted, then end the process at once with exit_code (130 SIGINT, 143
    SIGTERM). os._exit: a thread inside a C stage call cannot be cancelled, and interpreter
    shutdown would wait for it."""
    clean_up_interrupted(ending=True)
    os._exit(exit_code)


@contextlib.contextmanager
def interrupts_raise(signals=(signal.SIGINT, signal.SIGTERM)):
    """`signals` raise Interrupted in the main thread, between two bytecodes: at the latest when
    the running C stage returns (a stage is 0.1-1 s of a chunk). The previous handlers come back
    afterwards (off the main thread nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, _interrupt) for sig in signals}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
