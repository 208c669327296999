"""A synthesis thread's arena keeps the pages of the chunk it made, not of the longest it ever made
(kcc.compiler.runtime.trim_scratch, kcc.model.pipeline.Synthesizer.trim_arena)."""
from __future__ import annotations

import mmap
import threading

import numpy as np

from kcc.compiler.runtime import aligned_empty, trim_scratch
from kcc.model.pipeline import ARENA_SLACK_BYTES, Synthesizer
from kcc.speech.serve.idle_memory import release_idle_memory
from kcc.speech.serve.scheduler import ChunkScheduler
from kcc.speech.serve.service import Limits, SpeechService
from kcc.speech.serve.voice_set import VoiceSet
from kcc.speech.voices import load_voice
from test_server import make_catalog

PAGE = mmap.PAGESIZE


def resident_pages(a: np.ndarray) -> int:
    """Pages of `a` in this process's resident set (mincore)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    start = a.ctypes.data // PAGE * PAGE
    n = -(-(a.ctypes.data + a.nbytes - start) // PAGE)
    vec = (ctypes.c_ubyte * n)()
    assert libc.mincore(ctypes.c_void_p(start), ctypes.c_size_t(n * PAGE), vec) == 0
    return sum(v & 1 for v in vec)


def test_trim_scratch_drops_the_pages_past_keep_and_they_read_as_zeros():
    a = aligned_empty(64 * PAGE, PAGE)
    a[:] = 7
    assert resident_pages(a) == 64
    dropped = trim_scratch(a, 16 * PAGE)
    assert dropped == 48 * PAGE and resident_pages(a) == 16
    assert (a[:16 * PAGE] == 7).all() and (a[16 * PAGE:] == 0).all()     # dead scratch, zero-filled


def test_trim_scratch_keeping_everything_drops_nothing():
    a = aligned_empty(8 * PAGE, PAGE)
    a[:] = 1
    assert trim_scratch(a, 8 * PAGE) == 0 and trim_scratch(a, 10 ** 9) == 0 and resident_pages(a) == 8


def test_synthesizer_keeps_an_arena_in_proportion_to_the_frames_made():
    s = Synthesizer.__new__(Synthesizer)
    s._arenas, s.max_frames = threading.local(), 2048
    assert s.trim_arena(100) == 0                              # no arena on this thread yet
    size = 2 * ARENA_SLACK_BYTES + 64 * PAGE
    s._arenas.arena = a = aligned_empty(size, PAGE)
    a[:] = 1
    keep = -(-size * 1024 // 2048) + ARENA_SLACK_BYTES
    dropped = s.trim_arena(1024)                               # half the frames: half the arena + slack
    assert resident_pages(a) * PAGE == keep and dropped == size - keep
    assert s.trim_arena(2048) == 0                             # a full-length chunk keeps it all


def test_an_idle_synthesis_thread_drops_its_arena():
    """The server's scheduler runs on_idle on a synthesis thread that finds nothing waiting after
    it worked; the service passes release_idle_memory: that thread keeps only the arena's slack."""
    s = Synthesizer.__new__(Synthesizer)
    s._arenas, s.max_frames = threading.local(), 2048
    size = 2 * ARENA_SLACK_BYTES + 64 * PAGE
    idle = threading.Event()
    seen: dict = {}

    def on_idle():
        seen["thread"] = threading.current_thread().name
        release_idle_memory(s)
        seen["resident"] = resident_pages(s._arenas.arena) * PAGE
        idle.set()

    def chunk():                              # a synthesis: this thread's arena, every page touched
        s._arenas.arena = a = aligned_empty(size, PAGE)
        a[:] = 1
        return resident_pages(a) * PAGE
    sched = ChunkScheduler(1, on_idle=on_idle)
    try:
        assert not idle.is_set()                            # not before any work
        assert sched.run((0, 0.0), chunk) == size
        assert idle.wait(timeout=60)
    finally:
        sched.close()
    assert seen == {"thread": "kcc-synth-0", "resident": ARENA_SLACK_BYTES}


def test_the_speech_service_gives_idle_memory_back_on_its_synthesis_threads(tmp_path):
    """SpeechService wires release_idle_memory into its scheduler: after a chunk, the synthesis
    thread that made it drops that thread's arena (a fake synthesizer has none: nothing fails)."""
    s = Synthesizer.__new__(Synthesizer)
    s._arenas, s.max_frames = threading.local(), 2048
    svc = SpeechService(s, lambda lang: None, VoiceSet(make_catalog(tmp_path / "voices"), None, "af_alloy",
                                                       loader=load_voice), Limits(workers=1))
    size = 2 * ARENA_SLACK_BYTES + 64 * PAGE

    def chunk():
        s._arenas.arena = a = aligned_empty(size, PAGE)
        a[:] = 1
        return a
    try:
        a = svc.scheduler.run((0, 0.0), chunk)
        for _ in range(600):                   # the thread goes idle once run() has its result
            if resident_pages(a) * PAGE == ARENA_SLACK_BYTES:
                break
            threading.Event().wait(0.05)
        assert resident_pages(a) * PAGE == ARENA_SLACK_BYTES
    finally:
        svc.scheduler.close()
