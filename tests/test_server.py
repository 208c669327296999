"""`kcc serve` over loopback (127.0.0.1, an ephemeral port) with the fakes of test_say (FakeSynth, LetterG2P),
driven by the official openai client and raw sockets; every response decoded with PyAV."""
from __future__ import annotations

import base64
import contextlib
import http.client
import io
import json
import re
import socket
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import av
import numpy as np
import openai
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kcc.speech.g2p.g2p import G2PError
from kcc.speech.request import chunk_plan
from kcc.speech.engine import plan, random_voice, say
from kcc.speech.serve.app import HttpLimits, create_app
from kcc.speech.serve.connection import ConnectionLimits, http_server
from kcc.speech.serve.listener import ListenerLimits
from kcc.speech.serve.request import ApiError, SpeechRequest, parse_speech
from kcc.speech.serve.service import Limits, SpeechService
from kcc.speech.serve.voice_set import VoiceSet
from kcc.speech.voices import VoiceInfo, load_voice
from kcc.speech.audio.wav import pcm16

from test_say import FakeSynth, LetterG2P, sentences

# The server's default limits (a stream's chunk sizes come from the request alone, never from load).
FIXED = Limits()


VOICE_SEEDS = {"af_alloy": 1, "am_echo": 2, "bf_emma": 3, "jf_alpha": 4}


def make_catalog(root: Path) -> dict:
    root.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, seed in VOICE_SEEDS.items():
        np.save(root / f"{name}.npy", random_voice(seed))
        lang = {"a": "en-us", "b": "en-gb", "j": "ja"}[name[0]]
        out[name] = VoiceInfo(name, lang, "female" if name[1] == "f" else "male", str(root / f"{name}.npy"), str(root))
    return out


class G2PS:
    """g2p_for(language): LetterG2P for the languages a test allows, G2PError otherwise."""

    def __init__(self, languages=("auto", "en-us", "en-gb", "ja")):
        self.languages, self.asked = languages, []

    def __call__(self, lang):
        self.asked.append(lang)
        if lang not in self.languages:
            raise G2PError(f"language {lang!r} is not supported")
        return LetterG2P()


