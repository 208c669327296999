"""Kokoro-FastAPI's clients against `kcc serve`: the requests they send, written here in the
shape of its README, web UI and routers (remsky/Kokoro-FastAPI), on tests/test_server.py's
in-process server with its fakes."""
from __future__ import annotations

import base64
import io
import json
import zipfile

import numpy as np
import pytest

from kcc.model.vocab import load_vocab
from kcc.speech.audio.wav import pcm16
from kcc.speech.engine import random_voice
from test_say import sentences
from test_server import TEXT, VOICE_SEEDS, expected, json_error, planned, post, request, serving

SPEECH = {"model": "kokoro", "input": TEXT, "voice": "af_alloy", "response_format": "pcm"}


def _lines(data: bytes) -> list[dict]:
    return [json.loads(line) for line in data.decode().splitlines() if line.strip()]


class TestCaptionedSpeech:
    def test_whole_answer_has_the_audio_and_word_timestamps(self, tmp_path):
        with serving(tmp_path) as srv:
            status, headers, data = post(srv.port, {**SPEECH, "stream": False, "return_timestamps": True},
                                         path="/dev/captioned_speech")
        doc = json.loads(data)
        assert status == 200 and headers["content-type"] == "application/json"
        assert doc["audio_format"] == "pcm" and base64.b64decode(doc["audio"]) == pcm16(expected(TEXT))
        words = [t["word"] for t in doc["timestamps"]]
        assert words[:3] == ["Hello", "there", ","]                # punctuation is a token of its own
        starts = [t["start_time"] for t in doc["timestamps"]]
        assert starts == sorted(starts) and all(t["end_time"] >= t["start_time"] for t in doc["timestamps"])
        assert doc["timestamps"][-1]["end_time"] <= expected(TEXT).size / 24000 + 1e-3

    def test_streamed_answer_is_one_json_line_per_chunk(self, tmp_path):
        long = {**SPEECH, "input": sentences(12)}
        with serving(tmp_path) as srv:
            _, _, whole = post(srv.port, {**long, "stream": False}, path="/dev/captioned_speech")
            status, headers, data = post(srv.port, long, path="/dev/captioned_speech")
        lines = _lines(data)
        assert status == 200 and len(lines) == len(planned(long["input"])) >= 2
        joined = b"".join(base64.b64decode(line["audio"]) for line in lines)
        # the stream's chunks (its first ones short) and the whole file's (as `kcc say`): each its own plan
        assert joined == pcm16(expected(long["input"], stream=True))
        assert base64.b64decode(json.loads(whole)["audio"]) == pcm16(expected(long["input"], stream=False))

    @pytest.mark.parametrize("fields, status, param", [({"voice": "nobody"}, 400, "voice"),
                                                      ({"speed": 99}, 400, "speed"),
                                                      ({"model": "whisper-1"}, 404, "model")])
    def test_a_bad_request_is_a_json_error_before_any_line(self, tmp_path, fields, status, param):
        with serving(tmp_path) as srv:
            got = post(srv.port, {**SPEECH, **fields}, path="/dev/captioned_speech")
        assert got[0] == status and json_error(*got)["param"] == param


class TestCombineVoices:
    def _pack(self, data: bytes) -> np.ndarray:
        torch = pytest.importorskip("torch")
        return torch.load(io.BytesIO(data), weights_only=True).numpy()

    @pytest.mark.parametrize("body", ["af_alloy+am_echo", ["af_alloy", "am_echo"]])
    def test_the_mean_of_the_voices_as_a_pt_file(self, tmp_path, body):
        with serving(tmp_path) as srv:
            status, headers, data = post(srv.port, body, path="/v1/audio/voices/combine")
        assert status == 200 and headers["content-type"] == "application/octet-stream"
        assert 'filename="af_alloy+am_echo.pt"' in headers["content-disposition"] and zipfile.is_zipfile(io.BytesIO(data))
        want = (random_voice(VOICE_SEEDS["af_alloy"]) + random_voice(VOICE_SEEDS["am_echo"])) / 2
        np.testing.assert_allclose(self._pack(data), want, rtol=1e-6, atol=1e-7)

    @pytest.mark.parametrize("body, needle", [("af_alloy+nobody", "'nobody' is not offered"),
                                              ([], "No voices provided"), (5, "a list of voice names")])
    def test_refusals(self, tmp_path, body, needle):
        with serving(tmp_path) as srv:
            got = post(srv.port, body, path="/v1/audio/voices/combine")
        assert got[0] == 400 and needle in json_error(*got)["message"]


