"""How many threads the kernels use: all the cores this process may run on, unless told.

"Available" respects the CPU affinity mask (taskset, a container's cpuset) and a cgroup v2 CPU
quota (cpu.max, e.g. docker --cpus=1.5 -> 1); OMP_NUM_THREADS, when set to a positive integer,
is the default a user chose for every OpenMP program; --threads overrides both.
"""
from __future__ import annotations

import math
import os
from pathlib import Path


class ThreadsError(ValueError):
    """A thread count outside 1..available cores."""


def _cgroup_quota(path: Path = Path("/sys/fs/cgroup/cpu.max")) -> int | None:
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        return max(1, math.floor(int(quota) / int(period)))
    except (ValueError, ZeroDivisionError):
        return None


def available_cores() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    quota = _cgroup_quota()
    return max(1, min(n, quota) if quota else n)


def resolve_threads(requested: int | None = None, environ=os.environ) -> int:
    """The kernel thread count: `requested` (checked), else OMP_NUM_THREADS, else every core."""
    cores = available_cores()
    if requested is None:
        env = environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
        if env.isdigit() and int(env) >= 1:
            return min(int(env), cores)
        return cores
    if isinstance(requested, bool) or not isinstance(requested, int) or not 1 <= requested <= cores:
        raise ThreadsError(f"threads must be an integer from 1 to {cores} (the cores available here), "
                           f"got {requested!r}")
    return requested
