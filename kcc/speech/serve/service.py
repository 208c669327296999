"""Synthesis jobs off the event loop: admission, a bounded thread pool, deadlines, cancellation.

A request becomes a Job: its whole G2P -> chunks -> synthesis -> encoding loop runs on one of
`workers` threads (the compiled circuits release the GIL), and hands the event loop a stream of
items: ('plan', chunks), ('bytes', encoded bytes, the Chunk or None for the encoder's tail)...,
then ('end', None); or ('error', ApiError) at any point. At most
`workers` jobs run and `max_queue` wait; one more is refused at once with 503 + Retry-After.
Between chunks the job stops if the client went away (Job.cancel) or if the next chunk, at the
measured seconds per phoneme, would end past the request's deadline (504); the server plans
chunks of at most `chunk_phonemes`, so one chunk's time is bounded too.
"""
from __future__ import annotations

import asyncio
import logging
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from kcc.speech.g2p import G2PError, detect_language
from kcc.model.pipeline import CANCEL, DEFAULT_MAX_FRAMES, SynthesisCancelled
from kcc.speech.say import SayError, plan, synthesize_chunks
from kcc.speech.serve.audio_formats import Encoder
from kcc.speech.serve.request import ApiError, SpeechRequest
from kcc.speech.serve.voice_set import VoiceRequestError, VoiceSet
from kcc.speech.voices import VoiceError

log = logging.getLogger("kcc.speech.serve")


def shutting_down() -> ApiError:
    return ApiError(503, "server is shutting down", headers={"Retry-After": "5"})


@dataclass
class Limits:
    workers: int = 2
    max_queue: int = 8
    request_timeout_s: float = 120.0
    chunk_phonemes: int = 200           # a chunk's synthesis time stays a small part of the deadline
    first_chunk_phonemes: int = 40      # short first chunk: first audio early


# Voices of these languages are asked to read Latin-script text too (Kokoro's Japanese voices
# speak English well), so for them the text's script decides, not the voice.
NON_LATIN = frozenset({"ja", "zh", "hi"})


def pick_language(text: str, voice_language: str, default: str) -> str:
    """No lang_code: kana / Han / Devanagari in the text pick ja / zh / hi; Latin text is read in
    the voice's language (es for an es voice), or `default` for a voice of a non-Latin language."""
    fallback = voice_language if voice_language and voice_language not in NON_LATIN else default
    return detect_language(text, fallback)


class Job:
    def __init__(self, loop: asyncio.AbstractEventLoop, deadline: float):
        self.loop, self.deadline = loop, deadline
        self.items: asyncio.Queue = asyncio.Queue()
        self.cancel = threading.Event()
        self.started = False             # a worker has taken it (it is no longer queued)

    def emit(self, *item) -> None:
        try:
            self.loop.call_soon_threadsafe(self.items.put_nowait, item)
        except RuntimeError:            # the loop is closed: nobody is listening any more
            self.cancel.set()