def test_voices_listing_both_shapes(tmp_path):
    with serving(tmp_path) as srv:
        plain = json.loads(request(srv.port, "GET", "/v1/audio/voices")[2])
        legacy = json.loads(request(srv.port, "GET", "/v1/audio/voices?legacy=true")[2])
    assert [v["id"] for v in plain["voices"]] == legacy["voices"] == sorted(VOICE_SEEDS)
    assert all(v["name"] == v["id"] for v in plain["voices"])


class TestPhonemize:
    def test_text_to_phonemes_and_tokens(self, tmp_path):
        with serving(tmp_path) as srv:
            status, _, data = post(srv.port, {"text": "Hello world.", "language": "a"}, path="/dev/phonemize")
        doc = json.loads(data)
        vocab = load_vocab()
        assert status == 200 and doc["phonemes"] == "hello world."            # the fake G2P: letters
        assert doc["tokens"] == [vocab[c] for c in "hello world."]

    @pytest.mark.parametrize("body, param", [({"text": ""}, "text"), ({"text": 5}, "text"),
                                             ({"text": "hi", "language": "xx"}, "language"),
                                             ({"text": "hi", "language": 1}, "language")])
    def test_refusals(self, tmp_path, body, param):
        with serving(tmp_path) as srv:
            got = post(srv.port, body, path="/dev/phonemize")
        assert got[0] == 400 and json_error(*got)["param"] == param


def test_a_kokoro_fastapi_web_ui_request_speaks(tmp_path):
    """Its web UI's body: a weighted blend, lang_code, volume, normalization options, download fields."""
    doc = {"model": "kokoro", "input": TEXT, "voice": "af_alloy(2)+am_echo(1)", "response_format": "pcm",
           "speed": 1.0, "stream": True, "lang_code": "a", "volume_multiplier": 0.5, "return_download_link": False,
           "download_format": "mp3", "normalization_options": {"normalize": True, "unit_normalization": False}}
    with serving(tmp_path) as srv:
        status, _, data = post(srv.port, doc)
    assert status == 200 and len(data) > 1000


def test_a_model_by_name(tmp_path):
    with serving(tmp_path) as srv:
        ok = request(srv.port, "GET", "/v1/models/tts-1")
        missing = request(srv.port, "GET", "/v1/models/whisper-1")
    assert ok[0] == 200 and json.loads(ok[2]) == {"id": "tts-1", "object": "model", "owned_by": "kcc"}
    assert missing[0] == 404 and json_error(*missing)["code"] == "model_not_found"


class TestDownloadLink:
    @pytest.mark.parametrize("stream", [False, True])
    def test_the_link_gives_the_response_s_bytes(self, tmp_path, stream):
        doc = {**SPEECH, "stream": stream, "return_download_link": True, "download_format": "mp3"}
        with serving(tmp_path) as srv:
            status, headers, data = post(srv.port, doc)
            path = headers["x-download-path"]
            got = request(srv.port, "GET", f"/v1{path}")
        assert status == 200 and path.startswith("/download/kcc-") and path.endswith(".pcm")
        assert got[0] == 200 and got[2] == data == pcm16(expected(TEXT))
        assert got[1]["content-type"] == headers["content-type"]     # the bytes are the response's: pcm

    def test_no_link_unless_asked_and_an_unknown_file(self, tmp_path):
        with serving(tmp_path) as srv:
            _, headers, _ = post(srv.port, SPEECH)
            missing = request(srv.port, "GET", "/v1/download/kcc-0000.mp3")
        assert "x-download-path" not in headers
        assert missing[0] == 404 and json_error(*missing)["code"] == "not_found"

    def test_a_bad_download_format(self, tmp_path):
        with serving(tmp_path) as srv:
            got = post(srv.port, {**SPEECH, "return_download_link": True, "download_format": "ogg"})
        assert got[0] == 400 and json_error(*got)["param"] == "download_format"

    def test_the_store_is_bounded(self):
        from kcc.speech.serve.fastapi_compat import Downloads
        store = Downloads(kept=2, max_bytes=10)
        for i, data in enumerate([b"aaaa", b"bbbb", b"cccc", b"x" * 11]):
            store.put(f"f{i}", data)
        assert [store.get(f"f{i}") for i in range(4)] == [None, b"bbbb", b"cccc", None]
