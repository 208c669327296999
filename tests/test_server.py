"""`kcc serve` over loopback (127.0.0.1, an ephemeral port) with a fake synthesizer."""
from __future__ import annotations

import base64
import contextlib
import io
import json
import socket
import threading
import wave

import numpy as np
import pytest
import http.client

from kcc.say import random_voice, say
from kcc.server import SpeechService, make_server, wav_header
from kcc.wav import pcm16

from test_say import FakeSynth, LetterG2P, sentences


@contextlib.contextmanager
def running(synth=None, **kw):
    kw.setdefault("log", False)
    service = SpeechService(synth or FakeSynth(), LetterG2P(), **kw)
    server = make_server(service, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def post(port, doc, path="/v1/audio/speech", raw: bytes | None = None, timeout=20):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    body = raw if raw is not None else json.dumps(doc).encode()
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), data


def expected_pcm(text, speed=1.0):
    return pcm16(say(text, FakeSynth(), random_voice(0), speed, g2p=LetterG2P()).audio)


class RawStream:
    """A hand-read chunked response, so the test sees each HTTP chunk as it arrives."""

    def __init__(self, port, doc):
        body = json.dumps(doc).encode()
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=20)
        self.sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
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


def test_wav_and_pcm():
    text = "Hello there, wide world."
    with running() as port:
        status, headers, body = post(port, {"model": "kokoro", "input": text, "voice": None, "response_format": "wav"})
        assert status == 200 and headers["Content-Type"] == "audio/wav" and headers["X-Kcc-G2p"] == "letters"
        with wave.open(io.BytesIO(body)) as w:
            assert (w.getframerate(), w.getnchannels(), w.getsampwidth()) == (24000, 1, 2)
            frames = w.readframes(w.getnframes())
        assert frames == expected_pcm(text)
        status, headers, pcm = post(port, {"input": text, "response_format": "pcm", "speed": 1.5})
        assert status == 200 and headers["Content-Type"].startswith("audio/pcm;rate=24000")
        assert pcm == expected_pcm(text, 1.5) and len(pcm) < len(frames)


def test_streaming_sends_audio_before_the_text_is_done():
    gate = threading.Event()           # chunks after the first wait until the client has audio
    text = sentences(40)
    with running(FakeSynth(gate=gate)) as port:
        s = RawStream(port, {"input": text, "response_format": "wav", "stream": True})
        try:
            assert s.status == 200 and s.headers["transfer-encoding"] == "chunked"
            n_chunks = int(s.headers["x-kcc-chunks"])
            assert n_chunks > 1
            assert s.chunk() == wav_header(None)
            first = s.chunk()
            assert len(first) > 0 and not gate.is_set()   # audio arrived while chunk 2 is still held
            gate.set()
            pieces = [first]
            while (c := s.chunk()):
                pieces.append(c)
        finally:
            gate.set()
            s.close()
    assert len(pieces) == n_chunks
    assert b"".join(pieces) == expected_pcm(text)


def test_streaming_ndjson_timestamps():
    text = sentences(30)
    with running() as port:
        status, headers, body = post(port, {"input": text, "response_format": "pcm", "stream": True, "timestamps": True})
    assert status == 200 and headers["Content-Type"] == "application/x-ndjson"
    lines = [json.loads(x) for x in body.decode().splitlines()]
    chunks, done = lines[:-1], lines[-1]
    assert len(chunks) > 1 and done["type"] == "done" and done["chunks"] == len(chunks)
    pcm = b"".join(base64.b64decode(c["audio"]) for c in chunks)
    assert pcm == expected_pcm(text)
    words = [w for c in chunks for w in c["words"]]
    assert words[0]["start_s"] == 0 and words[-1]["end_s"] == pytest.approx(len(pcm) / 2 / 24000)
    assert all(a["end_s"] == b["start_s"] for a, b in zip(words, words[1:]))


def test_whole_response_with_timestamps():
    text = "Two words. Then three more."
    with running() as port:
        status, headers, body = post(port, {"input": text, "timestamps": True})
    assert status == 200 and headers["Content-Type"] == "application/json"
    doc = json.loads(body)
    with wave.open(io.BytesIO(base64.b64decode(doc["audio"]))) as w:
        n = w.getnframes()
        assert w.readframes(n) == expected_pcm(text)
    ts = doc["timestamps"]
    assert [w["word"] for w in ts["words"]] == ["Two", "words", ".", "Then", "three", "more", "."]
    assert ts["words"][-1]["end_s"] == pytest.approx(n / 24000) == ts["audio_seconds"]