class SpeechService:
    def __init__(self, synth, g2p_for, voices: VoiceSet, limits: Limits | None = None,
                 default_language: str = "en-us"):
        """g2p_for(language) -> a G2P callable (raises G2PError for a language it cannot do)."""
        self.synth, self.g2p_for, self.voices = synth, g2p_for, voices
        self.default_language = default_language
        self.limits = limits or Limits()
        self.pool = ThreadPoolExecutor(self.limits.workers, thread_name_prefix="kcc-synth")
        self._lock = threading.Lock()
        self.running = self.waiting = 0
        self.jobs: set[Job] = set()
        self.seconds_per_phoneme = 0.0  # measured; 0 until the first chunk
        self.draining = False

    # -- admission ------------------------------------------------------------------------------
    def retry_after(self) -> int:
        return max(1, math.ceil(self.seconds_per_phoneme * self.limits.chunk_phonemes))

    def submit(self, req: SpeechRequest, loop: asyncio.AbstractEventLoop) -> Job:
        try:
            parts = self.voices.resolve(req.voice)
        except VoiceRequestError as exc:
            raise ApiError(422, str(exc), "voice") from None
        with self._lock:
            if self.draining:
                raise shutting_down()
            if self.running + self.waiting >= self.limits.workers + self.limits.max_queue:
                raise ApiError(503, f"server busy: {self.running} syntheses running and {self.waiting} waiting; "
                                    "retry later", headers={"Retry-After": str(self.retry_after())})
            self.waiting += 1
            job = Job(loop, time.monotonic() + self.limits.request_timeout_s)
            self.jobs.add(job)
        self.pool.submit(self._run, job, req, parts)
        return job

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
        self.pool.shutdown(wait=True, cancel_futures=True)

    # -- the worker ----------------------------------------------------------------------------
    def _run(self, job: Job, req: SpeechRequest, parts) -> None:
        with self._lock:
            self.waiting -= 1
            self.running += 1
        job.started = True
        encoder = None
        cancel_token = CANCEL.set(job.cancel)      # the pipeline checks it between stages
        try:
            if job.cancel.is_set():
                raise shutting_down() if self.draining else ApiError(499, "the client went away")
            if time.monotonic() > job.deadline:
                raise ApiError(504, "the request waited for a synthesis slot past its deadline")
            lang = req.lang or pick_language(req.text, self.voices.language(parts), self.default_language)
            try:
                g2p = self.g2p_for(lang)
            except (G2PError, ValueError) as exc:
                raise ApiError(422, f"language {lang!r}: {exc}", "lang_code") from None
            pack = self.voices.pack(parts)
            # the whole text is planned first: a G2P error anywhere is a JSON error, not a cut
            # stream; chunk sizes also fit the synthesizer's frame plan at this speed
            chunks = plan(req.text, g2p, limit=self.limits.chunk_phonemes, first_limit=self.limits.first_chunk_phonemes,
                          speed=req.speed, max_frames=getattr(self.synth, "max_frames", DEFAULT_MAX_FRAMES))
            encoder = Encoder(req.response_format, streaming=req.stream or req.sse)
            job.emit("plan", chunks)
            produced = synthesize_chunks(chunks, self.synth, pack, req.speed, req.seed)
            t0 = time.monotonic()
            for enc in chunks:           # the generator synthesises a chunk when asked for it
                if job.cancel.is_set():
                    produced.close()
                    return
                self._check_deadline(job, len(enc.ids))
                chunk = next(produced)
                t1 = time.monotonic()
                self._measure(t1 - t0, len(enc.ids))
                t0 = t1
                audio = chunk.audio * np.float32(req.volume) if req.volume != 1.0 else chunk.audio
                job.emit("bytes", encoder.push(audio), chunk)
            job.emit("bytes", encoder.finish(), None)
            job.emit("end", None)
        except ApiError as exc:
            job.emit("error", exc)
        except (SayError, G2PError) as exc:
            job.emit("error", ApiError(422, str(exc), "input"))
        except VoiceError as exc:         # the message names files: for the log, not the client
            log.error("voice %s: %s", parts, exc)
            job.emit("error", ApiError(500, "the voice could not be loaded; see the server log"))
        except SynthesisCancelled:        # the client went away during a chunk: stopped between stages
            return
        except Exception as exc:          # SynthesisError, KccRunError: the message names the stage
            log.exception("synthesis failed")
            job.emit("error", ApiError(500, f"synthesis failed: {type(exc).__name__}: {exc}"))
        finally:
            CANCEL.reset(cancel_token)
            if encoder is not None:
                encoder.close()
            with self._lock:
                self.running -= 1
                self.jobs.discard(job)

    def _check_deadline(self, job: Job, n_ids: int) -> None:
        expected = self.seconds_per_phoneme * n_ids
        if time.monotonic() + expected > job.deadline:
            raise ApiError(504, f"synthesis would exceed this server's {self.limits.request_timeout_s:g} s "
                                "request limit")

    def _measure(self, seconds: float, n_ids: int) -> None:
        rate = seconds / max(1, n_ids)
        with self._lock:                 # a moving average over recent chunks of all requests
            self.seconds_per_phoneme = rate if not self.seconds_per_phoneme else 0.8 * self.seconds_per_phoneme + 0.2 * rate
