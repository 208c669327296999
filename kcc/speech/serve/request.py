"""The OpenAI speech request body -> a checked SpeechRequest, or a named ApiError.

Rules, as OpenAI's API answers: every invalid request is 400 invalid_request_error with a string
code and, for a field, the field as `param`: a body that is not a JSON object (bad UTF-8, not JSON,
NaN/Infinity, nesting deeper than the parser allows, integers over Python's digit limit:
invalid_json), a field of the wrong type (invalid_type), missing (missing_required_parameter),
too long (string_above_max_length) or out of range (invalid_value). Unknown fields are ignored,
so clients written for OpenAI or Kokoro-FastAPI
(lang_code, normalization_options, download_format, return_download_link, ...) work unchanged.

The speech fields are kcc.speech.request's declarations, read by their JSON `key` (input, voice,
lang_code, speed, seed, response_format, stream) and checked by the functions every other door
uses: an out-of-range value carries the same RequestError message as through `kcc say`, here as
a 400 naming the key.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from kcc.model.kokoro import MAX_SPEED, MIN_SPEED      # the one speed range (re-exported)
from kcc.speech.audio.formats import STREAMABLE
from kcc.speech.request import FIELDS, RequestError
from kcc.speech.request import SpeechRequest as Request
from kcc.speech.serve.limits import MAX_INPUT_CHARS  # noqa: F401  (re-exported; the max_chars default here)

MAX_INSTRUCTIONS_CHARS = 4096


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, headers: dict | None = None,
                 code: str | None = None):
        """code: OpenAI's error code (a string, as OpenAI's API gives it): invalid_type,
        missing_required_parameter, string_above_max_length, invalid_api_key, model_not_found...;
        None: the status's (invalid_value for a 400 that names its param: a value out of range or
        not one of those allowed)."""
        super().__init__(message)
        self.status, self.message, self.param, self.headers = status, message, param, headers or {}
        self.code = code

    def body(self) -> dict:
        kind = "invalid_request_error" if self.status < 500 else "server_error"
        return {"error": {"message": self.message, "type": kind, "param": self.param,
                          "code": self.code or status_code(self.status, self.param)}}


# The string code of an error that names none (OpenAI's API gives a string or null, never a number).
STATUS_CODES = {400: "invalid_request", 401: "invalid_api_key", 403: "forbidden", 404: "not_found",
                405: "method_not_allowed", 408: "request_timeout", 413: "request_too_large",
                429: "rate_limit_exceeded", 499: "cancelled", 500: "server_error", 503: "service_unavailable",
                504: "timeout"}


def status_code(status: int, param: str | None = None) -> str:
    if status == 400 and param is not None:
        return "invalid_value"
    return STATUS_CODES.get(status, f"http_{status}")


@dataclass(frozen=True)
class SpeechRequest(Request):
    """kcc.speech.request.SpeechRequest with what only the HTTP door carries."""
    stream: bool = True               # chunked as made; false: one whole file
    model: str = "kokoro"
    sse: bool = False
    volume: float = 1.0

    @property
    def response_format(self) -> str:
        return self.format or "mp3"   # OpenAI's default


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def parse_json(body: bytes) -> dict:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"request body is not valid UTF-8 (byte {body[exc.start]:#04x} at offset {exc.start})",
                       code="invalid_json") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except RecursionError:
        raise ApiError(400, "request body is nested too deeply", code="invalid_json") from None
    except ValueError as exc:          # JSONDecodeError, NaN/Infinity, over the integer digit limit
        raise ApiError(400, f"request body is not valid JSON: {str(exc)[:200]}", code="invalid_json") from None
    if not isinstance(doc, dict):
        raise ApiError(400, f"request body must be a JSON object, got {type(doc).__name__}", code="invalid_json")
    return doc


def _string(doc: dict, key: str, default=None, limit: int = 256) -> str | None:
    value = doc.get(key, default)
    if value is None:
        return default
    if not isinstance(value, str):
        raise ApiError(400, f"'{key}' must be a string, got {type(value).__name__}", key, code="invalid_type")
    if len(value) > limit:
        raise ApiError(400, f"'{key}' has {len(value)} characters; the limit is {limit}", key,
                       code="string_above_max_length")
    return value


def _number(doc: dict, key: str, default: float, lo: float, hi: float) -> float:
    value = doc.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ApiError(400, f"'{key}' must be a number, got {type(value).__name__}", key, code="invalid_type")
    if not (isinstance(value, float) or abs(value) <= 10 ** 9) or not math.isfinite(value) or not lo <= value <= hi:
        raise ApiError(400, f"'{key}' must be between {lo} and {hi}", key)
    return float(value)


def _bool(doc: dict, key: str, default: bool) -> bool:
    value = doc.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ApiError(400, f"'{key}' must be true or false", key, code="invalid_type")
    return value


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ApiError(400, f"'input' has a lone surrogate (U+{ord(text[exc.start]):04X}) at character "
                            f"{exc.start}; send real characters", "input") from None
    if not text.strip():
        raise ApiError(400, "'input' is empty", "input")


def parse_speech(body: bytes, max_input_chars: int = MAX_INPUT_CHARS) -> SpeechRequest:
    doc = parse_json(body)
    if "input" not in doc:
        raise ApiError(400, "'input' is required", "input", code="missing_required_parameter")
    text = _string(doc, "input", limit=max_input_chars)
    if text is None:
        raise ApiError(400, "'input' must be a string, got null", "input", code="invalid_type")
    _check_text(text)
    voice = doc.get("voice")
    if isinstance(voice, dict):
        voice = voice.get("id")
        if not isinstance(voice, str):
            raise ApiError(400, "'voice' as an object needs a string 'id'", "voice", code="invalid_type")
    elif voice is not None and not isinstance(voice, str):
        raise ApiError(400, f"'voice' must be a string or {{\"id\": ...}}, got {type(voice).__name__}", "voice",
                       code="invalid_type")
    _string(doc, "instructions", limit=MAX_INSTRUCTIONS_CHARS)      # accepted, not used (see kcc/speech/serve/app.py)
    for key in ("normalization_options",):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise ApiError(400, f"'{key}' must be an object", key, code="invalid_type")
    fmt = _string(doc, "response_format", "mp3")
    if fmt not in STREAMABLE:
        raise ApiError(400, f"'response_format' must be one of {', '.join(STREAMABLE)}", "response_format")
    stream_format = _string(doc, "stream_format", "audio")
    if stream_format not in ("audio", "sse"):
        raise ApiError(400, "'stream_format' must be 'audio' or 'sse'", "stream_format")
    try:
        return SpeechRequest.build(
            text, max_chars=max_input_chars, voice=voice, format=fmt, lang=doc.get("lang_code"),
            speed=_json_number(doc, "speed"), seed=_json_number(doc, "seed"), stream=doc.get("stream", True),
            model=_string(doc, "model", "kokoro"), sse=stream_format == "sse",
            volume=_number(doc, "volume_multiplier", 1.0, 0.0, 10.0))
    except RequestError as exc:       # the declarations' own message, naming the body's key
        raise ApiError(400, exc.message, FIELDS[exc.field].key,
                       code="invalid_type" if exc.kind == "type" else None) from None


def _json_number(doc: dict, key: str):
    """A numeric field as JSON gives it: a string is no number here (the command line's strings
    are parsed by the declarations, JSON's types are not)."""
    value = doc.get(key)
    if isinstance(value, str):
        raise ApiError(400, f"{key} must be a number, got {value!r}", key, code="invalid_type")
    return value
