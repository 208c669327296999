"""The openai SDK against kcc's server answers as against OpenAI's: an invalid field is 400
invalid_request_error (the SDK's BadRequestError) with a string code and the field as param;
a model the server does not have is 404 model_not_found (NotFoundError); kcc's and OpenAI's
speech model names speak. The in-process server of tests/test_server.py, its fake model."""
from __future__ import annotations

import openai
import pytest

from kcc.speech.serve.app import MODELS, HttpLimits
from kcc.speech.serve.request import ApiError
from test_server import client, json_error, post, request, serving


def _refusal(srv, **fields):
    body = {"model": "tts-1", "voice": "af_alloy", "input": "Hello.", "response_format": "pcm", **fields}
    body = {k: (openai.omit if v is ... else v) for k, v in body.items()}     # omit: the SDK leaves it out
    with pytest.raises(openai.APIStatusError) as info:
        client(srv).audio.speech.create(**body)
    return info.value


@pytest.mark.parametrize("fields, param, code, needle", [
    ({"speed": 9.0}, "speed", "invalid_value", "speed must be between 0.25 and 4.0"),
    ({"speed": "fast"}, "speed", "invalid_type", "speed must be a number"),
    ({"response_format": "ogg"}, "response_format", "invalid_value", "must be one of"),
    ({"input": ...}, "input", "missing_required_parameter", "'input' is required"),
    ({"input": "   "}, "input", "invalid_value", "'input' is empty"),
    ({"input": "a" * 4097}, "input", "string_above_max_length", "the limit is 4096"),
    ({"voice": 7}, "voice", "invalid_type", "'voice' must be a string"),
    ({"voice": "nobody_here"}, "voice", None, "nobody_here"),
    ({"instructions": 3}, "instructions", "invalid_type", "'instructions' must be a string"),
    ({"stream_format": "ndjson"}, "stream_format", "invalid_value", "'stream_format' must be"),
    ({"extra_body": {"lang_code": "xx"}}, "lang_code", "invalid_value", "language 'xx' is not supported"),
    ({"extra_body": {"seed": -1}}, "seed", "invalid_value", "seed must be in"),
    ({"extra_body": {"stream": "yes"}}, "stream", "invalid_type", "stream must be true or false"),
    ({"extra_body": {"normalization_options": 1}}, "normalization_options", "invalid_type", "must be an object"),
    ({"extra_body": {"volume_multiplier": -1}}, "volume_multiplier", "invalid_value", "between 0.0 and 10.0"),
])
def test_every_invalid_field_is_a_bad_request_naming_it(tmp_path, fields, param, code, needle):
    with serving(tmp_path, http=HttpLimits(max_body_bytes=1 << 20)) as srv:
        err = _refusal(srv, **fields)
    assert isinstance(err, openai.BadRequestError) and err.status_code == 400
    body = err.body                                   # the SDK's parsed error object
    assert body["type"] == "invalid_request_error" and body["param"] == param and needle in body["message"]
    assert isinstance(err.code, str) and (code is None or err.code == code)
    assert err.param == param


def test_a_body_that_is_not_json_is_a_bad_request(tmp_path):
    with serving(tmp_path) as srv:
        got = request(srv.port, body=b"{not json")
    err = json_error(*got)
    assert got[0] == 400 and err["code"] == "invalid_json" and err["param"] is None


@pytest.mark.parametrize("model", ["whisper-1", "gpt-4o", "Kokoro", ""])
def test_an_unknown_model_is_refused_as_openai_refuses_it(tmp_path, model):
    with serving(tmp_path) as srv:
        err = _refusal(srv, model=model)
    assert isinstance(err, openai.NotFoundError) and err.status_code == 404
    assert err.code == "model_not_found" and err.param == "model"
    assert f"The model `{model}` does not exist" in err.body["message"]


@pytest.mark.parametrize("model", MODELS)
def test_kcc_and_openai_speech_model_names_speak(tmp_path, model):
    with serving(tmp_path) as srv:
        audio = client(srv).audio.speech.create(model=model, voice="af_alloy", input="Hello.", response_format="pcm")
    assert len(audio.content) > 1000


def test_a_missing_model_reads_as_kokoro(tmp_path):
    """kcc's own page and scripts leave model out; OpenAI's SDK always sends it."""
    with serving(tmp_path) as srv:
        assert post(srv.port, {"input": "Hi.", "voice": "af_alloy", "response_format": "pcm"})[0] == 200


def test_other_statuses_keep_their_numbers_with_string_codes(tmp_path):
    with serving(tmp_path, http=HttpLimits(max_body_bytes=200)) as srv:
        err = _refusal(srv, input="x" * 300)
        assert err.status_code == 413 and err.code == "request_too_large"
        missing = request(srv.port, "GET", "/v1/nothing")
        assert missing[0] == 404 and json_error(*missing)["code"] == "not_found"
    assert ApiError(503, "busy").body()["error"]["code"] == "service_unavailable"
    assert ApiError(429, "slow down").body()["error"]["code"] == "rate_limit_exceeded"
    assert ApiError(401, "key", code="invalid_api_key").body()["error"] == {
        "message": "key", "type": "invalid_request_error", "param": None, "code": "invalid_api_key"}
