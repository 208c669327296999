"""The batch job as a Python iterator (notebooks use it directly; `kcc batch` wraps it).

    from kcc.speech.batch import Batch
    job = Batch("lines.txt", "out/", defaults=Defaults(voice="af_heart", format="flac"))
    for outcome in job:            # one Outcome per manifest record, as items finish
        print(outcome.id, outcome.status, outcome.reason)
    job.ok, job.summary            # all items succeeded?  the run manifest's contents

Iterating runs the job: it takes OUTDIR's lock (one job per OUTDIR at a time), removes temp
files a killed run left, yields the manifest's rejected records first, then each item as its
engine finishes it, and writes OUTDIR/kcc-batch.json (counts, failures, throughput) when it
ends, also when it is interrupted.
"""
from __future__ import annotations

import fcntl
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Callable, Iterable, Iterator

from kcc.version import __version__
from kcc.files import sweep_temporaries
from kcc.model.loader import available_cores
from kcc.speech.batch.item import DEFAULT_MAX_CHARS, JobOptions, Outcome, write_atomic
from kcc.speech.batch.local_pool import SynthSpec, load, run_processes, run_threads, split_cores
from kcc.speech.batch.manifest import RUN_MANIFEST, Defaults, Item, Rejected, items_from_records, read_manifest
from kcc.speech.batch.ray_engine import run_ray
from kcc.speech.worker_budget import check_workers

ENGINES = ("local", "ray")
LOCK_NAME = ".kcc-batch.lock"


class BatchError(RuntimeError):
    """The job as a whole cannot run (OUTDIR locked or unusable, an unknown engine)."""


