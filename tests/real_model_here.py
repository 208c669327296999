"""Whether the real Kokoro-82M is already in the cache (kcc.weights.real_model): the tests that
speak with it skip, by name, where it is not, and never fetch it themselves."""
from __future__ import annotations

import pytest


def real_model_here() -> bool:
    try:
        from kcc.weights.real_model import fetch
        fetch(offline=True)
        return True
    except Exception:            # not fetched, or a cache it cannot read: either way, not here
        return False


needs_real_model = pytest.mark.skipif(not real_model_here(),
                                      reason="the real Kokoro-82M is not fetched (kcc.weights.real_model)")
