"""The whole model: stage circuits run in order over one name-keyed environment of arrays.

Each stage circuit reads its inputs by name from the environment and adds its outputs to it,
so chaining is dataflow, not glue code: every model operation runs in generated C; Python only
hands arrays from one compiled circuit to the next. Kokoro's frame count is data-dependent, so
the run has two phases: the front stages end with integer durations, and the back stages are
planned for a max frame count F and run with F = sum(durations) (checked again in C).
"""
from __future__ import annotations

import contextvars
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kcc.compiler.build import BuildOptions
from kcc.compiler.runtime import CompiledCircuit, WeightReleaseError, aligned_empty, is_file_mapped, trim_scratch
from kcc.compiler.threads import available_cores, available_memory
from kcc.model import kokoro
from kcc.weights.checkpoint import Checkpoint, load_checkpoint

FRONT = list(kokoro.FRONT)
BACK = list(kokoro.BACK)
NOISE = kokoro.NOISE                  # parity runs replace it with upstream's own random draws
CONTEXT_TOKENS = kokoro.CONTEXT_TOKENS
# 51 s of audio per chunk at 40 frames/s (600 samples a frame): a full 510-phoneme chunk of
# real speech takes ~1,100 frames at speed 1 (measured 986 for 456 phonemes), more when slower.
DEFAULT_MAX_FRAMES = kokoro.MAX_FRAMES
# Stages compiled at once on a first run: each holds its lowered weights (up to ~200 MB for the
# generator) until its blob is written, so more would cost memory for little (7 stages, one large).
# Arena kept past the frame-proportional part after each synthesis (Synthesizer.trim_arena): the
# front stages' extents at 510 phonemes (real model: 7.5 MB at most) and rounding.
ARENA_SLACK_BYTES = 8 << 20
MAX_COMPILE_WORKERS = 4
# Below this much available memory the stages compile one at a time: the real model's first
# compile peaks at 1.47 GB one at a time, 1.59 GB two at a time (Zen 3, /usr/bin/time).
PARALLEL_COMPILE_MIN_BYTES = 3 << 30


def frame_dims(frames: int) -> dict[str, int]:
    """The back stages' frame dims for `frames` alignment frames: F, and N = 2F f0 frames."""
    return {"F": frames, "N": 2 * frames}


def stage_dims(doc: dict, max_frames: int) -> dict[str, int] | None:
    """The frame dims a stage circuit is planned for (None: a front stage, planned as shipped)."""
    return {d: n for d, n in frame_dims(max_frames).items() if d in doc["dims"]} or None


class SynthesisError(Exception):
    """Synthesis cannot proceed; the message names the stage and the problem."""


class SynthesisCancelled(SynthesisError):
    """The caller's cancel event was set: the synthesis stopped between two stages."""


# A server or batch job sets this (in the thread that synthesises) to an Event; every stage
# boundary checks it, so a cancelled request stops within one stage, not one whole chunk.
CANCEL: contextvars.ContextVar = contextvars.ContextVar("kcc_cancel", default=None)
# Kernel threads for the stages this thread runs: None (set_threads' count), an int, or a
# callable read before each stage (a server shares the cores out as syntheses start and end).
THREADS: contextvars.ContextVar = contextvars.ContextVar("kcc_threads", default=None)


class FrameOverflow(SynthesisError):
    """The durations need more frames than the back stages were planned for (raised before
    they run, so a caller can split the chunk and retry at the cost of the front stages)."""

    def __init__(self, frames: int, planned: int):
        super().__init__(f"the utterance needs {frames} frames, over the planned {planned}; "
                         "split the text or raise max_frames")
        self.frames, self.planned = frames, planned


@dataclass
class Synthesis:
    audio: np.ndarray                     # float32 [samples] at 24 kHz
    durations: np.ndarray                 # int32 [tokens], alignment frames per token
    checkpoints: dict[str, np.ndarray] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


