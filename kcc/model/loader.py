"""The one way to get a model: `kcc.model.load(...)` -> a ready Synthesizer.

Every front-end (kcc say / synth / export / serve / wyoming / batch, the Python API kcc.Kokoro)
asks for a model by what a user can choose: the checkpoint, the precision, the kernel threads,
the frame plan, a -march=native build. This module turns those into the compiler's BuildOptions
(release flags, precision passes, what this CPU runs natively), maps the cached artifact
(kcc.model.model_store: compiled on first use), and sets the kernel threads and weight release,
so nothing above kcc.model assembles compiler options itself.
"""
from __future__ import annotations

import os
import sys

from kcc.compiler.build import release_options
from kcc.compiler.precision import PrecisionError, add_precision_argument, check as check_precision_name, with_precision
from kcc.compiler.runtime import WeightReleaseError
# available_cores / available_memory: front-ends size their workers with the facade's view of the machine.
from kcc.compiler.threads import FreeCores, available_cores, available_memory, resolve_threads  # noqa: F401
from kcc.model import model_store
from kcc.model.pipeline import DEFAULT_MAX_FRAMES, Synthesizer

# max_frames: the back stages' arena grows with it. 8192 frames (3.4 min) hold a full
# 510-phoneme chunk even at speed 0.25; below 64 a single slow token may not fit.
MIN_MAX_FRAMES, MAX_MAX_FRAMES = 64, 8192


class ModelOptionsError(ValueError):
    """An option of load() is out of its range; the message names the option and the range."""


def check_max_frames(value) -> int:
    """None: the default plan (kcc.model.pipeline.DEFAULT_MAX_FRAMES); else a whole number in range."""
    if value is None:
        return DEFAULT_MAX_FRAMES
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_MAX_FRAMES <= value <= MAX_MAX_FRAMES:
        raise ModelOptionsError(f"--max-frames must be a whole number from {MIN_MAX_FRAMES} to {MAX_MAX_FRAMES}, "
                                f"got {value!r}")
    return value


def check_precision(value: str | None) -> str | None:
    """fp32 / bf16 / int8, refused by name (PrecisionError) before any compile; None: the default."""
    return None if value is None else check_precision_name(value)


def load(checkpoint: str | os.PathLike | None = None, *, precision: str | None = None, threads: int | None = None,
         max_frames: int | None = None, native: bool = False, release_weights: bool = False,
         log=sys.stderr) -> Synthesizer:
    """The compiled Synthesizer: the real Kokoro-82M (fetched once) when checkpoint is None, else
    the kokoro-v1_0.pth-layout checkpoint at that path. The first call per model and options
    compiles it into the cache (minutes); later ones map the artifact (well under a second).

    precision: fp32 / bf16 / int8 (None: $KCC_PRECISION, else fp32). threads: kernel threads,
    1..cores (None: $OMP_NUM_THREADS, else every core this process may use less those other
    processes keep busy, measured before each stage). max_frames: frames planned per chunk
    (None: 2048, 51 s of audio). release_weights: drop each weight from the resident set once
    used (a one-shot process: the peak is about one op's weights; every later synthesis faults
    them back in); a model compiled in memory keeps them. log: where progress goes (None: silent).
    Raises ModelOptionsError / PrecisionError / ThreadsError for a bad option, CheckpointError for
    a bad checkpoint, BuildError when compiling fails."""
    max_frames = check_max_frames(max_frames)
    check_precision(precision)
    n = resolve_threads(threads)
    options = with_precision(release_options(native), precision)
    synth = model_store.load_model(checkpoint, options, max_frames=max_frames, log=log)
    # Unless a count was asked for, each stage leaves out the cores other processes keep busy:
    # beside a busy neighbour 2 threads run slower than 1 (kcc.compiler.threads.FreeCores).
    fixed = threads is not None or "OMP_NUM_THREADS" in os.environ
    synth.set_threads(n if fixed else FreeCores(n))
    if release_weights:
        drop_weights_once_used(synth)
    return synth


def drop_weights_once_used(synth) -> None:
    """Drop each weight from the resident set once its last op ran, and each stage's blob after
    the stage (Synthesizer.release_weights_after_use; they stay in the page cache): a one-shot
    process then peaks at about one op's weights, not all of them (fp32 on a Zen 3: 347 -> 94 MB,
    bench/results/bench_say_warm_zen3.md). A model compiled in memory on a cold start is not
    file-mapped: it keeps them. Test doubles without the method are left alone."""
    release = getattr(synth, "release_weights_after_use", None)
    try:
        if release is not None:
            release()
    except WeightReleaseError:
        pass


# What the front-ends need of the compiler, through here (speech never reaches into kcc.compiler):
# the --precision option and its error, and the cores a worker count is sized against.
__all__ = ["load", "drop_weights_once_used", "add_precision_argument", "available_cores", "check_max_frames", "check_precision", "ModelOptionsError", "PrecisionError",
           "MIN_MAX_FRAMES", "MAX_MAX_FRAMES", "Synthesizer"]
