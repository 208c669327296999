"""What a server's synthesis thread gives back when it finds nothing waiting: its arena's pages
(Synthesizer.trim_arena(0); the next chunk faults in what it uses, a few ms) and the C heap's
free memory (glibc keeps freed chunk outputs and Python objects in its per-thread heaps).
bench/results/serve_memory.md: 2 workers idle after a long text, anonymous 451 -> 68 MB."""
from __future__ import annotations

import ctypes

_malloc_trim = getattr(ctypes.CDLL(None), "malloc_trim", None)    # glibc only: elsewhere the heap stays


def release_idle_memory(synth) -> None:
    """On the thread that goes idle (the arena is per thread). A synthesizer without an arena
    (the tests' fakes) has none to drop."""
    trim = getattr(synth, "trim_arena", None)
    if trim is not None:
        trim(0)
    if _malloc_trim is not None:
        _malloc_trim(0)
