"""Synthesis jobs off the event loop: admission, bounded threads, deadlines, cancellation.

A request becomes a Job: its G2P -> chunks -> encoding loop runs on a thread of its own, each
chunk's synthesis on one of `workers` synthesis threads (kcc.speech.serve.scheduler: the most
urgent listener's chunk first; the compiled circuits release the GIL), and it hands the event
loop a stream of items: ('plan', chunks), ('bytes', encoded bytes, the Chunk or None for the
encoder's tail)..., then ('end', None); or ('error', ApiError) at any point. At most
`workers` + `max_queue` jobs are admitted; one more is refused at once with 503 + Retry-After.
A streamed request's first chunks are short and grow, each ending at a boundary of the text
(kcc.speech.request.chunking: fixed sizes, never measured load); a whole file is planned as
`kcc say` plans it, so the same request gives the same bytes at any load and equals say's samples.
Between chunks the job stops if the client went away (Job.cancel) or if the next chunk, at the
measured seconds per phoneme, would end past the request's deadline (504); the server plans
chunks of at most `chunk_phonemes`, so one chunk's time is bounded too. G2P, before the first
chunk, runs in pieces of at most G2P_PIECE_CHARS characters with the same checks between them
(BoundedG2P): the backends' cost grows faster than linearly in a piece (OpenJTalk on 2000 kana
without punctuation: 14 s; in pieces of 200: ~0.07 s each, 1 s for 4096), so a dropped or
overdue request stops within one piece and the backends' shared lock is held that long at most.
"""
from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from kcc.speech.g2p.g2p import G2PError
from kcc.model.pipeline import DEFAULT_MAX_FRAMES, SynthesisCancelled
from kcc.speech.engine import SayError, plan, synthesize_chunks
from kcc.speech.request import chunking
from kcc.speech.text import MAX_PHONEMES, pieces
from kcc.speech.audio.encoder import Encoder
from kcc.speech.serve.limits import Limits  # noqa: F401  (re-exported: kcc.speech.serve.service.Limits)
from kcc.speech.serve.request import ApiError, SpeechRequest
from kcc.speech.serve.idle_memory import release_idle_memory
from kcc.speech.serve.scheduler import ChunkScheduler
from kcc.speech.audio.timestamps import SAMPLE_RATE
from kcc.speech.serve.voice_set import VoiceRequestError, VoiceSet
from kcc.speech.voices import VoiceError, speaking

log = logging.getLogger("kcc.speech.serve")

# The most characters one G2P call gets in the server (kcc.speech.text.pieces cuts at a sentence
# end, else a space): measured on OpenJTalk, random kana without punctuation (Xeon Sapphire
# Rapids, 2 cores): 100 chars 0.03 s, 200 0.03-0.07 s, 300 0.11-0.14 s, 400 0.28-0.32 s, 2000 14 s.
G2P_PIECE_CHARS = 200


class G2PInterrupted(G2PError):
    """G2P stopped between pieces: the request was cancelled (error None) or is past its
    deadline (error: the 504). A G2PError, so kcc.speech.engine passes it through unwrapped."""

    def __init__(self, error: ApiError | None = None):
        super().__init__(error.message if error else "the request was cancelled during G2P")
        self.error = error


class BoundedG2P:
    """A job's G2P: the text in pieces of G2P_PIECE_CHARS, the job's cancel and deadline checked
    before each (G2PInterrupted)."""

    def __init__(self, g2p, job: "Job", timeout_s: float):
        self.g2p, self.job, self.timeout_s = g2p, job, timeout_s

    def __call__(self, text: str):
        words = []
        for piece, spaced in pieces(text, G2P_PIECE_CHARS):
            if self.job.cancel.is_set():
                raise G2PInterrupted()
            if time.monotonic() > self.job.deadline:
                raise G2PInterrupted(ApiError(504, f"reading the text exceeded this server's {self.timeout_s:g} s "
                                                   "request limit"))
            got = self.g2p(piece)
            if got and spaced:
                got[-1].whitespace = True
            words += got
        return words


def shutting_down() -> ApiError:
    return ApiError(503, "server is shutting down", headers={"Retry-After": "5"})


class Job:
    def __init__(self, loop: asyncio.AbstractEventLoop, deadline: float, streamed: bool = True):
        self.loop, self.deadline, self.streamed = loop, deadline, streamed
        self.items: asyncio.Queue = asyncio.Queue()
        self.cancel = threading.Event()
        self.started = False             # its first chunk is being synthesised (it is no longer queued)
        self.arrived = time.monotonic()
        self.first_audio: float | None = None
        self.audio_s = 0.0               # audio handed to the client so far

    def urgency(self) -> tuple[int, float]:
        """The scheduler's key: every listener's first chunk before anyone's next one (0, by
        arrival), then by when the listener runs out of audio (1: first audio + audio sent; a
        job nobody plays before its end, by arrival). A listener with audio has at least its
        first chunk (~0.3 s of leading silence and a few words) to play while a newcomer's first
        chunk is made; a newcomer has nothing."""
        if self.first_audio is None:
            return (0, self.arrived)
        return (1, self.first_audio + self.audio_s if self.streamed else self.arrived)

    def emit(self, *item) -> None:
        try:
            self.loop.call_soon_threadsafe(self.items.put_nowait, item)
        except RuntimeError:            # the loop is closed: nobody is listening any more
            self.cancel.set()


