"""How many threads the kernels use: all the cores this process may run on, unless told.

"Available" respects the CPU affinity mask (taskset, a container's cpuset) and a cgroup v2 CPU
quota (cpu.max, e.g. docker --cpus=1.5 -> 1); OMP_NUM_THREADS, when set to a positive integer,
is the default a user chose for every OpenMP program; --threads overrides both. FreeCores picks
a count per stage that leaves out the cores other processes keep busy.
"""
from __future__ import annotations

import math
import os
import time
from pathlib import Path


# The OpenMP wait policy kcc sets where the user has not set OMP_WAIT_POLICY: threads that reach
# a barrier sleep at once instead of spinning (libgomp's default spins ~300k rounds first). A
# spinning waiter holds the core that a thread descheduled by a busy neighbour needs to finish
# its share, so every one of a synthesis's ~430 barriers waits longer. Warm `kcc say` of one
# sentence, median of interleaved runs on the 2-core Zen 4 (shared machine, load ~8):
# bench/results/neighbours.md; passive was the fastest setting with 0, 1 and 2 busy neighbours.
WAIT_POLICY = "passive"


def set_wait_policy(environ=os.environ) -> str:
    """OMP_WAIT_POLICY=WAIT_POLICY unless the user chose one; libgomp reads it once, as it is
    loaded, so this runs before a stage library is (build._loads, runtime.CompiledCircuit).
    Returns the policy in effect."""
    if "OMP_WAIT_POLICY" not in environ:
        environ["OMP_WAIT_POLICY"] = WAIT_POLICY
    return environ["OMP_WAIT_POLICY"]


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


def available_memory(meminfo: Path = Path("/proc/meminfo"),
                     cgroup: Path = Path("/sys/fs/cgroup")) -> int | None:
    """Bytes this process could still allocate: MemAvailable, less where a cgroup v2 memory.max
    leaves less (memory.max - memory.current); None where neither can be read."""
    free = None
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                free = int(line.split()[1]) * 1024
                break
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            room = max(0, int(limit) - int((cgroup / "memory.current").read_text()))
            free = room if free is None else min(free, room)
    except (OSError, ValueError):
        pass
    return free


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


def _busy_seconds(cpus: set[int] | None, text: str | None = None) -> float:
    """CPU seconds spent busy (user, nice, system, irq, softirq, steal: not idle, not iowait) on
    `cpus` (None: all) since boot, from /proc/stat."""
    text = Path("/proc/stat").read_text() if text is None else text
    total = 0
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu" or not name[3:].isdigit():
            continue
        if cpus is not None and int(name[3:]) not in cpus:
            continue
        f = [int(v) for v in rest.split()[:8]]
        total += f[0] + f[1] + f[2] + f[5] + f[6] + f[7]
    return total / os.sysconf("SC_CLK_TCK")


class FreeCores:
    """A kernel thread count that leaves out the cores other processes keep busy: a callable for
    kcc.model.pipeline.THREADS, read before each stage.

    Why: kernels split their work evenly and meet at a barrier after every op (~430 a synthesis),
    so a thread that shares its core with a busy neighbour holds the other back at each one.
    Beside a 1-core busy loop, 2 threads took 1.3-1.5x the time of 1 on a 2-core Zen 4
    (bench/results/short_synthesis.md). Each call measures the other processes' CPU use since
    the previous measurement (at least `window_s` ago: /proc/stat counts in 10 ms ticks): the
    busy time of this process's CPUs less this process's own CPU time (its kernel threads and
    their spin-waits are not a neighbour), and returns `limit` less the cores that use fills,
    rounded, at least 1. Results are bit-identical for any count, so the count may change
    between stages. Only other processes count: syntheses running side by side in this process
    (a server's workers) are this process's CPU time, so their share of the cores is still the
    caller's to divide (take the smaller of the two counts). Off Linux, or under a cgroup CPU
    quota smaller than the CPU set (other tenants' use of the host's CPUs says nothing of this
    quota), it returns `limit`."""

    def __init__(self, limit: int | None = None, window_s: float = 0.1, clock=time.monotonic,
                 own=time.process_time, busy=None, cpus: set[int] | None = None):
        self.limit = available_cores() if limit is None else int(limit)
        if self.limit < 1:
            raise ThreadsError(f"threads must be at least 1, got {limit!r}")
        self.window_s, self._clock, self._own = window_s, clock, own
        if busy is None:
            try:
                cpus = set(os.sched_getaffinity(0)) if cpus is None else cpus
            except (AttributeError, OSError):
                cpus = None
            quota = _cgroup_quota()
            busy = None if quota is not None and quota < len(cpus or ()) else (lambda: _busy_seconds(cpus))
        self._busy = busy
        self.count = self.limit
        self._last = self._sample()

    def _sample(self):
        if self._busy is None:
            return None
        try:
            return self._clock(), self._busy(), self._own()
        except (OSError, ValueError, IndexError):
            self._busy = None                 # no /proc/stat (or an unreadable one): stay at limit
            return None

    def __call__(self) -> int:
        if self._last is None:
            return self.count
        now = self._sample()
        if now is None:
            return self.count
        (t0, b0, m0), (t1, b1, m1) = self._last, now
        if t1 - t0 >= self.window_s:
            others = max(0.0, (b1 - b0) - (m1 - m0)) / (t1 - t0)
            self.count = max(1, min(self.limit, int(self.limit - others + 0.5)))
            self._last = now
        return self.count
