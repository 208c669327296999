"""The one speech request every front-end builds: each field declared once, with its default,
range, help, environment variable and error message.

`kcc say` / `kcc synth` options (add_request_args), the server's JSON body (kcc.speech.serve.request
reads FIELDS by their `key`), the batch manifest's columns (`column`), `kcc.Kokoro` / `kcc.KPipeline`
keywords and Wyoming's events all go through `SpeechRequest.build` (or a field's `check`), so a
value out of range is the same RequestError with the same message through every door; each door
only wraps it in its own form (exit 2, HTTP 422 naming the JSON key, a manifest line).

Deciding the language and voice from a request is kcc.speech.voices.speaking (one function for
every door); planning its chunks is `chunking` below (a whole file is never cut for latency).
This module is light on purpose: `kcc --help` builds its options from it without importing the
G2P or the compiler.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields as dataclass_fields, replace
from typing import Callable

from kcc.model.kokoro import MAX_SEED, MAX_SPEED, MIN_SPEED
from kcc.speech.g2p.errors import G2PError
from kcc.speech.audio.formats import FORMATS
from kcc.speech.languages import ALIASES, LANGUAGES, from_tag


class SayError(ValueError):
    """The request cannot be spoken; the message names the problem."""


class NothingToSay(SayError):
    """The text is empty, or none of it has phonemes to speak (only punctuation, say)."""


class RequestError(SayError):
    """A field of a speech request is out of its declared range; `.field` names it. The message
    shows the value as text ('got 9'), so the command line's '9' and JSON's 9 read the same."""

    def __init__(self, field: str, message: str, kind: str = "value"):
        """kind: 'value' (out of range, not one of the choices) or 'type' (not a number, a string...)."""
        super().__init__(message)
        self.field, self.message, self.kind = field, message, kind


class EmptyText(RequestError, NothingToSay):
    """The request's text is empty or only whitespace."""


class LanguageError(RequestError, G2PError):
    """The request names a language kcc does not speak (a G2PError too, as the G2P's own refusal was)."""


# Every spelling of a language the README lists: the codes, the one-letter codes and short
# forms (a, en, j...), BCP 47 tags (en-US, ja-JP) and 'auto'.
LANGUAGE_SPELLINGS = ("auto", *LANGUAGES, *ALIASES, *(lang.tag for lang in LANGUAGES.values()))
_SPELLED = {**{s.lower(): from_tag(s) for s in LANGUAGE_SPELLINGS[1:]}, "auto": "auto"}


