"""Reading Wyoming events from an untrusted client, bounded, and checking their fields.

The wyoming package's async_read_event reads a JSON header line, then exactly the
`data_length` and `payload_length` bytes the header declares: a client that declares 400 MB
makes the server allocate 400 MB. Here each length is checked against WyomingLimits before
anything is read, and a header that is not a JSON object with a string `type` is refused by
name (BadEvent) rather than dropping the connection without a word. Field checks
(`text_field`, `voice_field`) turn a wrong type into a BadEvent too.
"""
from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

from wyoming.event import Event
from wyoming.tts import SynthesizeVoice


@dataclass(frozen=True)
class WyomingLimits:
    max_header_bytes: int = 64 * 1024     # the JSON header line (asyncio's StreamReader default limit)
    max_data_bytes: int = 64 * 1024       # a synthesize holds at most 4096 characters of text
    max_payload_bytes: int = 1 << 20      # a TTS server is sent no audio; room for other clients' events
    write_stall_s: float = 30.0           # one event's write may wait this long for a client that does not read
    # Idle deadlines (kcc.speech.serve.listener.Slot): a complete event must arrive within these, or
    # the connection is closed; none while an event is being answered (a synthesis streaming out).
    first_event_s: float = 10.0           # the first event, from the first byte
    idle_s: float = 60.0                  # the next event, after one is answered
    streaming_idle_s: float = 300.0       # the next synthesize-chunk/-stop while a text stream is open


class BadEvent(ValueError):
    """The client sent an event the server refuses; `fatal`: the stream cannot be resynchronised
    (a length over its cap or a header that is not JSON), so the connection is closed after the
    error event."""

    def __init__(self, message: str, fatal: bool = False):
        super().__init__(message)
        self.fatal = fatal


def _length(header: dict, key: str, cap: int) -> int:
    value = header.get(key)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadEvent(f"{key} must be a non-negative integer, got {json.dumps(value)[:40]}", fatal=True)
    if value > cap:
        raise BadEvent(f"{key} {value} is over this server's limit of {cap} bytes", fatal=True)
    return value


async def read_event(reader: asyncio.StreamReader, limits: WyomingLimits) -> Event | None:
    """The next event, None at the end of the stream; BadEvent for one the server refuses."""
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise BadEvent("the connection ended inside an event header", fatal=True) from None
    except asyncio.LimitOverrunError:
        raise BadEvent(f"event header over this server's limit of {limits.max_header_bytes} bytes", fatal=True) from None
    if len(line) > limits.max_header_bytes:
        raise BadEvent(f"event header over this server's limit of {limits.max_header_bytes} bytes", fatal=True)
    try:
        header = json.loads(line)
    except (ValueError, RecursionError):
        raise BadEvent("event header is not JSON", fatal=True) from None
    if not isinstance(header, dict):
        raise BadEvent("event header must be a JSON object", fatal=True)
    data_length = _length(header, "data_length", limits.max_data_bytes)
    payload_length = _length(header, "payload_length", limits.max_payload_bytes)
    try:                                   # both read before either is parsed: the stream stays in step
        raw = await reader.readexactly(data_length) if data_length else b""
        payload = await reader.readexactly(payload_length) if payload_length else None
    except asyncio.IncompleteReadError:
        raise BadEvent("the connection ended inside an event's data or payload", fatal=True) from None
    data = header.get("data") or {}
    if raw:
        try:
            extra = json.loads(raw)
        except (ValueError, RecursionError):
            raise BadEvent("event data is not JSON") from None
        if not isinstance(extra, dict) or not isinstance(data, dict):
            raise BadEvent("event data must be a JSON object")
        data = {**data, **extra}
    kind = header.get("type")
    if not isinstance(kind, str) or not kind:
        raise BadEvent("event 'type' must be a non-empty string")
    if not isinstance(data, dict):
        raise BadEvent("event data must be a JSON object")
    return Event(type=kind, data=data, payload=payload)


def text_field(data: dict, key: str = "text", required: bool = True) -> str:
    value = data.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise BadEvent(f"'{key}' must be a string, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise BadEvent(f"'{key}' holds a lone surrogate") from None
    return value


def voice_field(data: dict) -> SynthesizeVoice | None:
    """The `voice` object ({name, language, speaker}, each a string or null), or None."""
    voice = data.get("voice")
    if voice is None:
        return None
    if not isinstance(voice, dict):
        raise BadEvent(f"'voice' must be an object, got {type(voice).__name__}")
    for key in ("name", "language", "speaker"):
        if voice.get(key) is not None and not isinstance(voice[key], str):
            raise BadEvent(f"'voice.{key}' must be a string, got {type(voice[key]).__name__}")
    return SynthesizeVoice(name=voice.get("name"), language=voice.get("language"), speaker=voice.get("speaker"))
