"""2000 stalled sockets against each server and each transport (HTTP, HTTPS, Wyoming), over
loopback: a real client's /health (HTTP, HTTPS) or `describe` (Wyoming) still answers, the
server closes every stalled socket by its deadline or to make room, the log stays a few lines,
and the process's file descriptors return to where they were. Deadlines and the cap are lowered
through the servers' own limits so each test takes seconds; every loop is bounded."""
from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import logging
import os
import resource
import selectors
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kcc.speech.cli.exits import Exit
from kcc.speech.serve.connection import ConnectionLimits
from kcc.speech.serve.listener import (FD_HEADROOM, MAX_OPEN_CEILING, ListenerLimits, open_limit,
                                       raise_fd_limit)
from kcc.speech.serve.wyoming_events import WyomingLimits

from test_server import SERVE_SCRIPT, free_port, serving
from test_server_tls import _self_signed
from test_wyoming import wyoming_server

wyoming = pytest.importorskip("wyoming")
from wyoming.client import AsyncTcpClient  # noqa: E402
from wyoming.info import Describe, Info  # noqa: E402

FLOOD = 2000
DEADLINE_S = 1.5                 # first byte, TLS handshake, request head, first Wyoming event
SETTLE_S = 30.0                  # the longest any bounded wait here runs
# Half the flood sends nothing, half one byte that starts its protocol and then stalls (past
# the Listener's first-byte wait: a TLS handshake, an HTTP head, a Wyoming header left open).
FIRST_BYTE = {"http": b"G", "https": b"\x16", "wyoming": b"{"}


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _until(cond, what: str, timeout: float = SETTLE_S):
    t0 = time.monotonic()
    while not (value := cond()):
        assert time.monotonic() - t0 < timeout, f"{what} never held"
        time.sleep(0.05)
    return value


def _flood(port: int, n: int, first_byte: bytes) -> list[socket.socket]:
    """n sockets connecting at once (non-blocking), every other one sending `first_byte` once
    connected; none ever sends more. Returns once every connect has completed (a SYN the full
    backlog dropped is retried by the kernel a second or more later: waiting for those keeps a
    late wave of them from arriving while the real client is being probed)."""
    socks, sel = [], selectors.DefaultSelector()
    for i in range(n):
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", port))
        socks.append(s)
        sel.register(s, selectors.EVENT_WRITE, i % 2)
    t0 = time.monotonic()
    while sel.get_map() and time.monotonic() - t0 < SETTLE_S:
        for key, _ in sel.select(0.5):
            sel.unregister(key.fileobj)
            if key.data:
                with contextlib.suppress(OSError):
                    key.fileobj.send(first_byte)
    sel.close()
    return socks


def _closed_by_server(socks: list[socket.socket]) -> int:
    """How many of `socks` the server has closed (EOF or reset seen, or never connected)."""
    n = 0
    for s in socks:
        try:
            n += s.recv(1) == b""
        except BlockingIOError:
            pass
        except OSError:
            n += 1
    return n


