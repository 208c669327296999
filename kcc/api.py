"""kcc as a Python library: `Kokoro` (kokoro-onnx's shape) and `KPipeline` (upstream kokoro's).

    import kcc
    tts = kcc.Kokoro()                                   # maps the cached compiled model once
    samples, rate = tts.create("Hello there.", voice="jf_alpha", speed=1.0)
    for chunk in tts.stream(long_text):                  # each chunk as soon as it is made
        play(chunk.audio)                                # chunk.text, .phonemes, .words too
    async for chunk in tts.astream(long_text): ...       # the event loop is never blocked

One Kokoro holds one compiled model and one worker thread: every G2P and synthesis step of
every call runs there, one at a time, so a Kokoro is safe to share between threads and tasks,
holds one synthesis arena (~600 MB at the default frame plan), and never runs a G2P backend
(misaki, OpenJTalk, espeak-ng: not thread-safe) on two threads at once. For parallel
synthesis, make one Kokoro per core you want busy (each maps the same compiled artifact).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import re
import threading
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import AsyncIterator, Callable, Iterator, Sequence

import numpy as np

from kcc.model import loader
from kcc.model.kokoro import MAX_SPEED, MIN_SPEED, SAMPLE_RATE
from kcc.speech.engine import (
    NothingToSay,
    SayError,
    check_seed,
    check_speed,
    iter_plan,
    resolve_voice,
    synthesize_chunks,
)
from kcc.speech.g2p.g2p import G2P, G2PError, canonical_language
from kcc.speech.g2p.overrides import load_lexicon
from kcc.speech.voices import voice_catalog

_END = object()


@dataclass(frozen=True)
class WordTiming:
    """One word of a chunk and where it sounds, in seconds from the start of the whole text."""
    word: str
    phonemes: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class SpeechChunk:
    """One synthesised chunk: its text, its phonemes, its audio (float32, 24 kHz mono) and its
    words' timings; offset_s: where its audio starts in the whole text's."""
    index: int
    text: str
    phonemes: str
    audio: np.ndarray
    words: tuple[WordTiming, ...]
    offset_s: float
    durations: np.ndarray               # int32 frames (600 samples) per token, the boundary tokens included
    sample_rate: int = SAMPLE_RATE


class Kokoro:
    """Kokoro-82M compiled to C, loaded once. Keywords as kcc.model.load: checkpoint (None: the
    real Kokoro-82M v1.0, fetched on first use), precision (fp32 / bf16 / int8), threads (kernel
    threads), max_frames (frames planned per chunk). voices_dir: directories where voice names
    are also looked up; lexicon: a pronunciation file (kcc say --lexicon); g2p: the English G2P
    backend ('auto', 'lexicon', 'misaki', 'espeak'); log: where compile progress goes (None: silent).

    Errors are the CLI's named classes, all exported from kcc: SayError (text, speed), G2PError,
    VoiceError, SynthesisError, ModelOptionsError / PrecisionError (options), CheckpointError."""

    sample_rate: int = SAMPLE_RATE

    def __init__(self, checkpoint: str | Path | None = None, *, precision: str | None = None,
                 threads: int | None = None, max_frames: int | None = None,
                 voices_dir: Sequence[str | Path] = (), lexicon: str | Path | None = None, g2p: str = "auto",
                 log=None):
        self._search = [Path(d) for d in voices_dir]
        self._backend = g2p
        self._lexicon = None
        if lexicon is not None:
            self._lexicon = load_lexicon(lexicon)
        self.synthesizer = loader.load(checkpoint, precision=precision, threads=threads, max_frames=max_frames,
                                       log=log)
        self._g2ps: dict[str, G2P] = {}
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kcc-kokoro")
        self._closed = threading.Event()

    # -- the voices -----------------------------------------------------------------------------
    def get_voices(self) -> list[str]:
        """The voice names this Kokoro knows (the real model's and those in voices_dir)."""
        return list(voice_catalog(self._search))

    # -- speaking -------------------------------------------------------------------------------
    def create(self, text: str, voice: str | np.ndarray | None = None, speed: float = 1.0, lang: str = "auto",
               seed: int = 0) -> tuple[np.ndarray, int]:
        """The whole text's audio: (float32 samples, 24000)."""
        parts = [c.audio for c in self.stream(text, voice, speed, lang, seed)]
        return (np.concatenate(parts) if parts else np.zeros(0, np.float32)), SAMPLE_RATE

    def stream(self, text: str, voice: str | np.ndarray | None = None, speed: float = 1.0, lang: str = "auto",
               seed: int = 0) -> Iterator[SpeechChunk]:
        """Yield each chunk as soon as it is made (the first one short, so audio starts early).
        Text, speed, voice and the first chunk's G2P are checked by this call, before the first
        synthesis: a bad request raises here, not at the first next()."""
        return self._drive(self._run(self._steps, text, voice, speed, lang, seed, {}))

    async def astream(self, text: str, voice: str | np.ndarray | None = None, speed: float = 1.0,
                      lang: str = "auto", seed: int = 0) -> AsyncIterator[SpeechChunk]:
        """stream() as an async generator: each step runs on this Kokoro's worker thread, the
        event loop waits for it without blocking."""
        loop = asyncio.get_running_loop()
        self._check_open()
        steps = await loop.run_in_executor(self._worker, self._steps, text, voice, speed, lang, seed, {})
        while True:
            self._check_open()
            chunk = await loop.run_in_executor(self._worker, next, steps, _END)
            if chunk is _END:
                return
            yield chunk

    async def create_stream(self, text: str, voice: str | np.ndarray | None = None, speed: float = 1.0,
                            lang: str = "auto", seed: int = 0) -> AsyncIterator[tuple[np.ndarray, int]]:
        """kokoro-onnx's async stream: yields (float32 samples, 24000) per chunk."""
        async for chunk in self.astream(text, voice, speed, lang, seed):
            yield chunk.audio, chunk.sample_rate

    def close(self) -> None:
        """Stop the worker thread (its synthesis arena is freed with it); later calls fail."""
        self._closed.set()
        self._worker.shutdown(wait=True)

    def __enter__(self) -> "Kokoro":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------------
    def _g2p(self, lang: str) -> G2P:
        lang = canonical_language(lang)
        g = self._g2ps.get(lang)
        if g is None:
            g = self._g2ps[lang] = G2P(lang, self._backend, lexicon=self._lexicon)
        return g

    def _steps(self, text, voice, speed, lang, seed, plan_opts: dict,
               chunk_speed: Callable | None = None) -> Iterator[SpeechChunk]:
        """The chunk generator (runs on the worker). Everything cheap is checked here, at once:
        the generator returned has its first chunk planned already, so a bad text or voice fails
        the call itself, not the first next()."""
        if not isinstance(text, (str, bytes)):
            raise SayError(f"text must be a string, got {type(text).__name__}")
        seed = check_seed(seed)
        pack = resolve_voice(voice, self._search)
        plan_speed = MIN_SPEED if chunk_speed is not None else speed     # a chunk fits at its slowest speed
        chunks = iter_plan(text, self._g2p(lang), speed=plan_speed, max_frames=self.synthesizer.max_frames,
                           **plan_opts)
        first = next(chunks)
        return self._chunks(first, chunks, pack, speed, seed, chunk_speed)

    def _chunks(self, first, rest, pack, speed, seed, chunk_speed) -> Iterator[SpeechChunk]:
        planned = chain([first], rest)
        if chunk_speed is None:
            made = synthesize_chunks(planned, self.synthesizer, pack, speed, seed)
        else:                       # a speed per chunk (KPipeline's callable): each chunk on its own
            made = (c for i, enc in enumerate(planned)
                    for c in synthesize_chunks([enc], self.synthesizer, pack, chunk_speed(enc), seed + i))
        offset = 0
        for i, c in enumerate(made):
            base = offset / SAMPLE_RATE
            shift = 0.0 if chunk_speed is None else base
            words = tuple(WordTiming(w["word"], w["phonemes"], round(float(w["start_s"]) + shift, 6),
                                     round(float(w["end_s"]) + shift, 6)) for w in c.words)
            yield SpeechChunk(i, c.encoded.text, c.encoded.phonemes, c.audio, words, round(base, 6), c.durations)
            offset += c.audio.size

    def _drive(self, steps: Iterator[SpeechChunk]) -> Iterator[SpeechChunk]:
        while True:
            chunk = self._run(next, steps, _END)
            if chunk is _END:
                return
            yield chunk

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise SayError("this Kokoro is closed")

    def _run(self, fn, *args):
        """fn(*args) on the worker thread (G2P and synthesis never run on two threads at once)."""
        self._check_open()
        return self._worker.submit(fn, *args).result()


# -- upstream kokoro's KPipeline -------------------------------------------------------------------
UPSTREAM_REPO = "hexgrad/Kokoro-82M"


class KPipelineError(ValueError):
    """A KPipeline argument kcc cannot honour (a GPU device, other weights by repo id, the
    transformer G2P, which needs torch); the message names it and what to do instead."""


_DEFAULT_MODELS: dict[tuple, Kokoro] = {}
_DEFAULT_LOCK = threading.Lock()


def _shared_kokoro(**kw) -> Kokoro:
    """One Kokoro per set of options in this process: KPipeline(lang_code='a') and
    KPipeline(lang_code='j') share a model, as upstream's users share one KModel between them."""
    key = tuple(sorted((k, str(v)) for k, v in kw.items()))
    with _DEFAULT_LOCK:
        if key not in _DEFAULT_MODELS:
            _DEFAULT_MODELS[key] = Kokoro(**kw)
        return _DEFAULT_MODELS[key]


class KPipeline:
    """A drop-in for kokoro 0.9.4's KPipeline, on kcc's compiled model (no torch).

    KPipeline(lang_code) takes upstream's codes ('a' American and 'b' British English, 'j'
    Japanese, 'z' Mandarin, 'e' 'f' 'h' 'i' 'p'; or 'en-us', 'ja', ...). model: True (a Kokoro
    shared in this process, built with `kokoro_options`: checkpoint=, precision=, threads=...),
    a kcc.Kokoro, or False (G2P only: results carry no audio). Calling it yields one Result per
    chunk, with .graphemes, .phonemes and .audio (a float32 numpy array, 24 kHz) and unpacking
    as `gs, ps, audio`; .tokens holds the words' timings (kcc.api.WordTiming), .pred_dur the
    frames per token. Chunks are cut as kcc plans them (sized to the frame plan), so their
    boundaries may differ from upstream's."""

    @dataclass
    class Result:
        graphemes: str
        phonemes: str
        tokens: tuple[WordTiming, ...] | None = None
        output: SpeechChunk | None = None
        text_index: int | None = None

        @property
        def audio(self) -> np.ndarray | None:
            return None if self.output is None else self.output.audio

        @property
        def pred_dur(self) -> np.ndarray | None:
            return None if self.output is None else self.output.durations

        def __iter__(self):
            yield self.graphemes
            yield self.phonemes
            yield self.audio

        def __getitem__(self, index):
            return [self.graphemes, self.phonemes, self.audio][index]

        def __len__(self) -> int:
            return 3

    def __init__(self, lang_code: str, repo_id: str | None = None, model: Kokoro | bool = True, trf: bool = False,
                 en_callable: Callable[[str], str] | None = None, device: str | None = None, **kokoro_options):
        if repo_id not in (None, UPSTREAM_REPO):
            raise KPipelineError(f"repo_id {repo_id!r}: kcc speaks {UPSTREAM_REPO} v1.0; for other weights in its "
                                 "layout pass checkpoint='path/to/model.pth'")
        if device not in (None, "cpu"):
            raise KPipelineError(f"device {device!r}: kcc runs on the CPU (generated C); leave device out")
        if trf:
            raise KPipelineError("trf=True: the transformer G2P needs torch; kcc offers g2p='misaki' (spaCy's "
                                 "small tagger) through kcc.Kokoro(g2p=...)")
        if en_callable is not None:
            raise KPipelineError("en_callable is not supported: kcc's Japanese and Mandarin G2P read English "
                                 "words with its own English backend")
        if not isinstance(lang_code, str):
            raise KPipelineError(f"lang_code must be a string such as 'a', got {type(lang_code).__name__}")
        self.lang_code = lang_code.lower()
        self.language = canonical_language(self.lang_code)       # G2PError names the codes there are
        self.repo_id = UPSTREAM_REPO
        if isinstance(model, Kokoro):
            self.model: Kokoro | None = model
        elif model is True:
            self.model = _shared_kokoro(**kokoro_options)
        elif model is False:
            self.model = None
        else:
            raise KPipelineError(f"model must be True, False or a kcc.Kokoro, got {type(model).__name__}")
        self._g2p: G2P | None = None

    def __call__(self, text: str | list[str], voice: str | np.ndarray | None = None,
                 speed: float | Callable[[int], float] = 1, split_pattern: str | None = r"\n+",
                 model: Kokoro | None = None) -> Iterator["KPipeline.Result"]:
        model = model or self.model
        if model is not None and voice is None:
            raise KPipelineError('Specify a voice: pipeline(text="Hello world!", voice="af_heart")')
        if hasattr(voice, "detach"):                  # a torch tensor loaded as upstream's README shows
            voice = voice.detach().cpu().numpy()
        if not callable(speed):
            check_speed(speed)                        # refused now, not at the first chunk
        if isinstance(text, str):
            segments = re.split(split_pattern, text.strip()) if split_pattern else [text]
        else:
            segments = list(text)
        return self._results(segments, voice, speed, model)

    def _results(self, segments, voice, speed, model) -> Iterator["KPipeline.Result"]:
        for index, graphemes in enumerate(segments):
            if not graphemes.strip():
                continue
            try:
                if model is None:
                    for enc in iter_plan(graphemes, self._g2p_only(), first_limit=None):
                        yield self.Result(enc.text, enc.phonemes, text_index=index)
                    continue
                chunk_speed = (lambda enc: check_speed(speed(len(enc.phonemes)))) if callable(speed) else None
                steps = model._run(model._steps, graphemes, voice, 1.0 if chunk_speed else speed, self.language, 0,
                                   {"first_limit": None}, chunk_speed)
            except NothingToSay:                      # upstream skips a segment with no phonemes
                continue
            for chunk in model._drive(steps):
                yield self.Result(chunk.text, chunk.phonemes, chunk.words, chunk, index)

    def _g2p_only(self) -> G2P:
        if self._g2p is None:
            self._g2p = G2P(self.language)
        return self._g2p