# Kokoro takes every input for a whole utterance: it draws the last phoneme out (final
# lengthening, 17 frames for the "n" of "The quick brown" against ~2-4 inside a sentence) and
# adds ~0.35 s of trailing silence. Where the text goes on (a chunk cut inside a sentence) that
# is a drawn-out word and a long pause mid-sentence. Whisper tiny.en on server-chunked sentences
# (bench/results/chunk_join_wer.md, real model, fp32 / int8): WER 6.9 / 6.9% as predicted,
# 3.8 / 4.6% continuing (whole sentences 2.3%). The next chunk's leading silence stays: the
# model makes the first phoneme's onset in it (cutting the first chunk's to 4 frames: 16-17%).
CONTINUING_TRAIL_FRAMES = 2      # the trailing boundary token, at most (50 ms)
CONTINUING_LAST_RATIO = 2.0      # the last token, at most this times the median of the others


def continuing_durations(d: np.ndarray) -> np.ndarray:
    """Durations [lead, tokens..., trail] of ids after which the text goes on: the trailing
    silence at most CONTINUING_TRAIL_FRAMES, the last token at most CONTINUING_LAST_RATIO times
    the median of the tokens before it (at least 1 frame; kept when it is the only one)."""
    d = np.array(d, copy=True)
    d[-1] = min(int(d[-1]), CONTINUING_TRAIL_FRAMES)
    if d.size >= 4:
        cap = max(1, int(round(CONTINUING_LAST_RATIO * float(np.median(d[1:-2])))))
        d[-2] = min(int(d[-2]), cap)
    return d


