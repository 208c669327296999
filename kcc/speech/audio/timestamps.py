"""Word timestamps from the predicted durations (issue 10).

The duration predictor gives each token an integer number of alignment frames; a frame is 600
samples at 24 kHz (the decoder's 2x F0 upsampling times the generator's 300-sample hop), and
the first and last tokens are the boundary 0s. A word spans its phonemes' frames; the joining
spaces between two words are split at their midpoint and the boundary tokens go to the first
and last word, so the words tile the chunk's audio: monotonic, no gaps, from 0 to its end.
Words that produced no ids get a zero-length span where they stand.
"""
from __future__ import annotations

import numpy as np

from kcc.speech.g2p.g2p import Encoded

from kcc.model.kokoro import SAMPLE_RATE, SAMPLES_PER_FRAME  # noqa: F401  (re-exported)


class TimestampError(ValueError):
    pass


def word_timestamps(encoded: Encoded, durations, n_samples: int | None = None, offset: int = 0,
                    sample_rate: int = SAMPLE_RATE) -> list[dict]:
    """[{word, phonemes, start_s, end_s}] for one chunk; `offset` (samples) places it in the joined audio.

    If the waveform length differs from sum(durations) * 600, boundaries are scaled to it so
    the words still cover exactly the audio there is.
    """
    d = np.asarray(durations).reshape(-1)
    n_ids = len(encoded.ids)
    if d.size != n_ids + 2:
        raise TimestampError(f"{d.size} durations for {n_ids} phoneme ids; expected {n_ids + 2} "
                             "(one per id plus the two boundary tokens)")
    if d.dtype.kind not in "iu" or (d < 0).any():
        raise TimestampError(f"durations must be non-negative integers, got dtype {d.dtype}, min {d.min()}")
    edges = np.concatenate([[0], np.cumsum(d.astype(np.int64))]) * SAMPLES_PER_FRAME
    total = int(edges[-1]) if n_samples is None else int(n_samples)
    scale = total / edges[-1] if edges[-1] else 0.0
    spans: dict[int, list[float]] = {}
    for k, w in enumerate(encoded.word_of):          # token k + 1 covers edges[k + 1] .. edges[k + 2]
        if w < 0:
            continue
        s, e = edges[k + 1] * scale, edges[k + 2] * scale
        span = spans.setdefault(w, [s, e])
        span[1] = e
    spoken = sorted(spans)
    bounds = [0.0] + [(spans[a][1] + spans[b][0]) / 2 for a, b in zip(spoken, spoken[1:])] + [float(total)]
    out, j = [], 0
    for wi, word in enumerate(encoded.words):
        if j < len(spoken) and spoken[j] == wi:
            start, end = bounds[j], bounds[j + 1]
            j += 1
        else:
            start = end = bounds[j]                  # no ids: zero length where it stands
        out.append({"word": word.text, "phonemes": word.phonemes,
                    "start_s": round((offset + start) / sample_rate, 6),
                    "end_s": round((offset + end) / sample_rate, 6)})
    return out
