"""The one exit-code table of every kcc command, and the one mapping from an error to its code.

Every command raises its named error (a ValueError, OSError or one of INPUT_ERRORS) and the
dispatcher (kcc.cli.main -> kcc.speech.cli.run.run_command) turns it into one stderr line and
USAGE; no command prints its own "kcc: Error: ..." or picks its own number.
"""
from __future__ import annotations

import sys
from enum import IntEnum


class Exit(IntEnum):
    OK = 0
    FAILED = 1            # kcc xray: out of tolerance; batch/book: some items failed; any: a traceback
    USAGE = 2             # a usage or input error, named on stderr
    CANNOT_LISTEN = 3     # serve, wyoming: the address is taken or not ours
    INTERRUPTED = 130     # 128 + SIGINT
    BROKEN_PIPE = 141     # 128 + SIGPIPE: the reader of stdout went away (as `yes | head -1` gives)
    TERMINATED = 143      # 128 + SIGTERM


EXIT_CODES = f"""exit codes:
  {Exit.OK:<4} done
  {Exit.FAILED:<4} kcc xray: a checkpoint out of tolerance; batch, book: some items failed (named on
       stderr; rerun to retry them); any command: an internal error (a traceback)
  {Exit.USAGE:<4} a usage or input error, named on stderr before any output is written (bad option, text,
       voice, format, path, checkpoint, a closed stdout; argparse's own usage errors too)
  {Exit.CANNOT_LISTEN:<4} serve, wyoming: cannot listen on the address (taken, or not this machine's)
  {Exit.INTERRUPTED:<4} interrupted (SIGINT, Ctrl-C), {Exit.TERMINATED} terminated (SIGTERM): partial outputs are removed
       (serve and wyoming drain on SIGTERM and exit {Exit.OK})
  {Exit.BROKEN_PIPE:<4} stdout's reader went away (`kcc voices | head -1`): ended quietly"""

# The error classes that are a user's input or environment, not kcc's bug, by module and name:
# looked up only among modules already imported (an error of a module never imported cannot
# have been raised), so the table costs `kcc --help` nothing. ValueError and OSError cover the
# rest (G2PError, SayError, OutputError, ...: ValueErrors; a disk full: an OSError).
INPUT_ERRORS = (
    ("kcc.cache_trust", "CacheError"), ("kcc.circuits", "CircuitError"), ("kcc.compiler.build", "BuildError"),
    ("kcc.compiler.emit", "CheckedCallCodegenError"), ("kcc.compiler.runtime", "KccRunError"),
    ("kcc.compiler.xray", "PinnedCaptureError"), ("kcc.model.pipeline", "SynthesisError"),
    ("kcc.ops", "LoweringError"), ("kcc.speech.voices", "VoiceError"), ("kcc.weights.bounded_read", "CheckpointError"),
    ("kcc.weights.importers.onnx_graph", "OnnxImportError"), ("kcc.weights.real_model", "FetchError"),
    ("kcc.speech.batch.api", "BatchError"), ("kcc.speech.batch.local_pool", "WorkerLoadError"),
    ("kcc.speech.batch.ray_engine", "RayUnavailable"), ("kcc.speech.book.errors", "BookError"),
)


def input_error_classes() -> tuple[type[BaseException], ...]:
    found = [getattr(sys.modules[mod], name, None) for mod, name in INPUT_ERRORS if mod in sys.modules]
    return tuple(c for c in found if isinstance(c, type)) + (ValueError, OSError)


def is_input_error(exc: BaseException) -> bool:
    return isinstance(exc, input_error_classes())


def message(exc: BaseException) -> str:
    """The one stderr line for an input error: 'kcc: ErrorName: what and where'."""
    return f"kcc: {type(exc).__name__}: {exc}"