def _shown(value) -> str:
    """A refused value as a message shows it: as text ('9' from a command line and 9 from JSON read
    the same), long ones shortened (a 4000-digit JSON number is not echoed back)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "a number of more than 19 digits"
    text = str(value)
    return text if len(text) <= 40 else text[:40] + "..."


def _speed(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise RequestError("speed", f"speed must be a number, got {_shown(value)}", "type")
    try:
        s = float(value)
    except OverflowError:                # an integer too large for a float: a number, out of range
        s = math.inf
    except (TypeError, ValueError):
        raise RequestError("speed", f"speed must be a number, got {_shown(value)}", "type") from None
    if not (math.isfinite(s) and MIN_SPEED <= s <= MAX_SPEED):
        raise RequestError("speed", f"speed must be between {MIN_SPEED} and {MAX_SPEED}, got {_shown(value)}")
    return s


def _seed(value) -> int:
    """A whole number in [0, 2**31 - 1], the C RNG's range; anything else is refused, never
    wrapped or rounded (a float, even 1.0 or JSON's 1e3; a bool; '1.5')."""
    if isinstance(value, (bool, float)):
        raise RequestError("seed", f"seed must be an integer, got {_shown(value)}", "type")
    try:
        s = int(value)
    except (TypeError, ValueError, OverflowError):
        raise RequestError("seed", f"seed must be an integer, got {_shown(value)}", "type") from None
    if not 0 <= s <= MAX_SEED:
        raise RequestError("seed", f"seed must be in [0, {MAX_SEED}], got {_shown(value)}")
    return s


def language_code(value) -> str:
    """Any spelling of a language the README lists ('a', 'en', 'en-us', 'en-US', 'en_gb', 'J',
    'auto', None) -> its code, or 'auto'; anything else (a region kcc has no voice for, '') is
    refused by name."""
    if value is None or isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    spelled = str(value).strip().lower().replace("_", "-") if isinstance(value, str) else None
    code = _SPELLED.get(spelled)
    if code is None:
        raise LanguageError("lang", f"language {value!r} is not supported; use one of {', '.join(LANGUAGE_SPELLINGS[:10])} "
                                   f"(or a one-letter code, or a tag such as en-GB)")
    return code


def _voice(value):
    if value is None or hasattr(value, "shape"):              # a voice pack as an array (the Python API)
        return value
    if not isinstance(value, str):
        raise RequestError("voice", f"voice must be a name, a path or a blend such as 'a:0.6,b:0.4', "
                                    f"got {type(value).__name__}")
    if not value.strip():
        return None
    if len(value) > 4096:
        raise RequestError("voice", f"voice has {len(value)} characters; the limit is 4096")
    return value.strip()


def _format(value):
    if value is None:
        return None
    if not isinstance(value, str) or value.lower() not in FORMATS:
        raise RequestError("format", f"format must be one of {', '.join(FORMATS)}, got {_shown(value)}")
    return value.lower()


def _stream(value) -> bool:
    if not isinstance(value, bool):
        raise RequestError("stream", f"stream must be true or false, got {_shown(value)}", "type")
    return value


def _text(value, max_chars: int | None = None) -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8", "surrogateescape")       # kcc.speech.g2p reports bad bytes by offset
    if not isinstance(value, str):
        raise RequestError("text", f"text must be a string, got {type(value).__name__}")
    if max_chars is not None and len(value) > max_chars:
        raise RequestError("text", f"text has {len(value)} characters; the limit is {max_chars}")
    if not value.strip():
        raise EmptyText("text", "text is empty")
    return value


def _max_chars(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise RequestError("max_chars", f"max_chars must be a positive whole number, got {_shown(value)}")
    return value


@dataclass(frozen=True)
class Field:
    """One request field. flag: its command-line option; key: its name in the server's JSON body
    (OpenAI's and Kokoro-FastAPI's names); column: its batch manifest column; env: the variable
    a server reads its default from."""
    name: str
    help: str
    check: Callable
    default: object = None
    flag: str | None = None
    key: str | None = None
    column: str | None = None
    env: str | None = None
    cli_type: Callable = str            # the command line hands the check the string (one message for all doors)
    metavar: str | None = None
    choices: tuple | None = None


FIELDS: dict[str, Field] = {f.name: f for f in (
    Field("text", "the text to speak (UTF-8)", _text, key="input", column="text"),
    Field("voice", "voice: NAME, PATH (.pt/.npy/.npz:member) or a blend 'a:0.6,b:0.4' (default: the language's "
          "own voice, af_heart for English)", _voice, flag="--voice", key="voice", column="voice", env="KCC_VOICE"),
    Field("lang", "language of the text: en-us / a / en, en-gb / b, ja / j, zh / z, es / e, fr-fr / f / fr, hi / h, "
          "it / i, pt-br / p / pt, or a tag such as en-GB (default auto: from the voice, else the text's script)",
          language_code, default="auto", flag="--lang", key="lang_code", column="lang", metavar="LANG"),
    Field("speed", f"speaking rate, {MIN_SPEED:g} to {MAX_SPEED:g} (default 1)", _speed, default=1.0, flag="--speed",
          key="speed", column="speed"),
    Field("seed", f"seed of the sine source's noise, 0 to {MAX_SEED} (chunk i uses seed + i; default 0)", _seed,
          default=0, flag="--seed", key="seed", column="seed"),
    Field("format", f"audio format: {', '.join(FORMATS)} (default: from the output's extension; the server: mp3)",
          _format, flag="--format", key="response_format", column="format", choices=tuple(FORMATS)),
    Field("stream", "audio as it is made: the first chunk may end early, at a boundary of the text (whole files "
          "never do)", _stream, default=False, key="stream"),
    Field("max_chars", "the longest text a request may carry, in characters", _max_chars, flag="--max-chars",
          env="KCC_MAX_CHARS", cli_type=int),
)}


@dataclass(frozen=True)
class SpeechRequest:
    """A checked request: build it with SpeechRequest.build (every door does)."""
    text: str
    voice: object = None                 # a spec string, a pack array, or None (the language's voice)
    lang: str = "auto"                   # a language code, or 'auto'
    speed: float = 1.0
    seed: int = 0
    format: str | None = None
    stream: bool = False

    @classmethod
    def build(cls, text, max_chars: int | None = None, **values) -> "SpeechRequest":
        """Each value through its field's check (None: the declared default); RequestError names
        the first field out of range."""
        own = {f.name: f.default for f in dataclass_fields(cls)}
        unknown = sorted(set(values) - set(own))
        if unknown:
            raise TypeError(f"unknown request field(s): {', '.join(unknown)}")
        checked = {"text": _text(text, _max_chars(max_chars))}
        for name, default in own.items():
            value = values.get(name)
            if name == "text" or value is None:      # the default (a door's class may set its own)
                continue
            field = FIELDS.get(name)
            checked[name] = value if field is None else field.check(value)   # None: a door's own field
        return cls(**checked)

    def but(self, **changes) -> "SpeechRequest":
        return replace(self, **changes)


def add_request_args(parser, *names: str, defaults: dict | None = None) -> None:
    """The command-line options of the named fields, from their declarations."""
    for name in names:
        f = FIELDS[name]
        default = (defaults or {}).get(name, f.default)
        kw = {"default": default, "help": f.help}
        if f.choices:
            kw["choices"] = f.choices
        if f.metavar:
            kw["metavar"] = f.metavar
        if f.cli_type is not str:
            kw["type"] = f.cli_type
        parser.add_argument(f.flag, **kw)


# -- chunking: the one plan of a request's chunks -------------------------------------------------------
# A stream's first chunks are short so that audio starts early, and end only where the text
# allows (kcc.speech.text.iter_chunks cuts a short chunk at a sentence, clause or comma, else
# before a phrase's first word, and inside a phrase only when none comes within 3 x the limit);
# each next one may be 3 x longer, until the plan's limit. The numbers are fixed, not measured:
# the same request gives the same chunks, hence the same bytes, at any load.
STREAM_FIRST_PHONEMES = 20
STREAM_GROWTH = 3.0


def chunk_ramp(first: int = STREAM_FIRST_PHONEMES, limit: int = 510, growth: float = STREAM_GROWTH) -> list[int]:
    """The first chunks' phoneme limits: first, first * growth, ... while below `limit`."""
    if first < 1 or limit < 1:
        raise ValueError(f"chunk limits must be positive, got first={first}, limit={limit}")
    if not growth > 1:
        raise ValueError(f"the ramp must grow, got growth={growth}")
    ramp, n = [], float(first)
    while n < limit:
        ramp.append(int(n))
        n *= growth
    return ramp


def chunking(stream: bool, limit: int = 510, first: int = STREAM_FIRST_PHONEMES) -> dict:
    """kcc.speech.engine.plan's first_limit / min_rest for a request. A whole file (stream False):
    none: a chunk ends only where the text does (sentence, else clause, else the model's limit),
    whole sentences sharing one up to kcc.speech.text.PACK_PHONEMES (every request, streams too).
    A stream: the ramp, and a paragraph is cut short only when at least twice the first limit
    follows the cut, so a short sentence stays whole."""
    if not stream:
        return {"first_limit": None, "min_rest": 0}
    ramp, min_rest = chunk_plan(first, limit)
    return {"first_limit": ramp, "min_rest": min_rest}


def chunk_plan(first: int, limit: int, growth: float = STREAM_GROWTH) -> tuple[list[int], int]:
    """(the ramp, min_rest): a paragraph is cut short only when at least twice the first chunk's
    limit follows the cut, so a short sentence ("Hello there.") stays whole."""
    return chunk_ramp(first, limit, growth), 2 * first