@contextlib.contextmanager
def serving(tmp_path: Path, synth=None, limits: Limits | None = None, http: HttpLimits | None = None,
            aliases=None, default=None, g2ps=None, access=None, connection: ConnectionLimits | None = None,
            sndbuf: int | None = None, listener: ListenerLimits | None = None, service: SpeechService | None = None,
            **config):
    """The app on uvicorn as `kcc serve` runs it (kcc's Listener, the guarded h11 protocol), on
    127.0.0.1; `config`: more uvicorn.Config options (ssl_certfile, ...); service: one a test built
    (the real model's, say).
    sndbuf: the accepted sockets' kernel send buffer (fixed, not autotuned up to megabytes), so
    that a test's slow reader blocks the server's writes as it would over a real network."""
    if service is None:                  # service: one a test built (the real model's, say)
        catalog = make_catalog(tmp_path / "voices")
        voices = VoiceSet(catalog, aliases, default or "af_alloy", loader=load_voice)
        service = SpeechService(synth or FakeSynth(), g2ps or G2PS(), voices, limits or FIXED)
    gate = create_app(service, http, access)
    server = http_server(gate, connection, listener, log_level="warning", access_log=False,
                         timeout_graceful_shutdown=5, **config)
    sock = socket.socket()
    if sndbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
    sock.bind(("127.0.0.1", 0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    t0 = time.monotonic()
    while not server.started:
        assert thread.is_alive() and time.monotonic() - t0 < 20, "server did not start"
        time.sleep(0.01)
    port = sock.getsockname()[1]
    try:
        yield SimpleNamespace(port=port, url=f"http://127.0.0.1:{port}", service=service, server=server, gate=gate,
                              synth=service.synth, voices_dir=tmp_path / "voices")
    finally:
        server.should_exit = True
        thread.join(20)
        sock.close()


def decode(data: bytes, fmt: str, sample_format: str = "flt") -> np.ndarray:
    """Any response format -> mono samples at 24 kHz (float32, or int16 with "s16"), through PyAV."""
    kw = {"format": "s16le", "options": {"sample_rate": "24000", "ch_layout": "mono"}} if fmt == "pcm" else {}
    with av.open(io.BytesIO(data), **kw) as c:
        stream = c.streams.audio[0]
        resampler = av.AudioResampler(format=sample_format, layout="mono", rate=24000)
        out = []
        for frame in c.decode(stream):
            for f in resampler.resample(frame):
                out.append(f.to_ndarray().reshape(-1))
        for f in resampler.resample(None):
            out.append(f.to_ndarray().reshape(-1))
    return np.concatenate(out) if out else np.zeros(0, np.float32)


def s16(data: bytes, fmt: str) -> bytes:
    return decode(data, fmt, "s16").astype("<i2").tobytes()


class RawStream:
    """A hand-read chunked response, so a test sees each HTTP chunk as it arrives."""

    def __init__(self, port: int, body: bytes, method: str = "POST", path: str = "/v1/audio/speech"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.sock.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        self.f = self.sock.makefile("rb")
        self.status = int(self.f.readline().split()[1])
        self.headers = {}
        while (line := self.f.readline().strip()):
            k, v = line.decode().split(":", 1)
            self.headers[k.lower()] = v.strip()

    def chunk(self) -> bytes:
        size = int(self.f.readline().strip(), 16)
        data = self.f.read(size)
        assert self.f.read(2) == b"\r\n"
        return data

    def close(self):
        self.f.close()
        self.sock.close()


# -- helpers over the harness -------------------------------------------------------------------
TEXT = "Hello there, wide world. It speaks in sines."


def planned(text, limits: Limits | None = None, stream: bool = True):
    """The chunks the server plans: a stream's (short first chunks at boundaries of the text), or
    a whole file's, which are `kcc say`'s."""
    if not stream:
        return plan(text, LetterG2P())
    limits = limits or FIXED
    ramp, min_rest = chunk_plan(limits.first_chunk_phonemes, limits.chunk_phonemes, limits.chunk_growth)
    return plan(text, LetterG2P(), limit=limits.chunk_phonemes, first_limit=ramp, min_rest=min_rest)


def expected(text, voice="af_alloy", speed=1.0, seed=0, stream=True):
    """The audio a request must carry: `say` over the same fakes, pack and chunks."""
    return say(text, FakeSynth(), random_voice(VOICE_SEEDS[voice]), speed, seed, g2p=LetterG2P(),
               chunks=planned(text, stream=stream)).audio


def client(srv) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{srv.url}/v1", api_key="unused", max_retries=0, timeout=30)


def request(port, method="POST", path="/v1/audio/speech", body: bytes = b"", headers=None, timeout=30):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request(method, path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, data


def post(port, doc, **kw):
    return request(port, body=json.dumps(doc).encode(), **kw)


def json_error(status, headers, data) -> dict:
    assert headers["content-type"] == "application/json", (status, data[:200])
    err = json.loads(data)["error"]
    assert isinstance(err["code"], str) and err["code"] and isinstance(err["message"], str) and err["message"]
    assert err["type"] == ("invalid_request_error" if status < 500 else "server_error")
    return err


def lag_correlation(got: np.ndarray, want: np.ndarray, max_lag: int = 5000) -> float:
    """Best normalised correlation of `got` against `want` over codec delays up to max_lag samples."""
    n = want.size
    best = 0.0
    for lag in range(0, min(max_lag, max(0, got.size - n // 2)) + 1, 1):
        g = got[lag:lag + n]
        w = want[:g.size]
        denom = np.linalg.norm(g) * np.linalg.norm(w)
        if denom:
            best = max(best, float(g @ w / denom))
    return best


# -- the OpenAI API, through the official client ------------------------------------------------
@pytest.mark.parametrize("fmt", ["mp3", "opus", "aac", "flac", "wav", "pcm"])
def test_openai_client_every_format_streamed_whole_and_sse(tmp_path, fmt):
    want = expected(TEXT)
    with serving(tmp_path) as srv:
        c = client(srv)
        streamed = c.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format=fmt).content
        whole = c.audio.speech.create(model="tts-1", voice="alloy", input=TEXT, response_format=fmt,
                                      extra_body={"stream": False}).content
        with c.audio.speech.with_streaming_response.create(model="tts-1", voice="alloy", input=TEXT,
                                                           response_format=fmt, stream_format="sse") as resp:
            events = [json.loads(line[6:]) for line in resp.iter_lines() if line.startswith("data: ")]
        sse_audio = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
        assert events[-1]["type"] == "speech.audio.done"
        if fmt == "mp3":                           # OpenAI's default format
            default = request(srv.port, body=json.dumps({"model": "tts-1", "voice": "alloy", "input": TEXT}).encode())
            assert default[0] == 200 and default[1]["content-type"] == "audio/mpeg"
    for data, want in ((streamed, want), (whole, expected(TEXT, stream=False)), (sse_audio, want)):
        got = decode(data, fmt)
        if fmt in ("flac", "wav", "pcm"):          # lossless: the very samples `kcc say` writes
            assert s16(data, fmt) == pcm16(want)
        else:                                      # lossy: same length up to codec padding, same waveform
            assert want.size <= got.size <= want.size + 5000, (got.size, want.size)
            assert lag_correlation(got, want) > 0.9
    if fmt == "wav":
        assert streamed[4:8] == b"\xff\xff\xff\xff" and whole[4:8] != b"\xff\xff\xff\xff"   # open-ended vs sized


def test_openai_client_sse_deltas_words_and_usage(tmp_path):
    text = sentences(6)
    want = expected(text, "am_echo", 1.25)
    with serving(tmp_path) as srv:
        with client(srv).audio.speech.with_streaming_response.create(
                model="gpt-4o-mini-tts", voice={"id": "am_echo"}, input=text, response_format="pcm",
                speed=1.25, stream_format="sse", instructions="Speak cheerfully.") as resp:
            assert resp.headers["content-type"].startswith("text/event-stream")
            events = [json.loads(line[6:]) for line in resp.iter_lines() if line.startswith("data: ")]
    kinds = [e["type"] for e in events]
    assert kinds[-1] == "speech.audio.done" and kinds.count("speech.audio.done") == 1
    pcm = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert pcm == pcm16(want)
    chunks = [e for e in events if e["type"] == "speech.audio.words"]
    assert len(chunks) > 1 and [e["chunk"] for e in chunks] == list(range(len(chunks)))
    words = [w for e in chunks for w in e["words"]]
    assert [w["word"] for w in words] == [w.text for w in LetterG2P()(text)]
    assert words[0]["start_s"] == 0 and words[-1]["end_s"] == pytest.approx(want.size / 24000)
    assert all(a["end_s"] == b["start_s"] for a, b in zip(words, words[1:]))
    usage = events[-1]["usage"]
    ids = sum(len(c.ids) for c in planned(text))
    assert usage == {"input_tokens": ids, "output_tokens": want.size // 600, "total_tokens": ids + want.size // 600}


def test_sse_mp3_deltas_join_into_one_stream(tmp_path):
    with serving(tmp_path) as srv:
        status, headers, data = post(srv.port, {"input": TEXT, "voice": "af_alloy", "stream_format": "sse"})
    assert status == 200
    events = [json.loads(x[6:]) for x in data.decode().split("\n\n") if x.startswith("data: ")]
    mp3 = b"".join(base64.b64decode(e["audio"]) for e in events if e["type"] == "speech.audio.delta")
    assert lag_correlation(decode(mp3, "mp3"), expected(TEXT)) > 0.9


def test_streaming_sends_audio_before_the_text_is_done(tmp_path):
    gate = threading.Event()                       # chunks after the first wait until the client has audio
    text = sentences(12)
    with serving(tmp_path, FakeSynth(gate=gate)) as srv:
        s = RawStream(srv.port, json.dumps({"input": text, "response_format": "pcm", "voice": "af_alloy"}).encode())
        try:
            assert s.status == 200 and s.headers["transfer-encoding"] == "chunked"
            assert int(s.headers["x-kcc-chunks"]) > 2
            first = s.chunk()
            assert len(first) > 0 and not gate.is_set()   # audio arrived while chunk 2 is still held
            gate.set()
            pieces = [first]
            while (c := s.chunk()):
                pieces.append(c)
        finally:
            gate.set()
            s.close()
    assert b"".join(pieces) == pcm16(expected(text))


def test_first_chunk_is_short(tmp_path):
    synth = FakeSynth()
    with serving(tmp_path, synth) as srv:
        assert post(srv.port, {"input": sentences(12), "response_format": "pcm"})[0] == 200
    lengths = [len(c["ids"]) for c in synth.calls]
    first = planned(sentences(12))[0]                       # it ends where the text does (a comma here)
    assert first.phonemes[-1] in ".," and len(first.ids) == lengths[0] < max(lengths)
    # no mark or phrase start within the limit: it grows to one, up to 3 x the limit
    assert len(first.phonemes) <= 3 * srv.service.limits.first_chunk_phonemes
    assert max(lengths) <= srv.service.limits.chunk_phonemes


def test_chunks_fit_the_synthesizers_frame_plan_at_slow_speed(tmp_path):
    from kcc.speech.text import chunk_limit
    synth = FakeSynth()
    synth.max_frames = 300
    with serving(tmp_path, synth) as srv:
        assert post(srv.port, {"input": sentences(6), "response_format": "pcm", "speed": 0.5})[0] == 200
    fits = chunk_limit(200, 0.5, 300)
    assert fits < 200 and len(synth.calls) > 2 and max(len(c["ids"]) for c in synth.calls) <= fits


def test_models_voices_health_ready(tmp_path):
    with serving(tmp_path) as srv:
        models = client(srv).models.list()
        assert {"tts-1", "tts-1-hd", "kokoro"} <= {m.id for m in models.data}
        status, _, data = request(srv.port, "GET", "/v1/audio/voices")
        doc = json.loads(data)
        assert status == 200 and [v["id"] for v in doc["voices"]] == sorted(VOICE_SEEDS)
        assert {v["id"]: v["language"] for v in doc["voices"]}["jf_alpha"] == "ja"
        assert doc["aliases"]["alloy"] == "af_alloy" and doc["aliases"]["echo"] == "am_echo"
        assert doc["aliases"]["onyx"] == doc["default"] == "af_alloy"       # target absent: the default
        assert len(doc["aliases"]) == 13
        assert json.loads(request(srv.port, "GET", "/health")[2])["status"] == "ok"
        status, _, data = request(srv.port, "GET", "/ready")
        assert status == 200 and json.loads(data)["workers"] == 2


# -- voices: names, aliases, blends; never paths ------------------------------------------------
def test_aliases_objects_and_blends_reach_the_synthesizer(tmp_path):
    synth = FakeSynth()
    text = "Blend me."
    row = len("blend me.") - 1
    a, b = random_voice(VOICE_SEEDS["af_alloy"]), random_voice(VOICE_SEEDS["am_echo"])
    with serving(tmp_path, synth, aliases={"narrator": "am_echo"}) as srv:
        for voice in ["narrator", {"id": "af_alloy"}, "af_alloy:0.75,am_echo:0.25", "af_alloy(3)+am_echo(1)",
                      "am_echo:1,af_alloy:3"]:
            assert post(srv.port, {"input": text, "voice": voice, "response_format": "pcm"})[0] == 200, voice
        status, headers, data = post(srv.port, {"input": text, "voice": "alloy"})    # table replaced
        assert "not offered" in json_error(status, headers, data)["message"]
    refs = [c["ref_s"] for c in synth.calls]
    np.testing.assert_array_equal(refs[0], b[row])
    np.testing.assert_array_equal(refs[1], a[row])
    for r in refs[2:]:
        np.testing.assert_allclose(r, (0.75 * a + 0.25 * b)[row], atol=1e-7)


def test_voice_cache_is_bounded(tmp_path):
    with serving(tmp_path) as srv:
        for i in range(1, 25):
            assert post(srv.port, {"input": "Hi.", "voice": f"af_alloy:{i},am_echo:1", "response_format": "pcm"})[0] == 200
        voices = srv.service.voices
        # 24 blends and the two packs each is mixed from were made: the 16 used last are kept, least
        # recently used first (each blend uses its two packs just before it is stored)
        blend = [",".join(f"{n}:{w:.6g}" for n, w in voices.resolve(f"af_alloy:{i},am_echo:1")) for i in range(1, 25)]
        assert voices.cached() == 16
        assert list(voices._cache) == blend[10:23] + ["af_alloy:1", "am_echo:1", blend[23]]


@pytest.mark.parametrize("voice", [
    "../voices/af_alloy", "/etc/passwd", "af_alloy.npy", "VOICES/af_alloy.npy", "voices.npz:af_alloy",
    "~root", "af_alloy\x00", "C:\\x", "nope", "{path}/af_alloy.npy", "{path}/missing.npy",
    ",".join(["af_alloy"] * 9), "af_alloy:-1", "af_alloy:nan", "af_alloy:1e999", "af_alloy:", "x" * 700,
])
def test_voice_must_be_an_offered_name(tmp_path, voice):
    with serving(tmp_path) as srv:
        voice = voice.replace("{path}", str(srv.voices_dir))
        status, headers, data = post(srv.port, {"input": "Hi.", "voice": voice})
    err = json_error(status, headers, data)
    assert status == 400 and err["param"] == "voice"
    assert str(tmp_path) not in err["message"] and "/etc" not in err["message"] and "no such file" not in err["message"]


# -- hostile requests: every one a JSON error, the server alive after -----------------------------
def _deep(n):
    return b'{"input": "hi", "x": ' + b"[" * n + b"]" * n + b"}"


@pytest.mark.parametrize("body, status, needle", [
    (b'{"input": "hi", "response_format": ["wav"]}', 400, "'response_format' must be a string"),
    (b'{"input": "hi", "response_format": "ogg"}', 400, "must be one of mp3, opus, aac, flac, wav, pcm"),
    (_deep(100_000), 400, "nested too deeply"),
    (b'{"input": "hi", "seed": ' + b"9" * 5000 + b"}", 400, "not valid JSON"),
    (b'{"input": "hi", "speed": ' + b"9" * 4000 + b"}", 400,
     "speed must be between 0.25 and 4.0, got a number of more than 19 digits"),
    (b'{"input": "hi", "speed": ' + b"9" * 5000 + b".5}", 400, "speed must be between 0.25 and 4.0, got inf"),
    (b'{"input": "hi", "speed": NaN}', 400, "not valid JSON"),
    (b'{"input": "hi", "speed": true}', 400, "speed must be a number, got True"),
    (b'{"input": "hi", "speed": 9}', 400, "speed must be between 0.25 and 4.0, got 9"),
    (b'{"input": "hi", "seed": 1e3}', 400, "seed must be an integer, got 1000.0"),
    (b'{"input": "hi", "seed": 2147483648}', 400, "seed must be in [0, 2147483647], got 2147483648"),
    (b'{"input": "hi", "seed": -1}', 400, "seed must be in [0, 2147483647], got -1"),
    (b'{"input": "a\\ud800b"}', 400, "lone surrogate (U+D800) at character 1"),
    (b'{"input": "\\udfff"}', 400, "lone surrogate"),
    (b'{"input": "caf\xe9"}', 400, "not valid UTF-8 (byte 0xe9 at offset 14)"),
    (b'{"input": "   "}', 400, "'input' is empty"),
    (b'{"voice": "af_alloy"}', 400, "'input' is required"),
    (b'{"input": null}', 400, "'input' must be a string"),
    (b'{"input": 5}', 400, "'input' must be a string"),
    (b'{"input": "' + b"a" * 4097 + b'"}', 400, "the limit is 4096"),
    (b'{"input": "hi", "voice": 7}', 400, "'voice' must be a string"),
    (b'{"input": "hi", "voice": {"name": "x"}}', 400, "needs a string 'id'"),
    (b'{"input": "hi", "stream": "yes"}', 400, "stream must be true or false, got yes"),
    (b'{"input": "hi", "stream_format": "ndjson"}', 400, "'stream_format' must be"),
    (b'{"input": "hi", "instructions": 3}', 400, "'instructions' must be a string"),
    (b'{"input": "hi", "lang_code": "xx"}', 400, "language 'xx' is not supported"),
    (b'{"input": "hi", "normalization_options": 1}', 400, "must be an object"),
    (b"[1, 2]", 400, "must be a JSON object, got list"),
    (b"{not json", 400, "not valid JSON"),
    (b"", 400, "not valid JSON"),
])
def test_bad_requests_get_json_errors(tmp_path, body, status, needle):
    with serving(tmp_path, http=HttpLimits(max_body_bytes=1 << 20)) as srv:
        got = request(srv.port, body=body)
        err = json_error(*got)
        assert got[0] == status and needle in err["message"], err
        assert post(srv.port, {"input": "Still alive.", "response_format": "pcm"})[0] == 200


def test_extension_fields_are_tolerated_and_volume_applies(tmp_path):
    doc = {"input": TEXT, "voice": "af_alloy", "response_format": "pcm", "lang_code": "a", "download_format": "mp3",
           "normalization_options": {"normalize": True}, "return_download_link": False, "volume_multiplier": 0.5,
           "some_future_field": [1, 2]}
    with serving(tmp_path) as srv:
        status, _, data = post(srv.port, doc)
    assert status == 200 and data == pcm16(0.5 * expected(TEXT))


def test_language_from_lang_code_or_voice(tmp_path):
    g2ps = G2PS()
    with serving(tmp_path, g2ps=g2ps) as srv:
        for doc in [{"voice": "jf_alpha", "input": "こんにちは hi."}, {"voice": "jf_alpha"},
                    {"voice": "af_alloy", "lang_code": "j"}, {"voice": "bf_emma"}, {"voice": "af_alloy", "lang_code": "en-GB"},
                    {"voice": "af_alloy", "lang_code": "b"}, {"voice": "af_alloy"}]:
            assert post(srv.port, {"input": "Hi.", "response_format": "pcm", **doc})[0] == 200
    # kana pick ja; Latin text with a Japanese voice is read as `kcc say` reads it: language detected
    # per paragraph ('auto', the server's default --lang); a voice of a Latin-script language: its own
    assert g2ps.asked == ["ja", "auto", "ja", "en-gb", "en-gb", "en-gb", "en-us"]


@pytest.mark.parametrize("method", ["HEAD", "OPTIONS", "PUT", "DELETE", "GET"])
def test_wrong_methods_are_405_json(tmp_path, method):
    with serving(tmp_path) as srv:
        status, headers, data = request(srv.port, method, body=b"{}")
        assert status == 405 and headers["content-type"] == "application/json" and headers["allow"] == "POST"
        if method != "HEAD":                       # a HEAD answer has no body
            assert "not allowed" in json_error(status, headers, data)["message"]
        status, headers, data = request(srv.port, "GET", "/v1/nothing/../x")
        assert status == 404 and "no route" in json_error(status, headers, data)["message"]


def test_body_caps(tmp_path):
    with serving(tmp_path, http=HttpLimits(max_body_bytes=1000)) as srv:
        big = json.dumps({"input": "a" * 2000}).encode()
        status, headers, data = request(srv.port, body=big)
        assert status == 413 and "1000 bytes" in json_error(status, headers, data)["message"]
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=20)    # chunked: no Content-Length
        conn.request("POST", "/v1/audio/speech", body=iter([big[:600], big[600:]]),
                     headers={"Content-Type": "application/json"}, encode_chunked=True)
        resp = conn.getresponse()
        assert resp.status == 413 and json.loads(resp.read())["error"]["code"] == "request_too_large"
        conn.close()


def test_slow_body_is_a_408(tmp_path):
    with serving(tmp_path, http=HttpLimits(body_timeout_s=0.5)) as srv:
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
        sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"input\": ")
        resp = http.client.HTTPResponse(sock)
        resp.begin()
        status, body = resp.status, resp.read()
        sock.close()
    assert status == 408 and "not received within 0.5 s" in json.loads(body)["error"]["message"]


@contextlib.contextmanager
def only_worker_held(tmp_path, **limits):
    """A one-worker server whose worker is held by a streamed request's second chunk (gated), so
    the next request waits (or is refused); -> (srv, synth). The gate opens and the stream closes
    on exit. Until the worker takes chunk 2, a new request with no audio yet would go first
    (per-chunk scheduling) and be served: the race the wait rules out."""
    gate = threading.Event()
    synth = FakeSynth(gate=gate)
    with serving(tmp_path, synth, limits=Limits(workers=1, **limits)) as srv:
        s = RawStream(srv.port, json.dumps({"input": sentences(12), "response_format": "pcm"}).encode())
        try:
            assert s.status == 200 and s.chunk()
            _wait(lambda: len(synth.calls) == 2 and synth.active == 1)
            yield srv, synth
        finally:
            gate.set()
            s.close()


def test_busy_server_answers_503_with_retry_after(tmp_path):
    with only_worker_held(tmp_path, max_queue=0) as (srv, _):
        status, headers, data = post(srv.port, {"input": "hi"})
        assert status == 503 and int(headers["retry-after"]) >= 1
        assert "busy" in json_error(status, headers, data)["message"]


def test_queued_request_gets_504_at_its_deadline(tmp_path):
    with only_worker_held(tmp_path, max_queue=1, request_timeout_s=1.0) as (srv, _):
        t0 = time.monotonic()
        status, headers, data = post(srv.port, {"input": "hi", "stream": False})
        assert status == 504 and time.monotonic() - t0 < 1.5
        assert "request limit" in json_error(status, headers, data)["message"]


def test_closing_answers_queued_requests_503_and_stops_running_ones(tmp_path):
    with only_worker_held(tmp_path, max_queue=1) as (srv, synth):
        queued = {}
        asker = threading.Thread(target=lambda: queued.update(r=post(srv.port, {"input": "hi", "stream": False})))
        asker.start()
        _wait(lambda: srv.service.waiting == 1)
        closer = threading.Thread(target=srv.service.close)
        closer.start()
        asker.join(5)
        status, headers, data = queued["r"]
        assert status == 503 and "shutting down" in json_error(status, headers, data)["message"]
        assert closer.is_alive()                       # still waiting for the running synthesis
        synth.gate.set()
        closer.join(10)
        assert not closer.is_alive() and len(synth.calls) == 2   # it stopped after the chunk in flight


def test_unreadable_voice_file_is_a_500_that_names_no_path(tmp_path):
    with serving(tmp_path) as srv:
        (srv.voices_dir / "am_echo.npy").write_bytes(b"not a numpy file")
        status, headers, data = post(srv.port, {"input": "hi", "voice": "am_echo"})
        err = json_error(status, headers, data)
        assert status == 500 and "could not be loaded" in err["message"] and str(tmp_path) not in err["message"]
        assert post(srv.port, {"input": "hi", "voice": "af_alloy", "response_format": "pcm"})[0] == 200


def test_connection_cap_answers_503_json(tmp_path):
    gate = threading.Event()
    with serving(tmp_path, FakeSynth(gate=gate), http=HttpLimits(max_connections=1)) as srv:
        s = RawStream(srv.port, json.dumps({"input": sentences(12), "response_format": "pcm"}).encode())
        try:
            assert s.status == 200 and s.chunk()
            for path in ("/v1/models", "/ready", "/"):
                status, headers, data = request(srv.port, "GET", path)
                assert status == 503 and "requests in flight" in json_error(status, headers, data)["message"]
            assert request(srv.port, "GET", "/health")[0] == 200     # liveness is never refused
        finally:
            gate.set()
            s.close()


def _wait(cond, timeout=10.0):
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, "condition never held"
        time.sleep(0.02)


@pytest.mark.parametrize("stream", [True, False])
def test_client_disconnect_cancels_the_synthesis(tmp_path, stream):
    synth = FakeSynth(delay=0.15)
    text = sentences(40)
    with serving(tmp_path, synth) as srv:
        body = json.dumps({"input": text, "response_format": "pcm", "stream": stream}).encode()
        sock = socket.create_connection(("127.0.0.1", srv.port), timeout=20)
        sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: "
                     + str(len(body)).encode() + b"\r\n\r\n" + body)
        _wait(lambda: len(synth.calls) >= 2)
        sock.close()
        _wait(lambda: srv.service.running == 0)
        calls = len(synth.calls)
        time.sleep(0.5)
        assert len(synth.calls) == calls                 # nothing more synthesised after the cancel
    total = len(planned(text))
    assert calls <= 4 < total, (calls, total)


@pytest.mark.parametrize("stream", [True, False])
def test_request_deadline_holds(tmp_path, stream):
    synth = FakeSynth(delay=0.2)
    with serving(tmp_path, synth, limits=Limits(request_timeout_s=1.0)) as srv:
        t0 = time.monotonic()
        try:
            # 70 sentences: a whole file's ~8 chunks of up to 510 phonemes take 1.6 s, past the deadline
            status, headers, data = post(srv.port, {"input": sentences(70), "response_format": "pcm", "stream": stream})
        except http.client.IncompleteRead:             # a stream past its deadline is cut
            assert stream
        else:
            assert not stream and status == 504
            assert "1 s request limit" in json_error(status, headers, data)["message"]
        elapsed = time.monotonic() - t0
    assert elapsed < 1.0 + 0.2 + 0.5                    # the deadline plus at most one chunk
    assert len(synth.calls) < 10


def test_stream_cut_mid_way_is_not_a_clean_end(tmp_path):
    synth = FakeSynth(delay=0.2)
    with serving(tmp_path, synth, limits=Limits(request_timeout_s=1.0)) as srv:
        s = RawStream(srv.port, json.dumps({"input": sentences(30), "response_format": "pcm"}).encode())
        assert s.status == 200
        t0 = time.monotonic()
        # the server closes (EOF: ValueError reading the next size, or a reset) without the
        # terminating zero-size chunk, at the deadline plus at most one chunk: not a read timeout
        with pytest.raises((ValueError, ConnectionError)):
            while s.chunk():
                pass
        assert time.monotonic() - t0 < 1.0 + 0.2 + 0.5
        s.close()


def test_sse_deadline_ends_with_an_error_event(tmp_path):
    with serving(tmp_path, FakeSynth(delay=0.2), limits=Limits(request_timeout_s=1.0)) as srv:
        status, _, data = post(srv.port, {"input": sentences(30), "stream_format": "sse", "response_format": "pcm"})
    events = [json.loads(x[6:]) for x in data.decode().split("\n\n") if x.startswith("data: ")]
    assert status == 200 and events[-1]["type"] == "error" and events[-1]["error"]["code"] == "timeout"
    assert any(e["type"] == "speech.audio.delta" for e in events)


def test_synthesis_failure_is_a_500_json_error(tmp_path):
    with serving(tmp_path, FakeSynth(fail="stage kokoro_decoder: boom")) as srv:
        status, headers, data = post(srv.port, {"input": "hi there"})
    assert status == 500 and "RuntimeError: stage kokoro_decoder: boom" in json_error(status, headers, data)["message"]


def test_access_log_is_json_with_control_characters_escaped(tmp_path, caplog):
    caplog.set_level("INFO", logger="kcc.speech.serve.access")
    with serving(tmp_path) as srv:
        request(srv.port, "GET", "/v1/%1b[31mred%0a%00")
    lines = [r.getMessage() for r in caplog.records if r.name == "kcc.speech.serve.access"]
    doc = json.loads(lines[-1])
    assert doc["path"] == "/v1/\x1b[31mred\n\x00" and doc["status"] == 404 and doc["method"] == "GET"
    assert doc["complete"] is True and doc["bytes"] > 0
    assert "\x1b" not in lines[-1] and "\n" not in lines[-1] and "\\u001b" in lines[-1]


def test_fuzzed_bodies_bounded(tmp_path):
    import sys
    sys.path.insert(0, str(Path(__file__).parents[1] / "fuzz"))
    from fuzz_http import fuzz
    with serving(tmp_path, http=HttpLimits(max_body_bytes=1 << 20)) as srv:
        counts = fuzz(srv.port, n=60, seed=1)
    assert counts["audio"] > 0 and counts["error"] > 0 and sum(counts.values()) == 60


# -- the command line: flags and KCC_* environment, SIGTERM drains ------------------------------
SERVE_SCRIPT = """
import sys
from pathlib import Path
sys.path[:0] = [sys.argv[1], str(Path(sys.argv[1]).parent)]
import kcc.speech.engine, kcc.speech.g2p.g2p, kcc.speech.voices
from test_say import FakeSynth, LetterG2P
from test_server import make_catalog
kcc.speech.engine.load_synthesizer = lambda *a, **k: FakeSynth(delay=0.1)
kcc.speech.voices.voice_catalog = lambda dirs: make_catalog(Path(sys.argv[2]))
kcc.speech.g2p.g2p.G2P = lambda lang, backend, **options: LetterG2P()
import argparse
from kcc.speech.serve.cli import add_parsers
ap = argparse.ArgumentParser()
add_parsers(ap.add_subparsers())
args = ap.parse_args(sys.argv[3:])
sys.exit(args.fn(args))
"""


def free_port() -> int:
    """A loopback port nothing listens on now (for a server started in a child process)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve_cli(tmp_path, argv: list[str], env: dict | None = None):
    """`kcc serve` / `kcc wyoming` with ARGV in a child process over SERVE_SCRIPT's fakes (voices in
    tmp_path / "v"), environment `env` added; -> the Popen, killed on exit if it still runs."""
    import os
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-c", SERVE_SCRIPT, str(Path(__file__).parent), str(tmp_path / "v"),
                             *argv], env={**os.environ, **(env or {})}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()


def test_serve_cli_environment_and_sigterm_drains(tmp_path):
    import signal
    port = free_port()
    env = {"KCC_WORKERS": "3", "KCC_MAX_QUEUE": "1", "KCC_VOICE": "am_echo"}
    with serve_cli(tmp_path, ["serve", "--port", str(port), "--max-chars", "999"], env) as proc:
        def ready():                # 503 'warming' until kcc.speech.serve.warmup has run
            try:
                got = request(port, "GET", "/ready", timeout=2)
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                return None
            return None if got[0] == 503 and json.loads(got[2])["status"] == "warming" else got
        status, _, data = _until_value(ready)
        assert status == 200 and json.loads(data)["workers"] == 3 and json.loads(data)["queue"] == 1
        status, headers, data = post(port, {"input": "x" * 1000})
        assert status == 400 and "the limit is 999" in json_error(status, headers, data)["message"]
        text = sentences(10)
        s = RawStream(port, json.dumps({"input": text, "response_format": "pcm"}).encode())
        pieces = [s.chunk()]
        proc.send_signal(signal.SIGTERM)           # in flight: the stream must still complete
        while (c := s.chunk()):
            pieces.append(c)
        s.close()
        assert proc.wait(20) == -signal.SIGTERM       # uvicorn re-raises the signal once drained
    err = proc.stderr.read().decode()
    assert b"".join(pieces) == pcm16(expected(text, "am_echo"))
    assert '"path": "/ready"' in err and "Waiting for application shutdown" in err and "Finished server process" in err
    with pytest.raises(ConnectionRefusedError):            # the port is closed, not slow
        socket.create_connection(("127.0.0.1", port), timeout=2)


def _until_value(fn, timeout=60.0):
    t0 = time.monotonic()
    while (value := fn()) is None:
        assert time.monotonic() - t0 < timeout, "never ready"
        time.sleep(0.1)
    return value


@pytest.mark.parametrize("argv, message", [
    (["--workers", "0"], "--workers 0 is outside [1, 256]"),
    (["--chunk-phonemes", "5000"], "--chunk-phonemes 5000 is outside"),
    (["--first-chunk-phonemes", "300", "--chunk-phonemes", "200"], "--first-chunk-phonemes 300 is outside [1, 200]"),
    (["--max-body", "1"], "--max-body 1 is outside"),
    (["--max-open", "-1"], "--max-open -1 is outside [0, 1000000]"),
    (["--voice-alias", "alloy"], "voice alias 'alloy': expected NAME=VOICE"),
    (["--voice", "../x"], "'voice' must be a voice name"),
    (["--voice-alias", "alloy=af_nova"], "voice alias alloy=af_nova: not a voice this server offers"),
])
def test_serve_cli_refuses_bad_settings(tmp_path, monkeypatch, argv, message):
    import argparse
    from kcc.speech import voices as voices_mod
    from kcc.speech.serve.cli import add_parsers, build_service
    monkeypatch.setattr(voices_mod, "voice_catalog", lambda dirs: make_catalog(tmp_path / "v"))
    ap = argparse.ArgumentParser()
    add_parsers(ap.add_subparsers())
    args = ap.parse_args(["serve", *argv])
    with pytest.raises(ValueError, match=re.escape(message)):
        build_service(args)


# -- the request parser alone, property-tested: a SpeechRequest or an ApiError, nothing else ------
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
FIELDS = ["input", "voice", "model", "response_format", "speed", "stream", "stream_format", "seed", "lang_code",
          "instructions", "volume_multiplier", "normalization_options"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(FIELDS), JSON_VALUES | st.sampled_from(
    ["mp3", "wav", "sse", "af_alloy", "Hi there.", 1.0, 0.25, 4.0, "\ud800", "j"])))
def test_parser_answers_every_object_with_a_request_or_an_api_error(doc):
    try:
        raw = json.dumps(doc).encode()
    except UnicodeEncodeError:
        return
    try:
        req = parse_speech(raw)
    except ApiError as err:
        assert err.status in (400, 422) and err.message
        return
    assert isinstance(req, SpeechRequest) and req.text.strip() and 0.25 <= req.speed <= 4.0
    assert req.response_format in ("mp3", "opus", "aac", "flac", "wav", "pcm")


@settings(max_examples=100, deadline=None)
@given(st.binary(max_size=300))
def test_parser_answers_any_bytes_with_a_request_or_an_api_error(raw):
    try:
        parse_speech(raw)
    except ApiError as err:
        assert err.status in (400, 422)


def test_server_modules_import_no_torch_or_oracle():
    import subprocess
    import sys
    code = ("import sys, kcc.speech.serve.app, kcc.speech.serve.cli, kcc.speech.serve.wyoming_server; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'oracle', 'transformers', 'kokoro'}))")
    out = subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).parents[1], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr


def test_a_blend_speaks_the_language_of_its_heaviest_voice(tmp_path):
    voices = VoiceSet(make_catalog(tmp_path / "voices"), None, "af_alloy", loader=load_voice)
    assert voices.language(voices.resolve("jf_alpha:0.9,af_alloy:0.1")) == "ja"     # af_ sorts first
    assert voices.language(voices.resolve("jf_alpha:0.1,af_alloy:0.9")) == "en-us"


def test_french_voices_are_french_as_the_g2p_names_it():
    from kcc.speech.g2p.g2p import ALIASES
    from kcc.speech.voices import _info
    assert _info("ff_siwis", "x", "test").language == ALIASES["f"] == "fr-fr"



def test_a_blend_of_packs_with_different_row_counts_is_a_voice_error(tmp_path):
    """Named (the server logs it and answers 500 'the voice could not be loaded'), not numpy's
    stack error; the same blend as kcc say's (one blend_packs)."""
    from kcc.speech.voices import VoiceError, VoiceInfo
    catalog = make_catalog(tmp_path / "voices")
    np.save(tmp_path / "voices" / "af_short.npy", random_voice(9)[:100])
    catalog["af_short"] = VoiceInfo("af_short", "en-us", "female", str(tmp_path / "voices" / "af_short.npy"), "")
    voices = VoiceSet(catalog, None, "af_alloy", loader=load_voice)
    with pytest.raises(VoiceError, match=r"different row counts \[100, 510\]"):
        voices.pack(voices.resolve("af_alloy:0.5,af_short:0.5"))
    mixed = voices.pack(voices.resolve("af_alloy:0.6,am_echo:0.4"))
    assert np.array_equal(mixed, load_voice(f"{catalog['af_alloy'].spec}:0.6,{catalog['am_echo'].spec}:0.4"))


def test_a_catalog_path_with_commas_and_colons_is_one_pack(tmp_path):
    """A catalog entry is one file, whatever its name holds; blends are the server's own syntax."""
    from kcc.speech.voices import VoiceInfo, load_pack
    odd = tmp_path / "studio, take 2:final"
    odd.mkdir()
    np.save(odd / "af_odd.npy", random_voice(11))
    catalog = {**make_catalog(tmp_path / "voices"),
               "af_odd": VoiceInfo("af_odd", "en-us", "female", str(odd / "af_odd.npy"), str(odd))}
    voices = VoiceSet(catalog, None, "af_alloy", loader=load_pack)
    assert np.array_equal(voices.pack(voices.resolve("af_odd")), random_voice(11))
    assert np.array_equal(voices.pack(voices.resolve("af_odd:1,af_alloy:1")),
                          (0.5 * random_voice(11).astype(np.float64) + 0.5 * random_voice(1)).astype(np.float32))