class Synthesizer:
    def __init__(self, checkpoint: str | Path | Checkpoint, options: BuildOptions = BuildOptions(),
                 max_frames: int = DEFAULT_MAX_FRAMES, stages: list[str] | None = None, progress=None):
        """progress: called as progress(i, n, stage) before each stage compiles (a first run's
        feedback: the generator alone takes most of the time)."""
        # The compiler is imported here, not at the top: a Synthesizer mapped from a compiled
        # artifact (every warm `kcc say`) never needs it, and it costs 57 ms of imports.
        from kcc.circuits import load_circuit
        from kcc.compiler.driver import compile_circuit

        # Not kept: every circuit copies what it needs into its weight blob, so the checkpoint's
        # own arrays (~330 MB at the full config) are freed once the caller drops them too.
        ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
        self.checkpoint_path = ckpt.path
        self.stages = stages or FRONT + BACK
        self.max_frames = max_frames
        started = iter(range(len(self.stages)))
        announce = threading.Lock()

        def compile_stage(name: str) -> CompiledCircuit:
            with announce:
                if progress is not None:
                    progress(next(started), len(self.stages), name)
            doc = load_circuit(name)
            return compile_circuit(doc, ckpt, options, dims=stage_dims(doc, max_frames))

        # The stages compile side by side: each is its own C file and compiler process (~90% of
        # a first run's time), so one stage's lowering overlaps another's compile. The back
        # stages go first: the generator is the longest, and a long one started last idles a core.
        memory = available_memory()
        workers = min(len(self.stages), available_cores(), MAX_COMPILE_WORKERS,
                      1 if memory is not None and memory < PARALLEL_COMPILE_MIN_BYTES else MAX_COMPILE_WORKERS)
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kcc-compile") as pool:
            futures = {name: pool.submit(compile_stage, name) for name in reversed(self.stages)}
            try:
                self.circuits: dict[str, CompiledCircuit] = {name: futures[name].result() for name in self.stages}
            except BaseException:
                for f in futures.values():
                    f.cancel()
                raise
        self._arenas = threading.local()
        self.threads = None
        self.release_weights = False
        self.model_id, self.label = str(self.checkpoint_path), ""

    @classmethod
    def from_circuits(cls, circuits: dict[str, CompiledCircuit], max_frames: int, model_id: str,
                      label: str = "") -> "Synthesizer":
        """A Synthesizer over stages compiled earlier (kcc.compiler.artifact), in `circuits`' order."""
        self = cls.__new__(cls)
        self.checkpoint_path, self.model_id, self.label = None, model_id, label
        self.stages, self.max_frames, self.circuits = list(circuits), max_frames, dict(circuits)
        self._arenas = threading.local()
        self.threads = None
        self.release_weights = False
        return self

    def arena(self) -> np.ndarray:
        """This thread's arena, shared by the stages (they run one after another and copy their
        outputs out): its pages are faulted in once, not on every utterance."""
        a = getattr(self._arenas, "arena", None)
        if a is None:
            plans = [c.plan for c in self.circuits.values()]
            a = aligned_empty(max(p.arena_bytes for p in plans), max(p.alignment for p in plans))
            self._arenas.arena = a
        return a

    def trim_arena(self, frames: int) -> int:
        """After a synthesis of `frames` frames: keep this thread's arena pages that a chunk of that
        size uses and drop the rest from the resident set (kcc.compiler.runtime.trim_scratch), so
        a worker holds the arena of the chunk it made, not of the longest it ever made. The C
        places activations by the actual dims (plan.offsets_at) and the largest stage's extent
        grows linearly in the frames (the generator, real model: 17.6 / 43.9 / 175.8 / 600 MB at
        60 / 150 / 600 / 2048 frames), so arena x frames / max_frames (+ ARENA_SLACK_BYTES) keeps
        what the next chunk of that size touches; anything dropped wrongly only faults in again.
        Returns the bytes dropped."""
        a = getattr(self._arenas, "arena", None)
        if a is None:
            return 0
        keep = -(-a.nbytes * max(0, frames) // max(1, self.max_frames)) + ARENA_SLACK_BYTES
        return trim_scratch(a, keep)

    def release_weights_after_use(self, on: bool = True) -> None:
        """Drop weight pages from the resident set once used (they stay in the page cache): each
        weight after the last op reading it (CompiledCircuit.release_weights_as_used), and each
        stage's whole blob after the stage (CompiledCircuit.release_weights). A one-shot `kcc
        say` then peaks with about one op's weights resident, not a stage's or all of them. Each
        later synthesis faults them back in. Refused (WeightReleaseError) for weights that are
        not a read-only file mapping (a model compiled in memory, not mapped from its artifact)."""
        if on:
            for name, c in self.circuits.items():
                if c.weights.nbytes and not is_file_mapped(c.weights):
                    raise WeightReleaseError(f"stage {name}: the weights are not a read-only file mapping "
                                             "(a model compiled in memory); there is nothing to release them to")
        for c in self.circuits.values():
            if c.weights.nbytes or not on:
                c.release_weights_as_used(on)
        self.release_weights = on

    def set_threads(self, n) -> int:
        """n kernel threads for every thread that synthesises, or a callable that gives the count
        before each stage (kcc.compiler.threads.FreeCores). OpenMP keeps the count per calling
        thread (omp_set_num_threads sets that thread's ICV), so a server's or `kcc say`'s worker
        threads would otherwise run at the default, every core; run() applies it in each."""
        self.threads = n
        return self._use_threads(n() if callable(n) else n)

    def _use_threads(self, n: int | None) -> int:
        if n is None or getattr(self._arenas, "threads", None) == n:
            return n or 0
        self._arenas.threads = n
        return min(c.set_threads(n) for c in self.circuits.values())

    def run(self, env: dict[str, np.ndarray], with_checkpoints: bool = False,
            skip: tuple[str, ...] = (), lead_frames: int | None = None,
            continues: bool = False) -> tuple[dict[str, np.ndarray], dict[str, float]]:
        """Run every stage (but `skip`) over `env`, which each stage extends with its outputs.

        Returns (checkpoints, seconds per stage). Frame dims no input carries (F, N) are set
        from the durations once the front stages produced them. lead_frames: at most this many
        frames for the leading boundary token (the silence the model puts before the first
        phoneme, ~0.3 s), cut before the back stages make them; None: as predicted. continues:
        the text goes on after these ids (continuing_durations)."""
        checkpoints: dict[str, np.ndarray] = {}
        seconds: dict[str, float] = {}
        known: dict[str, int] = {}
        frame_count = self.max_frames        # the arena kept after a run that never reached the durations
        for name, c in self.circuits.items():
            if name in skip:
                continue
            cancel = CANCEL.get()
            if cancel is not None and cancel.is_set():
                raise SynthesisCancelled(f"cancelled before stage {name}")
            missing = [i for i in c.graph.inputs if i not in env]
            if missing:
                raise SynthesisError(f"stage {name}: input(s) {missing} are produced by no earlier stage")
            want = THREADS.get() or self.threads
            self._use_threads(want() if callable(want) else want)
            t0 = time.perf_counter()
            given = {d: v for d, v in known.items() if d in c.graph.dims}
            result = c.run({i: env[i] for i in c.graph.inputs}, arena=self.arena(),
                           with_checkpoints=with_checkpoints, dims=given or None)
            if self.release_weights and c.weights.nbytes:
                c.release_weights()
            seconds[name] = time.perf_counter() - t0
            env.update(result.outputs)
            checkpoints.update(result.checkpoints)
            if "durations" in result.outputs:
                d = env["durations"].reshape(-1)
                if lead_frames is not None:
                    d[0] = min(int(d[0]), lead_frames)
                if continues:
                    d[:] = continuing_durations(d)
                frames = frame_count = int(env["durations"].sum())
                if frames > self.max_frames:
                    raise FrameOverflow(frames, self.max_frames)
                known = frame_dims(frames)
        self.trim_arena(frame_count)
        return checkpoints, seconds

    def synthesize(self, ids: list[int], ref_s: np.ndarray, speed: float = 1.0, seed: int = 0,
                   with_checkpoints: bool = False, lead_frames: int | None = None,
                   continues: bool = False) -> Synthesis:
        """Phoneme ids (without the boundary 0s) + a [1, 256] style row -> 24 kHz audio.

        `seed` drives the C RNG that replaces upstream's torch.rand/randn in the sine source.
        `lead_frames`: at most this many frames of leading silence (run()); None: upstream's.
        `continues`: the text goes on after these ids (a chunk cut inside a sentence): its end
        is drawn as a word boundary, not an utterance's (continuing_durations).
        """
        if not ids:
            raise SynthesisError("no phoneme ids to synthesise")
        if len(ids) + 2 > CONTEXT_TOKENS:
            raise SynthesisError(f"{len(ids)} phonemes exceed the {CONTEXT_TOKENS - 2}-phoneme context; "
                                 "split the text (kcc.speech.g2p.g2p chunks it)")
        ref_s = np.asarray(ref_s, dtype=np.float32).reshape(1, -1)
        if ref_s.shape != (1, kokoro.REF_S_DIM) or not np.isfinite(ref_s).all():
            raise SynthesisError(f"style must be {kokoro.REF_S_DIM} finite floats, got shape {ref_s.shape}")
        if not (np.isfinite(speed) and kokoro.MIN_SPEED <= speed <= kokoro.MAX_SPEED):
            # a guard for direct Synthesizer calls (every front door checks first: kcc.speech.request), in its words
            raise SynthesisError(f"speed must be between {kokoro.MIN_SPEED} and {kokoro.MAX_SPEED}, got {speed}")
        tokens = np.array([[0, *ids, 0]], dtype=np.int32)
        env = {"input_ids": tokens, "token_type_ids": np.zeros_like(tokens),
               "lengths": np.array([tokens.shape[1]], dtype=np.int32),
               "style_dec": ref_s[:, kokoro.STYLE_DEC].copy(), "style_pred": ref_s[:, kokoro.STYLE_PRED].copy(),
               "speed": np.array([speed], dtype=np.float32),
               "seed": np.array([seed & 0x7FFFFFFF], dtype=np.int32)}
        if lead_frames is not None and not (isinstance(lead_frames, int) and not isinstance(lead_frames, bool)
                                            and lead_frames >= 1):
            raise SynthesisError(f"lead_frames must be a whole number of frames >= 1, got {lead_frames!r}")
        if not isinstance(continues, bool):
            raise SynthesisError(f"continues must be True or False, got {continues!r}")
        checkpoints, seconds = self.run(env, with_checkpoints, lead_frames=lead_frames, continues=continues)
        audio = env["waveform"].reshape(-1)
        if not np.isfinite(audio).all():
            # The kernels are finite for finite inputs of the model's range; a style far outside
            # real voices' (|x| <= ~2) drives the decoder to inf. Refuse rather than write noise.
            raise SynthesisError(f"the synthesis produced {int((~np.isfinite(audio)).sum())} non-finite samples "
                                 "(a voice style far outside real voices' range?)")
        return Synthesis(audio, env["durations"].reshape(-1).astype(np.int32), checkpoints, seconds)