class SpeechService:
    def __init__(self, synth, g2p_for, voices: VoiceSet, limits: Limits | None = None,
                 default_language: str = "auto"):
        """g2p_for(language) -> a G2P callable (raises G2PError for a language it cannot do)."""
        self.synth, self.g2p_for, self.voices = synth, g2p_for, voices
        self.default_language = default_language
        self.limits = limits or Limits()
        self.pool = ThreadPoolExecutor(self.limits.workers + self.limits.max_queue, thread_name_prefix="kcc-job")
        self.scheduler = ChunkScheduler(self.limits.workers, self.limits.cores,
                                        on_idle=lambda: release_idle_memory(synth))
        self._lock = threading.Lock()
        self.running = self.waiting = 0
        self.jobs: set[Job] = set()
        self.seconds_per_phoneme = 0.0  # measured; 0 until the first chunk
        self.draining = False
        self.warmup = None               # kcc.speech.serve.warmup.Warmup once started; None: nothing to wait for

    def ready_state(self) -> str:
        """'ready', 'warming' (Warmup running), 'failed' (it raised) or 'draining'."""
        if self.draining:
            return "draining"
        return "ready" if self.warmup is None else self.warmup.state()

    # -- admission ------------------------------------------------------------------------------
    def retry_after(self) -> int:
        return max(1, math.ceil(self.seconds_per_phoneme * self.limits.chunk_phonemes))

    def submit(self, req: SpeechRequest, loop: asyncio.AbstractEventLoop) -> Job:
        try:
            language, parts = self.decide(req)
        except VoiceRequestError as exc:
            raise ApiError(400, str(exc), "voice") from None
        with self._lock:
            if self.draining:
                raise shutting_down()
            if self.running + self.waiting >= self.limits.workers + self.limits.max_queue:
                raise ApiError(503, f"server busy: {self.running} syntheses running and {self.waiting} waiting; "
                                    "retry later", headers={"Retry-After": str(self.retry_after())})
            self.waiting += 1
            job = Job(loop, time.monotonic() + self.limits.request_timeout_s, req.stream or req.sse)
            self.jobs.add(job)
        self.pool.submit(self._run, job, req, language, parts)
        return job

    def decide(self, req: SpeechRequest) -> tuple[str, tuple]:
        """(language, voice parts) as every door decides them (kcc.speech.voices.speaking): the
        request's voice (an OpenAI alias mapped to its catalog voice) or the operator's --voice,
        else the language's own; the request's lang, else this server's --lang."""
        lang = req.lang if req.lang != "auto" else self.default_language
        voice = req.voice if req.voice else (self.voices.default if self.voices.fixed_default else None)
        if voice is not None:
            voice = self.voices.canonical(voice)
        language, spec = speaking(voice, lang, req.text, offered=self.voices.voices)
        if voice is None and spec not in self.voices.voices:      # the language's voice is not offered here
            spec = self.voices.default
        return language, self.voices.resolve(spec)

    async def next_item(self, job: Job):
        """The job's next item; past its deadline a 504 (a running job gets a grace for the chunk
        in flight, which it is about to report on its own; a queued one gets none)."""
        remaining = job.deadline - time.monotonic()
        try:
            return await asyncio.wait_for(job.items.get(), max(0.0, remaining) + (5.0 if job.started else 0.0))
        except TimeoutError:
            job.cancel.set()
            return ("error", ApiError(504, f"synthesis exceeded this server's {self.limits.request_timeout_s:g} s "
                                           "request limit"))

    def close(self) -> None:
        """Stop taking jobs, stop the running ones at their next chunk, answer the queued ones
        503, wait for the threads."""
        with self._lock:
            self.draining = True
            jobs = list(self.jobs)
        for job in jobs:
            job.cancel.set()
            if not job.started:
                job.emit("error", shutting_down())
        self.scheduler.close()
        self.pool.shutdown(wait=True, cancel_futures=True)

    def chunk_plan(self, req: SpeechRequest) -> dict:
        """plan()'s limit, first_limit and min_rest for a request: a whole file as `kcc say` plans
        it (the model's limit, chunks ending where the text does); a stream in chunks of at most
        chunk_phonemes, the first ones short (kcc.speech.request.chunking). Never from load."""
        if not (req.stream or req.sse):
            return {"limit": MAX_PHONEMES, **chunking(False)}
        lim = self.limits
        return {"limit": lim.chunk_phonemes, **chunking(True, lim.chunk_phonemes, lim.first_chunk_phonemes)}

    # -- the worker ----------------------------------------------------------------------------
    def _start(self, job: Job) -> None:
        """The job's first chunk reaches a synthesis thread: it counts as running from here."""
        with self._lock:
            self.waiting -= 1
            self.running += 1
        job.started = True
        if time.monotonic() > job.deadline:
            raise ApiError(504, "the request waited for a synthesis slot past its deadline")

    def _synthesize(self, job: Job, ids, ref_s, speed, seed, **opts):
        """One synthesis call, on a synthesis thread in the scheduler's order; its cost measured."""
        def work():
            if not job.started:
                self._start(job)
            t0 = time.monotonic()
            out = self.synth.synthesize(ids, ref_s, speed=speed, seed=seed, **opts)
            self._measure(time.monotonic() - t0, len(ids))     # for deadlines and Retry-After only
            return out
        return self.scheduler.run(job.urgency(), work, job.cancel)

    def _run(self, job: Job, req: SpeechRequest, lang: str, parts) -> None:
        encoder = None
        try:
            if job.cancel.is_set():
                raise shutting_down() if self.draining else ApiError(499, "the client went away")
            try:
                g2p = self.g2p_for(lang)
            except (G2PError, ValueError) as exc:
                raise ApiError(400, f"language {lang!r}: {exc}", "lang_code") from None
            pack = self.voices.pack(parts)
            # the whole text is planned first: a G2P error anywhere is a JSON error, not a cut
            # stream; chunk sizes also fit the synthesizer's frame plan at this speed
            chunks = plan(req.text, BoundedG2P(g2p, job, self.limits.request_timeout_s), speed=req.speed,
                          max_frames=getattr(self.synth, "max_frames", DEFAULT_MAX_FRAMES), **self.chunk_plan(req))
            encoder = Encoder(req.response_format, streaming=req.stream or req.sse)
            job.emit("plan", chunks)
            produced = synthesize_chunks(chunks, _Scheduled(self, job), pack, req.speed, req.seed,
                                         first_lead_frames=self.limits.first_lead_frames)
            for enc in chunks:           # the generator synthesises a chunk when asked for it
                if job.cancel.is_set():
                    produced.close()
                    raise SynthesisCancelled("the request was cancelled")
                self._check_deadline(job, len(enc.ids))
                chunk = next(produced)
                audio = chunk.audio * np.float32(req.volume) if req.volume != 1.0 else chunk.audio
                if job.first_audio is None:
                    job.first_audio = time.monotonic()
                job.audio_s += chunk.audio.size / SAMPLE_RATE
                job.emit("bytes", encoder.push(audio), chunk)
            job.emit("bytes", encoder.finish(), None)
            job.emit("end", None)
        except ApiError as exc:
            job.emit("error", exc)
        except G2PInterrupted as exc:
            job.emit("error", exc.error or self._cancelled())
        except (SayError, G2PError) as exc:
            job.emit("error", ApiError(400, str(exc), "input"))
        except VoiceError as exc:         # the message names files: for the log, not the client
            log.error("voice %s: %s", parts, exc)
            job.emit("error", ApiError(500, "the voice could not be loaded; see the server log"))
        except SynthesisCancelled:        # the client went away (or the deadline passed): whoever still
            # waits on the items (a stream's body, its deadline) ends now rather than at the deadline
            job.emit("error", self._cancelled())
        except Exception as exc:          # SynthesisError, KccRunError: the message names the stage
            log.exception("synthesis failed")
            job.emit("error", ApiError(500, f"synthesis failed: {type(exc).__name__}: {exc}"))
        finally:
            if encoder is not None:
                encoder.close()
            with self._lock:
                if job.started:
                    self.running -= 1
                else:
                    self.waiting -= 1
                self.jobs.discard(job)

    def _cancelled(self) -> ApiError:
        return shutting_down() if self.draining else ApiError(499, "the request was cancelled")

    def _check_deadline(self, job: Job, n_ids: int) -> None:
        expected = self.seconds_per_phoneme * n_ids
        if time.monotonic() + expected > job.deadline:
            raise ApiError(504, f"synthesis would exceed this server's {self.limits.request_timeout_s:g} s "
                                "request limit")

    def _measure(self, seconds: float, n_ids: int) -> None:
        rate = seconds / max(1, n_ids)
        with self._lock:                 # a moving average over recent chunks of all requests
            self.seconds_per_phoneme = rate if not self.seconds_per_phoneme else 0.8 * self.seconds_per_phoneme + 0.2 * rate


class _Scheduled:
    """The synthesizer as one job's synthesize_chunks sees it: every call goes through the
    service's scheduler."""

    def __init__(self, service: SpeechService, job: Job):
        self.service, self.job = service, job
        self.max_frames = getattr(service.synth, "max_frames", DEFAULT_MAX_FRAMES)

    def synthesize(self, ids, ref_s, speed: float = 1.0, seed: int = 0, **opts):
        return self.service._synthesize(self.job, ids, ref_s, speed, seed, **opts)
