"""How many synthesis workers one kcc process may run, for every door that runs several
(`kcc serve` / `kcc wyoming --workers`, `kcc batch` / `kcc book --workers`): at most MAX_WORKERS,
and no more than the available memory holds, each worker faulting in its own generator arena.

SERVER_BASE_BYTES (the process, G2P, the weights faulted in by the first request) plus
WORKER_MEMORY_BYTES for each synthesis worker's arena and scratch at the default --max-frames.
Measured with the real fp32 model, `--workers 2`: on the 2-core Xeon (Sapphire Rapids) 69 MB
idle, 618 MB after one request, 840 MB with both workers busy; on a 2-core Zen 4 ~615 MB after
one request, 1.59 GB plateau: ~600 MB an arena at most, so that is the budget. (`kcc batch`
with 24 short items: 0.75 GB at 2 workers, 2.4 GB at 24.)
"""
from __future__ import annotations

MAX_WORKERS = 256
SERVER_BASE_BYTES = 400 << 20
WORKER_MEMORY_BYTES = 600 << 20


class MemoryBudgetError(ValueError):
    """--workers asks for more synthesis arenas than the available memory holds."""


class TooManyWorkers(ValueError):
    """--workers past MAX_WORKERS (or not a positive whole number)."""


def check_workers(workers: int, flag: str = "--workers", available: int | None = None, local: bool = True) -> None:
    """Refuse a worker count outside 1..MAX_WORKERS, or, for workers on this machine (`local`),
    more than the available memory holds at WORKER_MEMORY_BYTES each (`available`: bytes, None
    to ask the system; a Ray cluster's workers use the cluster's memory)."""
    if isinstance(workers, bool) or not isinstance(workers, int) or not 1 <= workers <= MAX_WORKERS:
        raise TooManyWorkers(f"{flag} {workers!r} is outside [1, {MAX_WORKERS}]")
    if local:
        check_memory(workers, available, flag)


def check_memory(workers: int, available: int | None = None, flag: str = "--workers") -> None:
    """Refuse more workers than the available memory holds at WORKER_MEMORY_BYTES each."""
    from kcc.model.loader import available_memory
    free = available_memory() if available is None else available
    need = SERVER_BASE_BYTES + workers * WORKER_MEMORY_BYTES
    if free is not None and need > free:
        fits = max(0, (free - SERVER_BASE_BYTES) // WORKER_MEMORY_BYTES)
        raise MemoryBudgetError(
            f"{flag} {workers} needs about {need >> 20} MiB ({SERVER_BASE_BYTES >> 20} MiB + {WORKER_MEMORY_BYTES >> 20} "
            f"MiB per worker) but {free >> 20} MiB is available; "
            + (f"use {flag} {fits} or fewer" if fits else "free memory first"))
