"""The OpenAI speech request body -> a checked SpeechRequest, or a named ApiError.

Rules: a body that is not a JSON object (bad UTF-8, not JSON, NaN/Infinity, nesting deeper than
the parser allows, integers over Python's digit limit) is 400; a field of the wrong type or out
of range is 422. Unknown fields are ignored, so clients written for OpenAI or Kokoro-FastAPI
(lang_code, normalization_options, download_format, return_download_link, ...) work unchanged.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from kcc.model.kokoro import MAX_SPEED, MIN_SPEED      # the one speed range (re-exported)
from kcc.speech.g2p.g2p import G2PError, canonical_language
from kcc.speech.engine import SayError, check_seed
from kcc.speech.audio.formats import STREAMABLE

MAX_INPUT_CHARS = 4096                 # OpenAI's limit
MAX_INSTRUCTIONS_CHARS = 4096


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, headers: dict | None = None,
                 code: str | None = None):
        """code: OpenAI's error code where it has one (invalid_api_key); else the status."""
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, headers or {}
        self.code = code

    def body(self) -> dict:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param,
                          "code": self.code or self.status}}


@dataclass(frozen=True)
class SpeechRequest:
    text: str
    voice: str | None
    model: str = "kokoro"
    response_format: str = "mp3"
    speed: float = 1.0
    stream: bool = True               # chunked as made; false: one whole file
    sse: bool = False
    lang: str | None = None
    seed: int = 0
    volume: float = 1.0


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_json(body: bytes) -> dict:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"request body is not valid UTF-8 (byte {body[exc.start]:#04x} at offset {exc.start})") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ApiError(400, "request body is nested too deeply") from None
    except ValueError as exc:          # JSONDecodeError, NaN/Infinity, over the integer digit limit
        raise ApiError(400, f"request body is not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(doc, dict):
        raise ApiError(400, f"request body must be a JSON object, got {type(doc).__name__}")
    return doc


def _string(doc: dict, key: str, default=None, limit: int = 256) -> str | None:
    value = doc.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ApiError(422, f"'{key}' must be a string, got {type(value).__name__}", key)
    if len(value) > limit:
        raise ApiError(422, f"'{key}' has {len(value)} characters; the limit is {limit}", key)
    return value


def _number(doc: dict, key: str, default: float, lo: float, hi: float) -> float:
    value = doc.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(422, f"'{key}' must be a number, got {type(value).__name__}", key)
    if not (isinstance(value, float) or abs(value) <= 10 ** 9) or not math.isfinite(value) or not lo <= value <= hi:
        raise ApiError(422, f"'{key}' must be between {lo} and {hi}", key)
    return float(value)


def _bool(doc: dict, key: str, default: bool) -> bool:
    value = doc.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(422, f"'{key}' must be true or false", key)
    return value


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ApiError(422, f"'input' has a lone surrogate (U+{ord(text[exc.start]):04X}) at character "
                            f"{exc.start}; send real characters", "input") from None
    if not text.strip():
        raise ApiError(422, "'input' is empty", "input")


def parse_speech(body: bytes, max_input_chars: int = MAX_INPUT_CHARS) -> SpeechRequest:
    doc = parse_json(body)
    if "input" not in doc:
        raise ApiError(422, "'input' is required", "input")
    text = _string(doc, "input", limit=max_input_chars)
    if text is None:
        raise ApiError(422, "'input' must be a string, got null", "input")
    _check_text(text)
    voice = doc.get("voice")
    if isinstance(voice, dict):
        voice = voice.get("id")
        if not isinstance(voice, str):
            raise ApiError(422, "'voice' as an object needs a string 'id'", "voice")
    elif voice is not None and not isinstance(voice, str):
        raise ApiError(422, f"'voice' must be a string or {{\"id\": ...}}, got {type(voice).__name__}", "voice")
    _string(doc, "instructions", limit=MAX_INSTRUCTIONS_CHARS)      # accepted, not used (see kcc/speech/serve/app.py)
    for key in ("normalization_options",):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise ApiError(422, f"'{key}' must be an object", key)
    fmt = _string(doc, "response_format", "mp3")
    if fmt not in STREAMABLE:
        raise ApiError(422, f"'response_format' must be one of {', '.join(STREAMABLE)}", "response_format")
    stream_format = _string(doc, "stream_format", "audio")
    if stream_format not in ("audio", "sse"):
        raise ApiError(422, "'stream_format' must be 'audio' or 'sse'", "stream_format")
    lang = _string(doc, "lang_code", None, limit=16)
    if lang is not None:              # Kokoro-FastAPI's one-letter codes ('a', 'j', ...) included
        try:
            lang = canonical_language(lang)
        except G2PError as exc:
            raise ApiError(422, str(exc), "lang_code") from None
    seed = doc.get("seed", 0)
    try:
        if not isinstance(seed, int):     # JSON: 1e3 and 1.0 are numbers, not the integers a seed is
            raise SayError(f"seed must be an integer, got {seed!r}")
        seed = check_seed(seed)           # the one seed check and its message (kcc.speech.engine)
    except SayError as exc:
        raise ApiError(422, str(exc), "seed") from None
    return SpeechRequest(
        text=text, voice=voice, model=_string(doc, "model", "kokoro"), response_format=fmt,
        speed=_number(doc, "speed", 1.0, MIN_SPEED, MAX_SPEED), stream=_bool(doc, "stream", True),
        sse=stream_format == "sse", lang=lang, seed=seed,
        volume=_number(doc, "volume_multiplier", 1.0, 0.0, 10.0))
