"""A cancel event set during a synthesis stops it at the next stage boundary."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from kcc.model.pipeline import CANCEL, SynthesisCancelled, Synthesizer

IDS = [50, 83, 54, 156, 57, 135, 16, 65]


def test_cancel_stops_at_the_next_stage(small_ckpt_path):
    synth = Synthesizer(small_ckpt_path, max_frames=200)
    style = (0.1 * np.random.default_rng(1).standard_normal((1, 256))).astype(np.float32)
    ran: list[str] = []
    event = threading.Event()
    for name, c in synth.circuits.items():
        real = c.run

        def spy(*a, _name=name, _real=real, **k):
            ran.append(_name)
            if _name == "kokoro_text_encoder":
                event.set()               # the client goes away while this stage runs
            return _real(*a, **k)
        c.run = spy
    token = CANCEL.set(event)
    try:
        with pytest.raises(SynthesisCancelled, match="before stage kokoro_duration"):
            synth.synthesize(IDS, style)
    finally:
        CANCEL.reset(token)
    assert ran == ["kokoro_phoneme_encoder", "kokoro_text_encoder"]
    # without the event (another thread, or after reset) the same synthesizer runs to the end
    ran.clear()
    assert synth.synthesize(IDS, style).audio.size > 0
    assert len(ran) == len(synth.circuits)