class Records(logging.Handler):
    """Every log record at WARNING or above, from any logger (uvicorn, asyncio, kcc)."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


@contextlib.contextmanager
def recorded():
    handler, root = Records(), logging.getLogger()
    root.addHandler(handler)
    try:
        yield handler.records
    finally:
        root.removeHandler(handler)


def _health(port: int, context: ssl.SSLContext | None) -> dict:
    c = (http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=SETTLE_S) if context
         else http.client.HTTPConnection("127.0.0.1", port, timeout=SETTLE_S))
    try:
        c.request("GET", "/health", headers={"Host": "127.0.0.1"})
        r = c.getresponse()
        assert r.status == 200
        return json.loads(r.read())
    finally:
        c.close()


def _describe(port: int) -> Info:
    async def ask():
        async with AsyncTcpClient("127.0.0.1", port) as client:
            await client.write_event(Describe().event())
            return Info.from_event(await asyncio.wait_for(client.read_event(), SETTLE_S))
    return asyncio.run(ask())


@pytest.fixture(scope="module", autouse=True)
def fd_room():
    """The flood and the in-process server's side of it hold ~2 x FLOOD descriptors in this process:
    the soft limit is raised to the hard one, as the servers do at start."""
    soft = raise_fd_limit()
    if soft < 2 * FLOOD + FD_HEADROOM:
        pytest.fail(f"these tests need a file limit of {2 * FLOOD + FD_HEADROOM}; the hard limit is {soft} "
                    "(raise it: ulimit -Hn, or LimitNOFILE= in systemd)")


@pytest.fixture(scope="module")
def tls_pair(tmp_path_factory):
    return _self_signed(tmp_path_factory.mktemp("tls"))


@contextlib.contextmanager
def _server(transport: str, tmp_path, listener: ListenerLimits, tls_pair):
    """(port, the Listener, the real client's probe) of a server on 127.0.0.1 with short deadlines."""
    if transport == "wyoming":
        with wyoming_server(tmp_path, wyoming_limits=WyomingLimits(first_event_s=DEADLINE_S),
                            listener=listener) as (port, _):
            yield port, lambda: _describe(port)
        return
    tls = {}
    context = None
    if transport == "https":
        cert, key = tls_pair
        tls = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
        context = ssl.create_default_context(cafile=str(cert))
    with serving(tmp_path, connection=ConnectionLimits(head_timeout_s=DEADLINE_S), listener=listener, **tls) as srv:
        yield srv.port, lambda: _health(srv.port, context)


def _check_probe(transport: str, answer) -> None:
    if transport == "wyoming":
        assert answer.tts and answer.tts[0].name == "kcc" and {v.name for v in answer.tts[0].voices} >= {"af_alloy"}
    else:
        assert answer["status"] == "ok"


@pytest.mark.tools("openssl")
@pytest.mark.parametrize("transport", ["http", "https", "wyoming"])
@pytest.mark.parametrize("max_open", [300, 4000], ids=["over-the-cap", "under-the-cap"])
def test_a_real_client_is_answered_while_2000_sockets_stall(tmp_path, tls_pair, transport, max_open):
    listener = ListenerLimits(max_open=max_open, first_byte_s=DEADLINE_S, takeover_s=DEADLINE_S)
    with _server(transport, tmp_path, listener, tls_pair) as (port, probe), recorded() as records:
        _check_probe(transport, probe())                     # warm: the probe's own first use
        baseline = _fds()
        socks = _flood(port, FLOOD, FIRST_BYTE[transport])
        try:
            # every stalled socket is held (under the cap) or was closed to make room (over it) ...
            _check_probe(transport, probe())
            _check_probe(transport, probe())
            # ... and the server closes the rest by their deadlines
            closed = _until(lambda: (n := _closed_by_server(socks)) >= FLOOD and n, "every stalled socket closed")
            assert closed == FLOOD
            _check_probe(transport, probe())
        finally:
            for s in socks:
                s.close()
        _until(lambda: _fds() <= baseline, f"file descriptors back to {baseline} (now {_fds()})")
        # the log: a line or two from the Listener's tally, nothing per connection
        lines = [r.getMessage() for r in records]
        assert len(lines) <= 3, lines[:10]
        assert all(r.name == "kcc.speech.serve.listener" for r in records), lines[:10]
        if max_open < FLOOD:
            assert any("idle closed to make room" in line for line in lines), lines


def test_past_the_cap_the_oldest_fresh_socket_goes_first_and_a_busy_one_never(tmp_path):
    """Eviction order: a connection that has had a request (keep-alive, idle after it) outlives
    fresh ones; once only it is idle, it goes too."""
    listener = ListenerLimits(max_open=10, first_byte_s=30, takeover_s=30)
    with serving(tmp_path, connection=ConnectionLimits(head_timeout_s=30), listener=listener) as srv:
        served = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        served.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert served.recv(4096).startswith(b"HTTP/1.1 200")
        fresh = []
        for _ in range(9):
            fresh.append(socket.create_connection(("127.0.0.1", srv.port), timeout=10))
            time.sleep(0.02)
        later = [socket.create_connection(("127.0.0.1", srv.port), timeout=10) for _ in range(3)]
        time.sleep(0.3)
        for s in fresh + later + [served]:
            s.setblocking(False)
        assert _closed_by_server(fresh[:3]) == 3 and _closed_by_server(fresh[3:] + later) == 0
        assert _closed_by_server([served]) == 0
        for s in fresh + later + [served]:
            s.close()


def test_the_cap_is_sized_below_the_fd_limit():
    assert open_limit(1024) == 1024 - FD_HEADROOM
    assert open_limit(300) == 150                       # a small limit keeps half free
    assert open_limit(20) == 10 and open_limit(4) == 8  # never below 8
    assert open_limit(1 << 20) == MAX_OPEN_CEILING
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, hard, 512), hard))
        assert raise_fd_limit() == hard == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _low_fd_limit(n: int):
    return lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (n, n))


