"""FreeCores: the kernel thread count that leaves out the cores other processes keep busy.

Beside a 1-core busy neighbour, 2 kernel threads took 1.3-1.5x the time of 1 on the 2-core test
machine; FreeCores measured 0.96-1.02x of 1 there and 2 threads' time on free cores
(bench/results/short_synthesis.md). Here: /proc/stat's columns, the arithmetic over injected
clocks, and the refusals.
"""
from __future__ import annotations

import os
import sys
import time

import pytest

from kcc.compiler.threads import FreeCores, ThreadsError, _busy_seconds, available_cores

HZ = os.sysconf("SC_CLK_TCK")
STAT = """cpu  900 900 900 900 900 900 900 900 900 900
cpu0 100 20 30 5000 70 1 2 3 400 500
cpu1 10 0 0 9000 0 0 0 0 0 0
cpu2 1000 0 0 0 0 0 0 0 0 0
intr 1 2 3
ctxt 5
"""


def test_busy_seconds_counts_user_nice_system_irq_softirq_steal_of_the_given_cpus():
    # cpu0: 100 + 20 + 30 + 1 + 2 + 3 (idle 5000, iowait 70 and the guest columns left out)
    assert _busy_seconds({0}, STAT) == pytest.approx(156 / HZ)
    assert _busy_seconds({0, 1}, STAT) == pytest.approx(166 / HZ)
    assert _busy_seconds(None, STAT) == pytest.approx(1166 / HZ)     # every cpuN line, not the "cpu" total
    assert _busy_seconds({7}, STAT) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/stat is Linux's")
def test_busy_seconds_reads_this_machines_proc_stat():
    before, cpu0 = _busy_seconds(None), time.process_time()
    while time.process_time() - cpu0 < 0.3:                          # this process keeps a core busy
        pass
    assert _busy_seconds(None) - before >= 0.2


class Fake:
    """Clock, this machine's busy CPU seconds and this process's CPU seconds, set by the test."""

    def __init__(self):
        self.t = self.busy = self.own = 0.0

    def advance(self, dt: float, others: float, own: float = 0.0):
        """dt seconds pass with `others` cores busy in other processes and `own` in this one."""
        self.t += dt
        self.busy += (others + own) * dt
        self.own += own * dt

    def cores(self, limit: int, window_s: float = 0.1) -> FreeCores:
        return FreeCores(limit, window_s, clock=lambda: self.t, own=lambda: self.own, busy=lambda: self.busy)


@pytest.mark.parametrize("others,own,want", [(0.0, 0.0, 2), (0.0, 2.0, 2), (1.0, 1.0, 1), (0.4, 0.0, 2),
                                             (0.6, 1.4, 1), (5.0, 0.0, 1)])
def test_the_count_leaves_out_what_others_use_never_this_process(others, own, want):
    f = Fake()
    cores = f.cores(2)
    f.advance(0.5, others, own)
    assert cores() == want


def test_a_window_too_short_to_measure_keeps_the_count_and_keeps_counting():
    f = Fake()
    cores = f.cores(4, window_s=0.1)
    f.advance(0.05, others=3.0)
    assert cores() == 4                                                # 50 ms: not yet measured
    f.advance(0.05, others=3.0)
    assert cores() == 1                                                # the 100 ms since the start
    f.advance(0.2, others=1.0)
    assert cores() == 3
    f.advance(0.2, others=0.0)
    assert cores() == 4


def test_an_unreadable_proc_stat_leaves_the_limit():
    def broken():
        raise OSError("no /proc")
    cores = FreeCores(3, busy=broken)
    assert cores() == 3 and cores() == 3


@pytest.mark.parametrize("limit", [0, -2])
def test_a_limit_under_one_is_refused(limit):
    with pytest.raises(ThreadsError, match="at least 1"):
        FreeCores(limit, busy=lambda: 0.0)


class _Recorder:
    def __init__(self):
        self.threads = None

    def set_threads(self, n):
        self.threads = n
        return n() if callable(n) else n


@pytest.mark.parametrize("threads, env, fixed", [(None, None, False), (1, None, True), (None, "1", True)])
def test_say_measures_free_cores_unless_a_count_was_asked_for(monkeypatch, threads, env, fixed):
    from kcc.model import model_store
    from kcc.speech.engine import load_synthesizer
    monkeypatch.setattr(model_store, "load_model", lambda *a, **k: _Recorder())
    if env is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    synth = load_synthesizer("unused.pth", threads=threads, log=None)
    assert isinstance(synth.threads, FreeCores) != fixed
    assert synth.threads == 1 if fixed else synth.threads.limit == available_cores()


def test_a_thread_count_callable_is_read_before_every_stage(small_ckpt_path):
    """Synthesizer.set_threads takes a callable (FreeCores) that run() reads per stage; the
    audio is the fixed count's, bit for bit (results do not depend on the count)."""
    import numpy as np
    from kcc.model.pipeline import Synthesizer
    synth = Synthesizer(small_ckpt_path, max_frames=200)
    style = (0.1 * np.random.default_rng(3).standard_normal((1, 256))).astype(np.float32)
    ids = [50, 83, 54, 156, 57, 135]
    synth.set_threads(2)
    fixed = synth.synthesize(ids, style).audio
    counts = iter([1, 2] * 8)
    calls = []

    def policy():
        calls.append(1)
        return next(counts)
    synth.set_threads(policy)
    calls.clear()
    assert np.array_equal(synth.synthesize(ids, style).audio, fixed)
    assert len(calls) == len(synth.stages)
