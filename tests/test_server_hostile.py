"""`kcc serve` against hostile and clumsy clients, over loopback: idle and slowloris sockets,
clients that stop reading, requests dropped during a long G2P, and the access checks (API key,
JSON content type, CORS, Host allow-list). Every loop here is bounded and stops by itself."""
from __future__ import annotations

import json
import re
import socket
import threading
import time
from html.parser import HTMLParser

import pytest

from kcc.speech.serve.app import HttpLimits
from kcc.speech.serve.cli import MemoryBudgetError, SERVER_BASE_BYTES, WORKER_MEMORY_BYTES, check_memory
from kcc.speech.serve.connection import ConnectionLimits
from kcc.speech.serve.listener import ListenerLimits
from kcc.speech.serve.security import (PAGE_HEADERS, Access, ApiKeyError, CorsOriginError, HostNameError, access_for,
                                       cors_warning, host_name, is_loopback, public_bind_warning,
                                       wyoming_bind_warning)
from kcc.speech.serve.service import G2P_PIECE_CHARS, Limits

from test_say import FakeSynth, LetterG2P, sentences
from test_server import FIXED, json_error, post, request, serving

SHORT = {"input": "Hello there.", "response_format": "pcm", "stream": False}


def _wait(cond, timeout=10.0, what="condition"):
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, f"{what} never held"
        time.sleep(0.02)


def _closed_by_server(sock: socket.socket, timeout: float) -> bool:
    """The server closed (or reset) the socket within `timeout`: recv sees EOF or a reset."""
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


# -- connections that send no request --------------------------------------------------------------
def test_idle_and_slowloris_connections_neither_block_requests_nor_stay_open(tmp_path):
    conn = ConnectionLimits(head_timeout_s=2.0)
    with serving(tmp_path, connection=conn, listener=ListenerLimits(first_byte_s=2.0)) as srv:
        idle = [socket.create_connection(("127.0.0.1", srv.port), timeout=5) for _ in range(100)]
        slow = [socket.create_connection(("127.0.0.1", srv.port), timeout=5) for _ in range(20)]
        for s in slow:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        stop = threading.Event()

        def trickle():                     # one header byte every 0.2 s per slowloris socket, 50 rounds at most
            for i in range(50):
                if stop.wait(0.2):
                    return
                for s in slow:
                    try:
                        s.sendall(b"X-Slow: %d\r\n"[:1] if i % 2 else b"x")
                    except OSError:
                        pass
        t = threading.Thread(target=trickle, daemon=True)
        t.start()
        try:
            t0 = time.monotonic()
            status, _, data = request(srv.port, "GET", "/health", timeout=5)
            assert status == 200 and json.loads(data)["status"] == "ok"
            status, headers, data = post(srv.port, SHORT, timeout=10)
            assert status == 200 and headers["content-type"].startswith("audio/pcm") and len(data) > 0
            assert time.monotonic() - t0 < 10
            # every idle and slowloris socket is closed by the server soon after its deadline
            deadline = time.monotonic() + conn.head_timeout_s + 5
            for s in idle + slow:
                assert _closed_by_server(s, max(0.1, deadline - time.monotonic())), "a socket was left open"
        finally:
            stop.set()
            t.join(5)
            for s in idle + slow:
                s.close()


def test_a_partial_head_and_an_idle_keep_alive_connection_are_closed_at_the_deadline(tmp_path):
    with serving(tmp_path, connection=ConnectionLimits(head_timeout_s=1.0),
                 listener=ListenerLimits(first_byte_s=1.0)) as srv:
        for partial in (b"", b"G", b"POST /v1/audio/speech HTTP/1.1\r\n", b"GET /health HTTP/1.1\r\nHost: x"):
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
            s.sendall(partial)
            t0 = time.monotonic()
            assert _closed_by_server(s, 5.0) and time.monotonic() - t0 < 4.0, partial
            s.close()
        # a keep-alive connection after a response: the next head has the same deadline
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        f = s.makefile("rb")
        assert f.readline().split()[1] == b"200"
        while f.readline().strip():
            pass
        s.sendall(b"GET /hea")                  # then a head that never ends
        t0 = time.monotonic()
        got = b""
        while (part := f.read1(4096)) and time.monotonic() - t0 < 8:
            got += part
        assert time.monotonic() - t0 < 8, "keep-alive connection never closed"
        f.close()
        s.close()


