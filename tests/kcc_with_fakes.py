"""`python tests/kcc_with_fakes.py ARGV...`: the kcc command line over test_say's doubles
(FakeSynth, LetterG2P), for tests that need a real process (signals, pipes, closed stdout).
KCC_TEST_STALL_S: each synthesis first sits that long in a 'C call' with SIGINT and SIGTERM
blocked, as a compiled stage runs on through signals; KCC_TEST_MARK: a file each synthesis
appends a byte to when it starts (the test waits for it). Spawned batch workers import this
module for SlowSpec, so the doubles reach them too."""
from __future__ import annotations

import ctypes
import os
import signal
import sys
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from test_say import FakeSynth, LetterG2P  # noqa: E402

from kcc.speech import engine  # noqa: E402
from kcc.speech.batch import item, local_pool  # noqa: E402
from kcc.speech.cli import say  # noqa: E402
from kcc.speech.g2p import g2p  # noqa: E402


class StallingSynth(FakeSynth):
    def synthesize(self, *a, **k):
        stall = float(os.environ.get("KCC_TEST_STALL_S", "0"))
        if os.environ.get("KCC_TEST_MARK"):
            with open(os.environ["KCC_TEST_MARK"], "a") as fh:
                fh.write("x")
        if stall:
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
            ctypes.CDLL(None).usleep(int(stall * 1e6))
        return super().synthesize(*a, **k)


class SlowSpec(local_pool.SynthSpec):
    """Stands in for local_pool.SynthSpec: picklable, so spawned workers build the double."""

    def __call__(self):
        return StallingSynth()


def letters(*a, **k):
    return LetterG2P()


def install() -> None:
    say.load_synthesizer = engine.load_synthesizer = lambda *a, **k: StallingSynth()
    say.G2P = item.G2P = letters
    g2p.G2PFactory = lambda *a, **k: letters
    local_pool.SynthSpec = SlowSpec


if __name__ == "__main__":
    install()
    from kcc.cli import main
    sys.exit(main(sys.argv[1:]))
