"""Pitch statistics of speech for the design's guard: the median F0 of the voiced frames and the
share of the audible frames that are voiced. A walk in style space can drift to a voice no
official one has (a squeak, a growl) or to breath and buzz that the speaker encoder still finds
similar; both show here before a listener hears them.

A normalised autocorrelation per 40 ms frame (hop 20 ms) at 8 kHz, lags for 60-400 Hz, through one
batched FFT: ~2 ms per second of audio. Frames 40 dB under the loudest are not audible; an audible
frame is voiced when its autocorrelation peak is >= VOICED (the YIN/ACF threshold family's usual
0.5: speech's vowels reach 0.7-0.95, noise and fricatives stay under 0.3)."""
from __future__ import annotations

import numpy as np

from kcc.speech.voice_design.mel import resample

RATE = 8_000
FRAME = 320                      # 40 ms
HOP = 160                        # 20 ms
F0_RANGE = (60.0, 400.0)         # Hz: every official voice's speaking range inside it
VOICED = 0.5
AUDIBLE_DB = 40.0


def pitch_stats(audio: np.ndarray, rate: int) -> tuple[float, float]:
    """(median F0 in Hz of the voiced frames, voiced share of the audible frames); (0.0, 0.0)
    when nothing is voiced."""
    x = resample(audio, rate, to=RATE).astype(np.float64)
    if x.size < FRAME:
        return 0.0, 0.0
    n = 1 + (x.size - FRAME) // HOP
    frames = np.lib.stride_tricks.sliding_window_view(x, FRAME)[::HOP][:n]
    frames = frames - frames.mean(axis=1, keepdims=True)
    energy = (frames ** 2).sum(axis=1)
    audible = energy >= energy.max() * 10 ** (-AUDIBLE_DB / 10) if energy.max() > 0 else np.zeros(n, bool)
    if not audible.any():
        return 0.0, 0.0
    f = frames[audible]
    spec = np.fft.rfft(f, 2 * FRAME, axis=1)
    acf = np.fft.irfft(spec * spec.conj(), axis=1)[:, :FRAME]
    lo, hi = int(RATE / F0_RANGE[1]), int(RATE / F0_RANGE[0])
    # the overlap shrinks with the lag: divide it out so long lags are not penalised
    norm = acf[:, lo:hi + 1] / np.maximum(acf[:, :1], 1e-12) * FRAME / (FRAME - np.arange(lo, hi + 1))
    # the shortest lag within 10% of the best peak: a period's multiples correlate as well
    best = norm.max(axis=1, keepdims=True)
    local = np.zeros_like(norm, bool)
    local[:, 1:-1] = (norm[:, 1:-1] >= norm[:, :-2]) & (norm[:, 1:-1] >= norm[:, 2:])
    near = local & (norm >= 0.9 * best)
    lag = np.where(near.any(axis=1), near.argmax(axis=1), norm.argmax(axis=1))
    peak = norm[np.arange(len(lag)), lag]
    voiced = peak >= VOICED
    if not voiced.any():
        return 0.0, 0.0
    f0 = RATE / (lo + lag[voiced])
    return float(np.median(f0)), float(voiced.mean())

