"""Chunk syntheses of all requests on `workers` threads, the most urgent listener first.

A request's thread plans its text and encodes its audio; each chunk's synthesis is handed here
and runs on one of `workers` synthesis threads (so only those fault in the synthesizer's
per-thread arenas and hold its OpenMP thread counts). Waiting chunks are taken smallest key
first (kcc.speech.serve.service.Job.urgency): every request's first chunk, by arrival, before
any request's next one; those by the time their listener runs out of audio (first audio +
seconds sent). So every listener's first chunk goes before anyone's second, and no request
waits behind another's whole text.

Kernel threads are shared out as syntheses start and end (kcc.model.pipeline.THREADS, read
before each stage): one synthesis alone gets every core, n at once get cores // n each.
"""
from __future__ import annotations

import heapq
import itertools
import threading
from concurrent.futures import Future
from typing import Callable

from kcc.model.pipeline import CANCEL, THREADS, SynthesisCancelled


# The key of on_each's work: before every request's chunk (kcc.speech.serve.service.Job.urgency
# keys are (0 | 1, seconds)).
FIRST = (-1, 0.0)


class SchedulerClosed(SynthesisCancelled):
    """The server is shutting down: the chunk was not synthesised."""


class ChunkScheduler:
    def __init__(self, workers: int, cores: int = 0, on_idle: Callable | None = None):
        """cores: share this many kernel threads among running syntheses; 0: leave the
        synthesizer's own count alone. on_idle: run on a synthesis thread that finds nothing
        waiting after it worked (the service drops that thread's arena pages there)."""
        self.cores, self.on_idle = cores, on_idle
        self.busy = 0
        self._heap: list = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._closed = False
        self._barriers: list[threading.Barrier] = []
        self._threads = [threading.Thread(target=self._loop, name=f"kcc-synth-{i}", daemon=True)
                         for i in range(workers)]
        for t in self._threads:
            t.start()

    def threads_now(self) -> int:
        return max(1, self.cores // max(1, self.busy))

    def run(self, key: float, fn: Callable, cancel: threading.Event | None = None):
        """fn() on a synthesis thread once no waiting chunk has an earlier key; its result, or
        its exception raised here. A chunk whose cancel is set by its turn does not run."""
        fut: Future = Future()
        with self._cv:
            if self._closed:
                raise SchedulerClosed("the server is shutting down")
            heapq.heappush(self._heap, (key, next(self._seq), fn, fut, cancel))
            self._cv.notify()
        return fut.result()

    def on_each(self, fn: Callable) -> None:
        """fn() once on every synthesis thread (warming each one's arena and OpenMP pool), ahead
        of every waiting chunk; returns when all have run, raising the first failure. A barrier
        after fn keeps a thread from taking a second copy while another has not taken its own."""
        barrier = threading.Barrier(len(self._threads))

        def once():
            try:
                return fn()
            finally:
                try:
                    barrier.wait()
                except threading.BrokenBarrierError:    # close() while another thread's copy waited
                    pass
        with self._cv:
            if self._closed:
                raise SchedulerClosed("the server is shutting down")
            self._barriers.append(barrier)
            futs = [Future() for _ in self._threads]
            for fut in futs:
                heapq.heappush(self._heap, (FIRST, next(self._seq), once, fut, None))
            self._cv.notify_all()
        try:
            for fut in futs:
                fut.result()
        finally:
            with self._cv:
                self._barriers.remove(barrier)

    def waiting(self) -> int:
        with self._cv:
            return len(self._heap)

    def close(self) -> None:
        """Refuse new chunks, fail the waiting ones, let the running ones end, join the threads."""
        with self._cv:
            self._closed = True
            waiting, self._heap = self._heap, []
            self._cv.notify_all()
        for *_, fut, _cancel in waiting:
            fut.set_exception(SchedulerClosed("the server is shutting down"))
        for barrier in self._barriers:
            barrier.abort()
        for t in self._threads:
            t.join()

    def _loop(self) -> None:
        if self.cores:
            THREADS.set(self.threads_now)
        worked = False
        while True:
            with self._cv:
                idle = worked and not self._heap and not self._closed
            if idle and self.on_idle is not None:
                worked = False
                self.on_idle()
            with self._cv:
                while not self._heap and not self._closed:
                    self._cv.wait()
                if not self._heap:
                    return
                _key, _seq, fn, fut, cancel = heapq.heappop(self._heap)
                if cancel is not None and cancel.is_set():
                    fut.set_exception(SynthesisCancelled("cancelled while waiting for a synthesis thread"))
                    continue
                self.busy += 1
            worked = True
            token = CANCEL.set(cancel)
            try:
                fut.set_result(fn())
            except BaseException as exc:  # handed to the request's thread as it is
                fut.set_exception(exc)
            finally:
                CANCEL.reset(token)
                with self._cv:
                    self.busy -= 1
