"""The servers' limits and their defaults, in one light module: `kcc serve` / `kcc wyoming` take
their flags' defaults from these dataclasses (kcc.speech.serve.cli), and docs/LIMITS.md and the
README's table are generated from them, so a default is written once."""
from __future__ import annotations

from dataclasses import dataclass

from kcc.speech.request import STREAM_FIRST_PHONEMES, STREAM_GROWTH

MAX_INPUT_CHARS = 4096                 # OpenAI's limit


@dataclass
class Limits:
    workers: int = 2
    max_queue: int = 8
    request_timeout_s: float = 120.0
    chunk_phonemes: int = 200           # a streamed chunk's most phonemes: its synthesis time stays a small part of the deadline
    first_chunk_phonemes: int = STREAM_FIRST_PHONEMES   # a stream's first chunk's most phonemes (it ends at a boundary of the text)
    chunk_growth: float = STREAM_GROWTH                 # each next streamed chunk's limit, until chunk_phonemes
    # The first chunk's leading silence, at most (frames of 25 ms; None: the model's ~0.3 s).
    # Cutting it makes the first audio ~8% sooner but the model makes the first phoneme's
    # onset in those frames: Whisper WER of chunked sentences 3.8% -> 16.2% at 4 frames
    # (bench/results/chunk_join_wer.md), so it is off unless asked for.
    first_lead_frames: int | None = None
    cores: int = 0                      # kernel threads shared among running syntheses (0: fixed)


@dataclass
class HttpLimits:
    max_body_bytes: int = 64 * 1024
    max_input_chars: int = MAX_INPUT_CHARS
    max_connections: int = 64        # requests in flight, all routes but /health
    body_timeout_s: float = 10.0     # a slow body holds a request slot: as long as a slow head may
    # A streamed response's client may make the server wait on its reading (the send blocked)
    # at most as long as the audio sent so far lasts, plus this: a player reading in real time
    # never falls further behind, a client reading slower than real time is cut.
    read_lag_s: float = 30.0
    # A response's writing, first byte to last: generous, as a player that reads in real time
    # takes as long as the audio lasts (4096 characters speak for about 5 minutes).
    response_timeout_s: float = 900.0