def test_concurrent_requests_run_side_by_side():
    synth = FakeSynth(delay=0.3)
    texts = ["First caller speaks here.", "Second caller says something else entirely."]
    results = {}

    def call(i):
        results[i] = post(port, {"input": texts[i], "response_format": "pcm"})

    with running(synth, workers=2) as port:
        threads = [threading.Thread(target=call, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert synth.max_active == 2                       # both syntheses were in flight at once
    for i, text in enumerate(texts):
        status, _, pcm = results[i]
        assert status == 200 and pcm == expected_pcm(text)


@pytest.mark.parametrize("doc, status, msg", [
    ({"input": "   "}, 422, "'input' is empty"),
    ({"voice": "x"}, 400, "'input' is required"),
    ({"input": 5}, 400, "must be a string"),
    ({"input": "hi", "voice": "alloy"}, 422, "unknown or unusable voice 'alloy'"),
    ({"input": "hi", "speed": 9}, 422, "speed must be between 0.25 and 4.0"),
    ({"input": "hi", "speed": "fast"}, 422, "'speed' must be a number"),
    ({"input": "hi", "response_format": "mp3"}, 422, "'mp3' is not supported"),
    ({"input": "hi", "stream": "yes"}, 400, "'stream' must be true or false"),
    ({"input": "hi", "seed": -1}, 422, "'seed' must be an integer"),
    ({"input": "x" * 300}, 422, "over this server's limit of 200"),
    ([1, 2], 400, "must be a JSON object"),
])
def test_request_errors(doc, status, msg):
    with running(max_input_chars=200) as port:
        got, headers, body = post(port, doc)
    assert got == status and headers["Content-Type"] == "application/json"
    err = json.loads(body)["error"]
    assert msg in err["message"] and err["code"] == status


def test_transport_errors_and_routes():
    with running(FakeSynth(fail="stage kokoro_decoder: boom"), max_body_bytes=100) as port:
        assert post(port, None, raw=b"{not json")[0] == 400
        status, _, body = post(port, None, raw=b'{"input": "caf\xe9"}')
        assert status == 400 and "not valid UTF-8" in json.loads(body)["error"]["message"]
        status, _, body = post(port, None, raw=b'{"input": "' + b"a" * 200 + b'"}')
        assert status == 413
        assert post(port, {"input": "hi"}, path="/v1/other")[0] == 404
        status, _, body = post(port, {"input": "hi there"})
        assert status == 500 and "synthesis failed: RuntimeError: stage kokoro_decoder: boom" in body.decode()
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("GET", "/health")
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["status"] == "ok"
        conn.close()


def test_busy_server_answers_503():
    gate = threading.Event()
    with running(FakeSynth(gate=gate), workers=1, queue_timeout_s=0.2) as port:
        s = RawStream(port, {"input": sentences(40), "stream": True, "response_format": "pcm"})
        try:
            assert s.status == 200 and s.chunk()            # holds the only slot (chunk 2 gated)
            status, _, body = post(port, {"input": "hi"})
            assert status == 503 and "busy" in json.loads(body)["error"]["message"]
        finally:
            gate.set()
            s.close()


def test_named_voices_from_a_directory(tmp_path):
    np.save(tmp_path / "calm.npy", random_voice(9))
    synth = FakeSynth()
    with running(synth, voices_dirs=[tmp_path]) as port:
        status, _, _ = post(port, {"input": "Calm down.", "voice": "calm.npy"})
        assert status == 200
        status, _, body = post(port, {"input": "Calm down.", "voice": "calm"})
        assert status == 422 and "available: calm.npy" in json.loads(body)["error"]["message"]
    np.testing.assert_array_equal(synth.calls[0]["ref_s"], random_voice(9)[len("calm down.") - 1])


def test_seed_reaches_the_synthesizer():
    synth = FakeSynth()
    with running(synth) as port:
        assert post(port, {"input": sentences(30), "seed": 40})[0] == 200
    assert [c["seed"] for c in synth.calls] == list(range(40, 40 + len(synth.calls))) and len(synth.calls) > 1


def test_cli_serve_wiring(monkeypatch, capsys):
    from http.server import ThreadingHTTPServer
    from kcc import cli, say as say_mod, server as server_mod
    seen = {}

    def fake_serve_forever(self, poll_interval=0.5):
        seen["address"] = self.server_address
        seen["service"] = self.service
        raise KeyboardInterrupt

    monkeypatch.setattr(say_mod, "load_synthesizer", lambda ckpt, max_frames=None, native=False, threads=None: FakeSynth())
    monkeypatch.setattr("kcc.g2p.G2P", lambda lang, backend: LetterG2P())
    monkeypatch.setattr(ThreadingHTTPServer, "serve_forever", fake_serve_forever)
    assert cli.main(["serve", "--port", "0", "--workers", "3", "--max-chars", "99"]) == 0
    err = capsys.readouterr().err
    assert "listening on http://127.0.0.1:" in err and "seeded random voice" in err
    assert seen["address"][0] == "127.0.0.1" and seen["service"].max_input_chars == 99
    assert isinstance(seen["service"], server_mod.SpeechService)
