"""OpenAI's `stream_format: "sse"` events, plus kcc's word timestamps as extra events.

`speech.audio.delta` carries base64 of the response format's bytes as they are made;
`speech.audio.words` (a kcc extension; OpenAI clients skip unknown types) carries each chunk's
word timestamps in seconds from the start of the audio; `speech.audio.done` ends the stream with
usage: input_tokens are the phoneme ids spoken, output_tokens the audio frames made (one per
600 samples: Kokoro's 40 frames a second). An `error` event ends a stream that failed after
its first byte.
"""
from __future__ import annotations

import base64
import json


def event(doc: dict) -> bytes:
    return f"data: {json.dumps(doc, ensure_ascii=False)}\n\n".encode("utf-8")


def delta(data: bytes) -> bytes:
    return event({"type": "speech.audio.delta", "audio": base64.b64encode(data).decode("ascii")})


def words(chunk) -> bytes:
    return event({"type": "speech.audio.words", "chunk": chunk.index, "words": chunk.words})


def done(input_tokens: int, output_tokens: int) -> bytes:
    return event({"type": "speech.audio.done", "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                                                          "total_tokens": input_tokens + output_tokens}})


def error(err) -> bytes:
    return event({"type": "error", **err.body()})
