"""A refused or failed synthesis said to Home Assistant: the Wyoming `error` event's code and text.

The service's errors (kcc.speech.serve.request.ApiError) are written for HTTP clients: a status,
a JSON field name, "GET /v1/audio/voices lists the names". A Home Assistant user reads the text
in its log and voice pipeline debug view, so it says what went wrong and what to change there
(the voice picked for the assistant, the text, the language), with a code named for the cause."""
from __future__ import annotations

import re

from wyoming.error import Error

from kcc.speech.serve.request import ApiError

VOICE_HINT = ("pick one of the voices this kcc server lists in Home Assistant (Settings > Voice assistants > "
              "the assistant > Text-to-speech > Voice)")
_HTTP_HINT = re.compile(r";?\s*GET /v1/\S+ lists the names")


def wyoming_error(err: ApiError) -> Error:
    """The `error` event for a service error: no HTTP status, route or field name in it."""
    text = _HTTP_HINT.sub("", err.message).strip()
    if err.status == 503:
        return Error(text="kcc is busy with other requests; say it again in a moment", code="busy")
    if err.status == 413:
        return Error(text=f"{text}; shorten the text Home Assistant sends", code="text-too-long")
    if err.param == "voice":
        return Error(text=f"{text}; {VOICE_HINT}", code="unknown-voice")
    if err.param == "lang_code":
        return Error(text=f"{text}; choose a voice of a language kcc speaks for this assistant", code="unknown-language")
    if err.param == "input":
        return Error(text=f"the text cannot be spoken: {text}", code="bad-text")
    if err.status == 499:
        return Error(text="the synthesis was cancelled", code="cancelled")
    return Error(text=f"the synthesis failed: {text}", code="synthesis-failed")
