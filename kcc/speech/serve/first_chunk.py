"""How long the first chunks of a streamed request may be, from what synthesis measurably costs.

Synthesis time is close to linear in a chunk's phonemes plus a fixed part: every chunk pays
for its boundary tokens, which Kokoro gives ~20 frames of audio, and the generator's cost is
per frame (real Kokoro-82M at 1 thread on the 2-core AVX-512 dev machine: 5 phonemes 26 frames
210 ms, 10 / 36 / 290 ms, 40 / 95 / 741 ms, 86 / 212 / 1592 ms; the generator ~75% of it).
So the first chunk is sized to end within a time budget (CostModel.phonemes_within), cut at a
word boundary by kcc.speech.text.iter_chunks, and the next chunks grow by `growth` each
(chunk_ramp): each is made while the one before it plays, and the long chunks Kokoro phrases
best come once the listener has audio.
"""
from __future__ import annotations

import threading
from collections import deque


def chunk_ramp(first: int, limit: int, growth: float = 3.0) -> list[int]:
    """The first chunks' phoneme limits: first, first * growth, ... while below `limit` (later
    chunks get `limit`)."""
    if first < 1 or limit < 1:
        raise ValueError(f"chunk limits must be positive, got first={first}, limit={limit}")
    if not growth > 1:
        raise ValueError(f"the ramp must grow, got growth={growth}")
    ramp, n = [], float(first)
    while n < limit:
        ramp.append(int(n))
        n *= growth
    return ramp


def chunk_plan(first: int, limit: int, growth: float = 3.0) -> tuple[list[int], int]:
    """(the ramp, min_rest) for kcc.speech.engine.plan: a paragraph is cut short only when at least
    twice the first chunk's limit follows the cut, so a short sentence ("Hello there.") stays
    whole: it would gain a few tens of milliseconds and lose its one intonation contour."""
    return chunk_ramp(first, limit, growth), 2 * first


class CostModel:
    """seconds ~= fixed + per_phoneme * phonemes, least squares over the recent chunks of all
    requests (thread-safe); `prior` answers until two different chunk sizes were seen."""

    def __init__(self, prior_fixed_s: float = 0.1, prior_per_phoneme_s: float = 0.015, window: int = 32):
        self.prior = (prior_fixed_s, prior_per_phoneme_s)
        self.points: deque[tuple[int, float]] = deque(maxlen=window)
        self._lock = threading.Lock()

    def observe(self, phonemes: int, seconds: float) -> None:
        if phonemes >= 1 and seconds > 0:
            with self._lock:
                self.points.append((phonemes, seconds))

    def fit(self) -> tuple[float, float]:
        """(fixed seconds, seconds per phoneme), both >= 0."""
        with self._lock:
            pts = list(self.points)
        if len({n for n, _ in pts}) < 2:
            if pts:                       # one size seen: scale the prior to it
                n, s = pts[-1]
                f, p = self.prior
                k = s / (f + p * n)
                return f * k, p * k
            return self.prior
        mx = sum(n for n, _ in pts) / len(pts)
        my = sum(s for _, s in pts) / len(pts)
        sxx = sum((n - mx) ** 2 for n, _ in pts)
        slope = max(0.0, sum((n - mx) * (s - my) for n, s in pts) / sxx)
        fixed = my - slope * mx
        if fixed < 0:                    # no fixed part visible: all of it per phoneme
            fixed, slope = 0.0, my / mx
        return fixed, slope

    def seconds(self, phonemes: int) -> float:
        fixed, per = self.fit()
        return fixed + per * phonemes

    def phonemes_within(self, budget_s: float, floor: int, ceiling: int) -> int:
        """The most phonemes one chunk may have to be made within budget_s, in [floor, ceiling]."""
        fixed, per = self.fit()
        n = (budget_s - fixed) / per if per > 0 else ceiling
        return int(max(floor, min(ceiling, n)))
