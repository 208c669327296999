"""How every kcc command runs: the standard streams made safe, the command's errors turned into
the one exit table (kcc.speech.cli.exits), a closed pipe ended quietly, Ctrl-C and SIGTERM
ended at once with the unfinished outputs removed."""
from __future__ import annotations

import signal
import sys

from kcc.files import AtomicFile
from kcc.speech.cli.exits import Exit, is_input_error, message
from kcc.speech.cli.interrupts import Interrupted, clean_up_interrupted, interruptible, interrupts_raise
from kcc.speech.cli.streams import is_broken_pipe, quiet_stdout


def run_command(fn, args, *, in_main_thread: bool = False, server: bool = False) -> int:
    """fn(args) -> its exit code, under kcc's conventions. A command runs in a worker thread
    while the main one waits for signals (interruptible), except where it needs the main thread
    itself (in_main_thread: Ray's driver; server: uvicorn's and asyncio's signal handling); there
    SIGINT and SIGTERM raise Interrupted between two bytecodes (a server: SIGINT only)."""
    try:
        if in_main_thread and not server:
            with interrupts_raise():
                return fn(args)
        if server:
            # A server drains on SIGINT and SIGTERM with its own handlers, then re-raises the
            # signal into the handler it found: Ctrl-C becomes Interrupted here (uvicorn.run
            # swallows a KeyboardInterrupt), SIGTERM ends the process by the signal as before,
            # which a service manager counts as a clean stop.
            with interrupts_raise(signals=(signal.SIGINT,)):
                try:
                    return fn(args)
                except KeyboardInterrupt:
                    raise Interrupted(signal.SIGINT) from None
        with interrupts_raise():
            return interruptible(fn, args)
    except Interrupted as exc:          # raised by the command itself, or a server that drained
        clean_up_interrupted()
        return exc.exit_code
    except Exception as exc:  # every kcc error class carries a message naming what and where
        if is_broken_pipe(exc):
            AtomicFile.discard_live()
            quiet_stdout()
            return Exit.BROKEN_PIPE
        if is_input_error(exc):
            print(message(exc), file=sys.stderr)
            return Exit.USAGE
        raise