@pytest.mark.parametrize("command", ["serve", "wyoming"])
def test_out_of_file_descriptors_is_logged_once_per_interval_and_the_server_keeps_answering(tmp_path, command):
    """`kcc serve` / `kcc wyoming` in a child whose hard fd limit is 128, told to hold up to
    5000 connections: accepts fail with EMFILE, the Listener lowers its cap and closes idle
    sockets, one log line says how many failed, and the real client is answered."""
    port = free_port()
    argv = [command, "--port", str(port), "--max-open", "5000"]
    proc = subprocess.Popen([sys.executable, "-c", SERVE_SCRIPT, str(Path(__file__).parent), str(tmp_path / "v"),
                             *argv], env=dict(os.environ), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=_low_fd_limit(128))
    try:
        def probe():
            try:
                return _describe(port) if command == "wyoming" else _health(port, None)
            except (OSError, asyncio.TimeoutError):
                assert proc.poll() is None, proc.stderr.read().decode()
                return None
        _check_probe(command, _until(probe, "the server up"))
        socks = _flood(port, FLOOD, b"")
        try:
            _check_probe(command, _until(probe, "an answer during the flood"))
        finally:
            for s in socks:
                s.close()
        _check_probe(command, _until(probe, "an answer after the flood"))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    lines = err.decode().splitlines()
    assert any(f"kcc {command}: " in line and "5000 connections at most)" in line for line in lines), lines[:5]
    tally = [line for line in lines if line.startswith("kcc.speech.serve.listener")]
    assert any("accepts failed (Too many open files)" in line for line in tally), lines[-20:]
    assert any("cap lowered to" in line for line in tally), lines[-20:]
    assert len(tally) <= 3 and len(lines) <= 20, lines[-20:]
    assert not any("Traceback" in line or "socket.accept() out of system resource" in line for line in lines)


# -- Wyoming's idle deadlines ----------------------------------------------------------------------
WY_DEADLINES = WyomingLimits(first_event_s=1.0, idle_s=1.0, streaming_idle_s=30.0)


def _server_closes(raw, within: float = SETTLE_S) -> bool:
    """The server closes the connection (EOF or reset) within `within` seconds; the client reads
    and ignores anything before it."""
    raw.sock.settimeout(within)
    return raw.closed()


def test_a_wyoming_event_trickled_in_or_never_sent_is_closed_at_its_deadline(tmp_path):
    from test_wyoming_hostile import Raw
    with wyoming_server(tmp_path, wyoming_limits=WY_DEADLINES) as (port, _):
        trickle = Raw(port)
        trickle.send(b'{"type": "desc')                 # past the first byte, never a whole event
        answered = Raw(port)
        answered.event("describe")
        assert answered.read()[0] == "info"              # answered, then idle
        assert _server_closes(trickle) and _server_closes(answered)
        for raw in (trickle, answered):
            raw.close()


def test_a_synthesis_or_an_open_text_stream_outlasts_the_idle_deadline(tmp_path):
    import threading
    from test_say import FakeSynth, sentences
    from test_wyoming_hostile import Raw
    held = threading.Event()                             # holds every text chunk after the first
    with wyoming_server(tmp_path, synth=FakeSynth(gate=held), wyoming_limits=WY_DEADLINES) as (port, service):
        long = Raw(port)
        long.event("synthesize", {"text": sentences(6)})
        kinds = [long.read()[0], long.read()[0]]          # the first text chunk's audio, then the synthesis waits
        time.sleep(3 * WY_DEADLINES.idle_s)
        assert len(service.synth.calls) == 2              # the second text chunk is still held
        held.set()
        while (event := long.read()) is not None and event[0] != "audio-stop":
            kinds.append(event[0])
        assert event is not None and kinds[:2] == ["audio-start", "audio-chunk"] and len(service.synth.calls) > 1
        stream = Raw(port)
        stream.event("synthesize-start", {})
        stream.event("synthesize-chunk", {"text": "Half a sentence"})
        time.sleep(3 * WY_DEADLINES.idle_s)              # an open stream waits streaming_idle_s, not idle_s
        stream.event("synthesize-chunk", {"text": " and the rest."})
        stream.event("synthesize-stop", {})
        kinds = []
        while (event := stream.read()) is not None and event[0] != "synthesize-stopped":
            kinds.append(event[0])
        assert event is not None and "audio-stop" in kinds
        assert _server_closes(long)                       # idle after its answer: closed
        for raw in (long, stream):
            raw.close()


@pytest.mark.parametrize("command", ["serve", "wyoming"])
def test_a_port_already_taken_is_said_by_name(tmp_path, command):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        res = subprocess.run([sys.executable, "-c", SERVE_SCRIPT, str(Path(__file__).parent), str(tmp_path / "v"),
                              command, "--port", str(port)], capture_output=True, text=True, timeout=120)
    assert res.returncode == Exit.CANNOT_LISTEN and f"kcc {command}: cannot listen on " in res.stderr, res.stderr[-2000:]
    assert "Address already in use" in res.stderr and "Traceback" not in res.stderr
