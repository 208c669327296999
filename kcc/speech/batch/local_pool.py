"""The embedded engine, two ways to run N items at once on this machine:

- threads (the default): one process, one synthesizer mapped from the compiled artifact, N
  Python threads each running an item on 1 kernel thread with its own arena (the generated C
  runs without the GIL). Measured ahead of the process pool on 2 cores, short and long items
  (bench/bench_batch.py): no worker start-up, one copy of everything.
- processes: N spawned worker processes, each holding one synthesizer from the same artifact.
  Slower to start, but a worker that dies (a crash in an item, the OOM killer) costs only its
  items: the pool is rebuilt and the items in flight are retried, each alone, so the death is
  pinned on the item that causes it; an item that kills MAX_ATTEMPTS workers alone becomes an
  error record, so a poison item cannot stall the batch and its neighbours are never blamed.
  Workers are spawned, not forked (a forked child of a process that already ran OpenMP kernels
  can deadlock in libgomp), the artifact is built once in the parent before any worker starts,
  and a worker whose parent dies exits (kill -9 of the batch leaves no orphans behind).
"""
from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Callable, Iterable, Iterator

from kcc.files import AtomicFile, ProcessEnding
from kcc.model.loader import available_cores
from kcc.speech.batch.item import ItemWorker, JobOptions, Outcome
from kcc.speech.batch.manifest import Item
from kcc.speech.engine import load_synthesizer

MAX_ATTEMPTS = 3


class WorkerLoadError(RuntimeError):
    """A worker could not load its synthesizer (a job problem, not an item's): the batch stops."""


@dataclass(frozen=True)
class SynthSpec:
    """How a worker loads its synthesizer (picklable, so it travels to spawned and Ray workers).
    checkpoint None: the real default model. threads: kernel threads per worker (None: every
    core, kcc.compiler.threads)."""
    checkpoint: str | None = None
    max_frames: int | None = None
    native: bool = False
    threads: int | None = None
    precision: str | None = None         # None: $KCC_PRECISION, else fp32

    def __call__(self):
        return load_synthesizer(self.checkpoint, self.max_frames, native=self.native, threads=self.threads,
                                precision=self.precision)


def split_cores(cores: int, workers: int | None = None, threads: int | None = None) -> tuple[int, int]:
    """(workers, kernel threads per worker). Default one single-threaded worker per core:
    bench/bench_batch.py measured it ahead of one process with all cores as kernel threads for
    short and long items (bench/results/bench_batch.md)."""
    if workers is None and threads is None:
        return max(1, cores), 1
    if workers is None:
        return max(1, cores // max(1, threads)), threads
    return max(1, workers), threads or max(1, cores // max(1, workers))


_WORKER: ItemWorker | None = None
ORPHAN_POLL_S = 0.5


def _exit_with_parent(parent: int) -> None:
    """Worker initializer: a worker whose parent died (kill -9 of the batch) exits, instead of
    waiting forever on a queue nobody feeds. An item it was writing leaves only a temp file,
    which the next run removes. It ignores Ctrl-C: the terminal sends SIGINT to the whole process
    group, and the parent ends the job and stops its workers (kcc.speech.cli.interrupts.end_now)
    instead of each worker printing its own KeyboardInterrupt traceback."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    def watch():
        while os.getppid() == parent:
            time.sleep(ORPHAN_POLL_S)
        os._exit(1)
    threading.Thread(target=watch, name="kcc-batch-orphan-watch", daemon=True).start()


def _run_in_worker(factory: Callable, options: JobOptions, item: Item) -> Outcome:
    global _WORKER
    if _WORKER is None:
        _WORKER = ItemWorker(load(factory), options)
    return _WORKER.run(item)


def load(factory: Callable):
    try:
        return factory()
    except Exception as exc:
        raise WorkerLoadError(f"cannot load the synthesizer: {type(exc).__name__}: {exc}") from None


def run_threads(items: Iterable[Item], options: JobOptions, synth, workers: int) -> Iterator[Outcome]:
    """Outcomes in completion order, `workers` items at a time on one shared synthesizer."""
    worker = ItemWorker(synth, options)
    if workers <= 1:
        for item in items:
            yield worker.run(item)
        return
    pending = list(items)[::-1]
    with ThreadPoolExecutor(workers, thread_name_prefix="kcc-batch") as pool:
        inflight: set[Future] = set()
        try:
            while pending or inflight:
                while pending and len(inflight) < 2 * workers:
                    inflight.add(pool.submit(worker.run, pending.pop()))
                done, inflight = wait(inflight, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield fut.result()
        finally:
            for fut in inflight:
                fut.cancel()


def run_processes(items: Iterable[Item], options: JobOptions, factory: Callable, workers: int) -> Iterator[Outcome]:
    """Outcomes in completion order from `workers` spawned processes.

    A worker's death breaks the whole pool, and every item in flight sees it: the one that killed
    the worker and the innocent ones queued beside it. So a death with several items in flight
    blames none of them; they become suspects, and each suspect then runs alone in the rebuilt
    pool until it completes or has died MAX_ATTEMPTS times alone."""
    if isinstance(factory, SynthSpec):
        load(factory)                          # builds the artifact here, once, if it is not built yet
    pending = list(items)[::-1]                # popped from the end: manifest order
    suspects: list[Item] = []
    deaths: dict[int, int] = {}
    ctx = get_context("spawn")
    while pending or suspects:
        if AtomicFile.ending:
            # Ending on a signal, whose clean-up stopped the workers and released the pools'
            # semaphores: a pool rebuilt now would register five more that nothing releases
            # (multiprocessing's resource tracker then warns of leaked semaphores).
            raise ProcessEnding("kcc is ending; no new worker pool")
        pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_exit_with_parent,
                                   initargs=(os.getpid(),))
        inflight: dict[Future, Item] = {}
        alone = broken = False
        try:
            while True:
                if not broken and not inflight and suspects:
                    item = suspects.pop()
                    inflight[pool.submit(_run_in_worker, factory, options, item)] = item
                    alone = True
                elif not broken and not suspects:
                    alone = False
                    while pending and len(inflight) < 2 * workers:
                        item = pending.pop()
                        inflight[pool.submit(_run_in_worker, factory, options, item)] = item
                if not inflight:
                    break
                done, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for fut in done:
                    item = inflight.pop(fut)
                    try:
                        yield fut.result()
                    except BrokenProcessPool:
                        broken = True
                        if alone:
                            n = deaths[id(item)] = deaths.get(id(item), 0) + 1
                            if n >= MAX_ATTEMPTS:
                                yield Outcome(item.id, item.line, "error",
                                              f"a worker died {n} times with this item alone in flight "
                                              "(killed or crashed)")
                                continue
                        suspects.insert(0, item)       # popped from the end: in the order they broke
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