def test_past_the_connection_cap_the_oldest_idle_socket_is_closed(tmp_path):
    with serving(tmp_path, connection=ConnectionLimits(head_timeout_s=30), listener=ListenerLimits(max_open=20)) as srv:
        socks = []
        for _ in range(30):
            socks.append(socket.create_connection(("127.0.0.1", srv.port), timeout=5))
            time.sleep(0.01)
        status, _, _ = request(srv.port, "GET", "/health", timeout=5)
        assert status == 200
        closed = [_closed_by_server(s, 0.5) for s in socks]
        assert all(closed[:10]) and not any(closed[-5:]), closed
        for s in socks:
            s.close()


# -- clients that stop reading -------------------------------------------------------------------
def _non_reader(port: int, doc: dict) -> socket.socket:
    """A client with a tiny receive buffer that sends one request and never reads."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    body = json.dumps(doc).encode()
    s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    return s


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
def test_a_client_that_stops_reading_is_cut_and_frees_its_slot(tmp_path, stream_format):
    synth = FakeSynth()
    text = sentences(60)                       # ~10 MB of pcm: far over every socket buffer
    limits = Limits(workers=1, max_queue=0, first_chunk_seconds=0)
    with serving(tmp_path, synth, limits=limits, connection=ConnectionLimits(write_stall_s=1.0)) as srv:
        readers = [_non_reader(srv.port, {"input": text, "response_format": "pcm", "stream_format": stream_format})]
        _wait(lambda: len(synth.calls) >= 1, what="synthesis started")
        t0 = time.monotonic()
        _wait(lambda: srv.service.running == 0 and not srv.service.jobs, timeout=15, what="slot freed")
        assert time.monotonic() - t0 < 10
        calls = len(synth.calls)
        status, _, data = post(srv.port, SHORT, timeout=10)    # the only worker is free again
        assert status == 200 and data
        assert len(synth.calls) <= calls + 1          # the short request, nothing more of the cut one
        for s in readers:
            s.close()
    assert calls < len(text.split(".")), "the whole text was synthesised for a client that never read"


def test_a_response_still_written_past_its_deadline_is_cut(tmp_path):
    text = sentences(40)
    with serving(tmp_path, http=HttpLimits(response_timeout_s=0.5)) as srv:
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        s.connect(("127.0.0.1", srv.port))
        body = json.dumps({"input": text, "response_format": "pcm"}).encode()
        s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        s.settimeout(5)
        got, t0 = b"", time.monotonic()
        while time.monotonic() - t0 < 3:      # a slow reader: 4 KiB every 20 ms, for 3 s
            got += s.recv(4096)
            time.sleep(0.02)
        # cut at its deadline: the synthesis stopped and the slot is free while the client still reads
        assert srv.service.running == 0 and not srv.service.jobs
        calls = len(srv.synth.calls)
        while time.monotonic() - t0 < 30 and (part := s.recv(1 << 20)):   # what was already buffered
            got += part
        s.close()
        assert not part and not got.endswith(b"0\r\n\r\n"), "the stream ended cleanly past its deadline"
        assert calls == len(srv.synth.calls) < len(text.split("."))


# -- CPU before the first chunk: G2P ---------------------------------------------------------------
class SlowG2P(LetterG2P):
    """LetterG2P whose cost grows with the square of the text it is given (as OpenJTalk's does),
    under one process-wide lock (as the real backends are); records each piece's length."""
    lock = threading.Lock()

    def __init__(self, per_char2: float = 2e-6):
        self.per_char2, self.lengths = per_char2, []

    def __call__(self, text):
        with self.lock:
            self.lengths.append(len(text))
            time.sleep(self.per_char2 * len(text) ** 2)
            return super().__call__(text)


def _long_text(chars: int = 4000) -> str:
    words = ("kana " * (chars // 5)).strip()
    return words[:chars]


def test_dropped_long_requests_stop_their_g2p_and_a_short_request_is_answered(tmp_path):
    g2p = SlowG2P()                          # a 2000-character piece: 8 s; a 200-character one: 0.08 s
    limits = Limits(workers=2, max_queue=8, first_chunk_seconds=0)
    with serving(tmp_path, limits=limits, g2ps=lambda lang: g2p) as srv:
        dropped = []
        for _ in range(10):
            dropped.append(_non_reader(srv.port, {"input": _long_text(), "response_format": "pcm"}))
        _wait(lambda: len(g2p.lengths) >= 3, what="G2P started")
        for s in dropped:
            s.close()
        t0 = time.monotonic()
        _wait(lambda: srv.service.running + srv.service.waiting == 0, timeout=10, what="dropped requests ended")
        status, _, data = post(srv.port, SHORT, timeout=10)
        assert status == 200 and data and time.monotonic() - t0 < 5
        settled = len(g2p.lengths)
        time.sleep(0.3)
        assert len(g2p.lengths) == settled, "G2P went on after its clients left"
    assert max(g2p.lengths) <= G2P_PIECE_CHARS
    assert settled < 10 * 20, "every dropped request's G2P ran to its end"


def test_g2p_past_the_request_deadline_is_a_504_and_stops(tmp_path):
    g2p = SlowG2P(per_char2=2.5e-6)          # 0.1 s a piece, 20 pieces: past a 1 s deadline
    limits = Limits(request_timeout_s=1.0, first_chunk_seconds=0)
    with serving(tmp_path, limits=limits, g2ps=lambda lang: g2p) as srv:
        t0 = time.monotonic()
        status, headers, data = post(srv.port, {"input": _long_text(), "response_format": "pcm"}, timeout=10)
        assert status == 504 and "request limit" in json_error(status, headers, data)["message"]
        assert time.monotonic() - t0 < 3
        _wait(lambda: not srv.service.jobs, what="job ended")
        settled = len(g2p.lengths)
        time.sleep(0.3)
        assert len(g2p.lengths) == settled < 20


# -- access checks ---------------------------------------------------------------------------------
def test_api_key_is_required_on_every_route_but_health_and_the_page(tmp_path):
    import openai
    with serving(tmp_path, access=Access(api_key="s3cret-key")) as srv:
        for method, path in (("GET", "/v1/models"), ("GET", "/v1/audio/voices"), ("POST", "/v1/audio/speech"),
                             ("GET", "/nowhere")):
            for auth in (None, "Bearer wrong", "Bearer s3cret-ke", "Bearer s3cret-key2", "bearer s3cret-key",
                         "Basic s3cret-key", "s3cret-key", "Bearer "):
                headers = {"Authorization": auth} if auth is not None else {}
                status, hdrs, data = request(srv.port, method, path, body=json.dumps(SHORT).encode()
                                             if method == "POST" else b"", headers=headers)
                assert status == 401, (method, path, auth, status)
                err = json.loads(data)["error"]
                assert err["code"] == "invalid_api_key" and err["type"] == "invalid_request_error"
                assert hdrs["www-authenticate"] == "Bearer"
        assert not srv.synth.calls
        for path in ("/health", "/ready", "/"):
            assert request(srv.port, "GET", path)[0] == 200, path
        ok = {"Authorization": "Bearer s3cret-key"}
        assert request(srv.port, "GET", "/v1/models", headers=ok)[0] == 200
        c = openai.OpenAI(base_url=f"{srv.url}/v1", api_key="s3cret-key", max_retries=0, timeout=30)
        assert len(c.audio.speech.create(model="kokoro", voice="alloy", input="Hi there.",
                                         response_format="pcm").content) > 0
        bad = openai.OpenAI(base_url=f"{srv.url}/v1", api_key="nope", max_retries=0, timeout=30)
        with pytest.raises(openai.AuthenticationError):
            bad.audio.speech.create(model="kokoro", voice="alloy", input="Hi there.")


class _PageParts(HTMLParser):
    """What a page loads and runs: (tag, attribute, value) of each src/href, and any inline code."""

    def __init__(self):
        super().__init__()
        self.loads, self.inline, self._in = [], [], None

    def handle_starttag(self, tag, attrs):
        self.loads += [(tag, k, v) for k, v in attrs if k in ("src", "href")]
        self.inline += [(tag, k) for k, v in attrs if k == "style" or k.startswith("on")]
        self._in = tag if tag in ("script", "style") else None
        if tag == "style":
            self.inline.append(("style", ""))

    def handle_data(self, data):
        if self._in == "script" and data.strip():
            self.inline.append(("script", data.strip()[:40]))


def test_the_page_runs_under_its_own_strict_csp_with_or_without_a_key(tmp_path):
    # The key form makes the page hold a secret: it loads only its own files, runs no inline code
    # (the CSP forbids it) and no other page may frame it. The page and its files need no key.
    for access in (None, Access(api_key="s3cret-key")):
        with serving(tmp_path, access=access) as srv:
            status, headers, data = request(srv.port, "GET", "/")
            assert status == 200 and {k: headers[k.lower()] for k in PAGE_HEADERS} == PAGE_HEADERS
            parts = _PageParts()
            parts.feed(data.decode())
            assert parts.inline == []
            assert sorted(parts.loads) == [("link", "href", "/static/app.css"), ("script", "src", "/static/app.js")]
            for _, _, path in parts.loads:
                assert request(srv.port, "GET", path)[0] == 200, (access, path)
    policy = dict(d.strip().split(" ", 1) for d in PAGE_HEADERS["Content-Security-Policy"].split(";"))
    assert policy == {"default-src": "'self'", "base-uri": "'none'", "form-action": "'none'",
                      "frame-ancestors": "'none'"}


@pytest.mark.parametrize("content_type", [None, "text/plain", "text/plain;charset=UTF-8",
                                          "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                                          "application/jsonx", "json"])
def test_a_post_that_is_not_json_is_415_and_synthesises_nothing(tmp_path, content_type):
    with serving(tmp_path) as srv:
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        body = json.dumps(SHORT).encode()
        head = b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\n"
        if content_type is not None:
            head += b"Content-Type: " + content_type.encode() + b"\r\n"
        s.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        data = s.makefile("rb").read1(65536)
        s.close()
        assert data.split()[1] == b"415", data[:100]
        assert b"application/json" in data and not srv.synth.calls
        for ok in ("application/json", "application/json; charset=utf-8", "Application/JSON"):
            assert post(srv.port, SHORT, headers={"Content-Type": ok})[0] == 200


def _preflight(port: int, origin: str):
    return request(port, "OPTIONS", "/v1/audio/speech", headers={
        "Origin": origin, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type, authorization"})


def test_cors_is_off_unless_an_origin_is_given(tmp_path):
    with serving(tmp_path) as srv:
        for origin in ("https://evil.example", "http://localhost:3000", "null"):
            _, headers, _ = _preflight(srv.port, origin)
            assert not any(k.startswith("access-control-allow") for k in headers), headers
            _, headers, _ = post(srv.port, SHORT, headers={"Origin": origin})
            assert "access-control-allow-origin" not in headers
    with serving(tmp_path, access=Access(cors_origins=("https://app.example",))) as srv:
        status, headers, _ = _preflight(srv.port, "https://app.example")
        assert status == 200 and headers["access-control-allow-origin"] == "https://app.example"
        for origin in ("https://evil.example", "https://app.example.evil.example", "null"):
            _, headers, _ = _preflight(srv.port, origin)
            assert "access-control-allow-origin" not in headers, origin


def test_a_loopback_server_answers_only_loopback_host_names(tmp_path):
    access = access_for("127.0.0.1", None, extra_hosts=["tts.lan"])
    with serving(tmp_path, access=access) as srv:
        for host in ("evil.example", f"evil.example:{srv.port}", "127.0.0.1.evil.example", "localhost.evil",
                     "0.0.0.0", "10.0.0.1", "[::2]", "", "tts.lan.evil"):
            status, headers, data = request(srv.port, "GET", "/health", headers={"Host": host})
            assert status == 421, host
            assert "--allowed-host" in json_error(status, headers, data)["message"]
        for host in ("localhost", f"localhost:{srv.port}", "127.0.0.1", f"127.0.0.1:{srv.port}", f"[::1]:{srv.port}",
                     "LOCALHOST", "tts.lan", "tts.lan:80"):
            assert request(srv.port, "GET", "/health", headers={"Host": host})[0] == 200, host


NOT_HOSTS = ("localhost:80@evil.example", "localhost@evil.example", "user@localhost", "localhost/evil",
             "localhost:80:80", "localhost:http", "localhost:", "[::1", "[::1]x", "[::1]:80@evil.example",
             "[zz::1]", "localhost evil.example", "localhost,evil.example", "localhost#", "-", ".", ":80")


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0"])
def test_a_host_header_that_is_not_a_host_is_refused_on_every_server(tmp_path, bind):
    with serving(tmp_path, access=access_for(bind, None)) as srv:
        for host in NOT_HOSTS:
            status, headers, data = request(srv.port, "GET", "/health", headers={"Host": host})
            assert status == 400 and "is not a host name" in json_error(status, headers, data)["message"], host
        for host in ("localhost", "localhost.", f"127.0.0.1:{srv.port}", "[::1]", f"[0:0::1]:{srv.port}"):
            assert request(srv.port, "GET", "/health", headers={"Host": host})[0] == 200, host
    assert all(host_name(h) is None for h in NOT_HOSTS)
    assert [host_name(h) for h in ("LOCALHOST.:8880", "[0:0::1]", "0::1", "tts_box.lan")] == \
        ["localhost", "::1", "::1", "tts_box.lan"]
    for bad in NOT_HOSTS:
        with pytest.raises(HostNameError, match="is not a host name"):
            access_for("127.0.0.1", None, extra_hosts=[bad])


@pytest.mark.parametrize("origin", ["null", "NULL", " null", "https://app.example/", "https://app.example/page",
                                    "app.example", "//app.example", "https://user@app.example", "https://",
                                    "https://app.example?x=1", "HTTPS://App.Example", "https://a b.example", ""])
def test_a_cors_origin_no_browser_sends_or_null_is_refused_at_start(origin):
    with pytest.raises(CorsOriginError, match="null would let any sandboxed|is not an origin"):
        access_for("127.0.0.1", None, cors_origins=[origin])


def test_a_wildcard_cors_origin_is_taken_with_a_warning():
    good = ("https://app.example", "http://localhost:3000", "chrome-extension://abcdef", "http://[::1]:8080")
    assert access_for("127.0.0.1", None, cors_origins=good).cors_origins == good
    assert cors_warning(good, None) is None
    assert access_for("127.0.0.1", None, cors_origins=["*"]).cors_origins == ("*",)
    assert "any web page" in cors_warning(("*",), None) and "set --api-key" in cors_warning(("*",), None)
    assert "any web page" in cors_warning(("*",), "k") and "--api-key" not in cors_warning(("*",), "k")


def test_bind_policy_and_warnings():
    assert access_for("0.0.0.0", None).allowed_hosts is None          # a public bind takes any Host
    assert access_for("::1", None).allowed_hosts == {"localhost", "127.0.0.1", "::1"}
    assert access_for("localhost", "k").api_key == "k" and access_for("127.0.0.1", "").api_key is None
    assert [is_loopback(h) for h in ("127.0.0.1", "127.1.2.3", "::1", "[::1]", "localhost", "0.0.0.0", "::",
                                     "192.168.1.2", "example.com")] == [True] * 5 + [False] * 4
    assert [host_name(h) for h in ("[::1]:80", "LocalHost:1", "a.b", "::1")] == ["::1", "localhost", "a.b", "::1"]
    for host in ("0.0.0.0", "::", "192.168.1.2"):
        assert "no --api-key" in public_bind_warning(host, None)
        assert "without TLS: the API key and every text travel in clear" in public_bind_warning(host, "key")
        assert public_bind_warning(host, "key", tls=True) is None
    assert public_bind_warning("127.0.0.1", None) is None and public_bind_warning("::1", "key") is None
    assert "no authentication" in wyoming_bind_warning("tcp://0.0.0.0:10200")
    assert wyoming_bind_warning("tcp://127.0.0.1:10200") is None and wyoming_bind_warning("unix:///tmp/s") is None


def test_workers_beyond_the_available_memory_are_refused():
    check_memory(3, available=SERVER_BASE_BYTES + 3 * WORKER_MEMORY_BYTES)
    for workers, free, advice in ((4, SERVER_BASE_BYTES + 3 * WORKER_MEMORY_BYTES, "use --workers 3 or fewer"),
                                  (256, 64 << 30, "use --workers 108 or fewer"),
                                  (2, SERVER_BASE_BYTES + WORKER_MEMORY_BYTES - 1, "free memory first"),
                                  (1, SERVER_BASE_BYTES, "free memory first")):
        with pytest.raises(MemoryBudgetError, match=rf"--workers {workers} needs about \d+ MiB .* is available; "):
            check_memory(workers, available=free)
        with pytest.raises(MemoryBudgetError, match=re.escape(advice)):
            check_memory(workers, available=free)


def _read_at(srv, doc: dict, bytes_per_s: float, limit_s: float = 20.0) -> tuple[bytes, bool, float | None]:
    """A client reading a stream at a fixed rate (for at most limit_s, or until the server let go
    of it), then as fast as it can:
    (what it got, whether the stream ended cleanly, seconds until the server had no request in
    flight while the client was still reading at its rate; None if it never did)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", srv.port))
    body = json.dumps(doc).encode()
    s.sendall(b"POST /v1/audio/speech HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    s.settimeout(30)
    got = s.recv(2048)                      # the first bytes: the job is running (a poll of the service
    t0, freed = time.monotonic(), None      # could miss a job the lag rule cut while we waited)
    s.settimeout(10)
    while (part := s.recv(2048)):
        got += part
        if freed is None and srv.gate.active == 0:
            freed = time.monotonic() - t0
        if freed is None and time.monotonic() - t0 < limit_s:
            time.sleep(len(part) / bytes_per_s)
    s.close()
    return got, got.endswith(b"0\r\n\r\n"), freed


@pytest.mark.parametrize("stream_format", ["audio", "sse"])
def test_a_client_reading_slower_than_real_time_is_cut_one_in_real_time_is_not(tmp_path, stream_format):
    doc = {"input": sentences(6), "response_format": "pcm", "stream_format": stream_format}   # 20 s, 0.97 MB
    with serving(tmp_path, http=HttpLimits(read_lag_s=1.0), sndbuf=32 * 1024) as srv:
        realtime = 24000 * 2 * (4 / 3 if stream_format == "sse" else 1)      # pcm bytes a second (base64: 4/3)
        got, clean, _ = _read_at(srv, doc, 10 * realtime)
        assert clean and len(got) > 900_000, "a client reading faster than real time was cut"
        got, clean, freed = _read_at(srv, doc, realtime / 10)
        assert not clean, "a client reading at 1/10 real time got the whole stream"
        assert freed is not None and freed < 15, f"its slot was held {freed} s"


def test_fuzzed_hostile_clients_bounded(tmp_path):
    """fuzz/fuzz_clients.py for a few seconds: idle, slowloris, partial, dropping, non-reading,
    slow-reading, garbage, pipelining and short-body clients, 30 at once; /health and a short
    speech request keep being answered, and nothing is left running once they are gone."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "fuzz"))
    from fuzz_clients import fuzz
    conn = ConnectionLimits(head_timeout_s=1.0, write_stall_s=1.0)
    with serving(tmp_path, connection=conn, http=HttpLimits(body_timeout_s=1.0, read_lag_s=1.0),
                 listener=ListenerLimits(first_byte_s=1.0)) as srv:
        svc = srv.service
        result = fuzz(srv.port, seconds=6, clients=30, seed=2,
                      idle=lambda: svc.running + svc.waiting == 0 and not svc.jobs and srv.gate.active == 0)
    assert result["probes"] >= 5 and len(result["clients"]) >= 8, result


def test_access_flags_and_their_environment(monkeypatch):
    import argparse
    from kcc.speech.serve.cli import access_from_args, add_parsers

    def parsed(*argv):
        ap = argparse.ArgumentParser()
        add_parsers(ap.add_subparsers())
        return access_from_args(ap.parse_args(["serve", *argv]))
    assert parsed() == Access(None, (), frozenset({"localhost", "127.0.0.1", "::1"}))
    got = parsed("--api-key", "k1", "--cors-origin", "https://a.example", "--cors-origin", "https://b.example",
                 "--allowed-host", "TTS.lan:8880")
    assert got.api_key == "k1" and got.cors_origins == ("https://a.example", "https://b.example")
    assert got.allowed_hosts == {"localhost", "127.0.0.1", "::1", "tts.lan"}
    assert parsed("--host", "0.0.0.0").allowed_hosts is None
    monkeypatch.setenv("KCC_API_KEY", "from-env")
    monkeypatch.setenv("KCC_CORS_ORIGINS", "https://c.example, https://d.example")
    monkeypatch.setenv("KCC_ALLOWED_HOSTS", "box.local")
    got = parsed()
    assert got.api_key == "from-env" and got.cors_origins == ("https://c.example", "https://d.example")
    assert "box.local" in got.allowed_hosts
    assert parsed("--api-key", "flag").api_key == "flag"          # the flag wins over the environment


@pytest.mark.parametrize("key", ["two words", " lead", "tail ", "tab\there", "caf\u00e9", "nul\x00", "line\nbreak",
                                 "\u00a0nbsp", "emoji\U0001f600"])
def test_an_api_key_no_client_could_send_is_refused_at_start(key):
    with pytest.raises(ApiKeyError, match="visible ASCII"):
        access_for("127.0.0.1", key)


@pytest.mark.parametrize("key", ["k", "sk-proj_0123456789abcdef", "!#$%&'()*+,-./:;<=>?@[]^_`{|}~"])
def test_every_visible_ascii_key_is_accepted(key):
    assert access_for("0.0.0.0", key).api_key == key