class Batch:
    """manifest: a path (JSONL / CSV / plain text, see manifest.py) or an iterable of dicts with
    the manifest's columns. synth: None (the default model, SynthSpec()), a SynthSpec or any
    picklable zero-argument factory (what worker processes and Ray actors load), or an already
    loaded synthesizer object (local threads only). workers: items at once (default: one per
    core); threads: kernel threads per worker (default: cores / workers). processes: the local
    engine runs workers as processes instead of threads (see local_pool.py). g2p: a kcc.speech.g2p.g2p
    backend name or a picklable factory(lang) -> G2P."""

    def __init__(self, manifest, outdir: str | Path, *, defaults: Defaults = Defaults(), engine: str = "local",
                 workers: int | None = None, threads: int | None = None, synth=None,
                 voices_dirs: Iterable[str] = (), g2p="auto", max_chars: int = DEFAULT_MAX_CHARS,
                 address: str | None = None, kind: str | None = None, processes: bool = False):
        if engine not in ENGINES:
            raise BatchError(f"engine {engine!r} is not one of {', '.join(ENGINES)}")
        self.manifest, self.engine, self.address, self.processes = manifest, engine, address, processes
        self.outdir = Path(outdir)
        if isinstance(manifest, (str, Path)):
            self.records = read_manifest(manifest, defaults, kind)
        else:
            self.records = items_from_records(
                ((n, r if isinstance(r, dict) else f"expected a dict, got {type(r).__name__}")
                 for n, r in enumerate(manifest, 1)), defaults)
        if isinstance(synth, SynthSpec) and threads is None:
            threads = synth.threads
        if workers is not None:
            # the cap and memory budget every door shares; a Ray cluster's memory is its own
            try:
                check_workers(workers, "workers", local=engine == "local" or address is None)
            except ValueError as exc:
                raise BatchError(str(exc)) from None
        for name, n in (("threads", threads), ("max_chars", max_chars)):
            if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
                raise BatchError(f"{name} must be a positive integer, got {n!r}")
        self.workers, self.threads = split_cores(available_cores(), workers, threads)
        self.loaded = synth if hasattr(synth, "synthesize") else None
        if self.loaded is not None and (engine != "local" or processes):
            raise BatchError("a loaded synthesizer runs in this process only; pass a SynthSpec or a "
                             "picklable factory for worker processes or Ray")
        self.factory: Callable = synth if callable(synth) and self.loaded is None else SynthSpec()
        if isinstance(self.factory, SynthSpec):
            self.factory = replace(self.factory, threads=self.threads)
        self.options = JobOptions(str(self.outdir.resolve()), tuple(str(d) for d in voices_dirs), g2p, max_chars)
        self.summary: dict = {}

    @property
    def items(self) -> list[Item]:
        return [r for r in self.records if isinstance(r, Item)]

    @property
    def ok(self) -> bool:
        return bool(self.summary) and self.summary["status"] == "complete" and not self.summary["counts"]["failed"]

    def __iter__(self) -> Iterator[Outcome]:
        self.outdir.mkdir(parents=True, exist_ok=True)
        lock = open(self.outdir / LOCK_NAME, "a+")
        try:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BatchError(f"another kcc batch is writing {self.outdir}") from None
            _remove_stale_parts(self.outdir)
            yield from self._run()
        finally:
            lock.close()

    def _run(self) -> Iterator[Outcome]:
        t0, started = time.perf_counter(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        outcomes: list[Outcome] = []
        status = "interrupted"
        self._write_summary(outcomes, "running", started, 0.0)
        try:
            for rec in self.records:
                if isinstance(rec, Rejected):
                    out = Outcome(rec.id, rec.line, "error", rec.reason)
                    outcomes.append(out)
                    yield out
            for out in self._engine_outcomes():
                outcomes.append(out)
                yield out
            status = "complete"
        finally:
            self._write_summary(outcomes, status, started, time.perf_counter() - t0)

    @property
    def engine_name(self) -> str:
        return "ray" if self.engine == "ray" else "local-processes" if self.processes else "local-threads"

    def _engine_outcomes(self) -> Iterator[Outcome]:
        items = self.items
        if not items:
            return iter(())
        if self.engine == "ray":
            return run_ray(items, self.options, self.factory, self.workers, self.threads, self.address)
        if self.processes:
            return run_processes(items, self.options, self.factory, self.workers)
        return run_threads(items, self.options, self.loaded or load(self.factory), self.workers)

    def _write_summary(self, outcomes: list[Outcome], status: str, started: str, wall: float) -> None:
        by = {s: [o for o in outcomes if o.status == s] for s in ("done", "skipped", "error")}
        made = sum(o.audio_s for o in by["done"])
        self.summary = {
            "schema": "kcc.speech.batch.run/1", "status": status, "kcc_version": __version__,
            "manifest": str(self.manifest) if isinstance(self.manifest, (str, Path)) else "(records)",
            "engine": self.engine_name,
            "workers": self.workers, "threads_per_worker": self.threads, "started": started,
            "counts": {"records": len(self.records), "finished": len(outcomes), "done": len(by["done"]),
                       "skipped": len(by["skipped"]), "failed": len(by["error"])},
            "failures": [{"id": o.id, "line": o.line, "reason": o.reason} for o in by["error"]],
            "throughput": {"wall_s": round(wall, 3), "audio_s": round(made, 3),
                           "audio_s_skipped": round(sum(o.audio_s for o in by["skipped"]), 3),
                           "audio_s_per_wall_s": round(made / wall, 3) if wall > 0 else None,
                           "items_per_s": round(len(by["done"]) / wall, 3) if wall > 0 else None}}
        # backslashreplace: the summary is the job's record and is always written, whatever text
        # an engine's reason carries (the manifest's fields are checked at read time)
        write_atomic(self.outdir / RUN_MANIFEST,
                     json.dumps(self.summary, indent=1, ensure_ascii=False).encode("utf-8", "backslashreplace"))


def _remove_stale_parts(outdir: Path) -> None:
    """Temporaries a killed run left (kcc.files' '.kcc-tmp.<pid>...part', of a process that is
    gone); a user's own hidden '*.part' files are not kcc's and stay."""
    sweep_temporaries(outdir)


def synthesize(manifest, outdir: str | Path, **kwargs) -> Iterator[Outcome]:
    """Shorthand: iterate Batch(manifest, outdir, **kwargs)."""
    return iter(Batch(manifest, outdir, **kwargs))
