"""`kcc wyoming` against hostile and clumsy clients over loopback, with raw sockets: declared
lengths over the caps, malformed headers and fields, empty requests, clients that leave during
a long G2P or stop reading. Every loop is bounded."""
from __future__ import annotations

import json
import socket
import time

import pytest

from kcc.speech.serve.service import G2P_PIECE_CHARS, Limits
from kcc.speech.serve.wyoming_events import WyomingLimits

from test_say import FakeSynth, sentences
from test_server_hostile import SlowG2P, _long_text, _wait
from test_wyoming import wyoming_server

pytest.importorskip("wyoming")


class Raw:
    """A Wyoming client by hand: any header line, any declared lengths."""

    def __init__(self, port: int, rcvbuf: int | None = None):
        self.sock = socket.socket()
        if rcvbuf:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.connect(("127.0.0.1", port))
        self.sock.settimeout(10)
        self.f = self.sock.makefile("rb")

    def send(self, raw: bytes) -> None:
        self.sock.sendall(raw)

    def event(self, kind: str, data: dict | None = None) -> None:
        body = json.dumps(data).encode() if data is not None else b""
        header = {"type": kind, **({"data_length": len(body)} if body else {})}
        self.send(json.dumps(header).encode() + b"\n" + body)

    def read(self):
        """The next event as (type, data, payload), or None when the server closed."""
        try:
            line = self.f.readline()
        except (ConnectionResetError, socket.timeout):
            return None
        if not line:
            return None
        header = json.loads(line)
        data = header.get("data") or {}
        if header.get("data_length"):
            data.update(json.loads(self.f.read(header["data_length"])))
        payload = self.f.read(header["payload_length"]) if header.get("payload_length") else b""
        return header["type"], data, payload

    def closed(self) -> bool:
        return self.read() is None

    def close(self):
        self.f.close()
        self.sock.close()


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


@pytest.mark.parametrize("header, needle", [
    ({"type": "synthesize", "data_length": 400_000_000}, "data_length 400000000 is over"),
    ({"type": "synthesize", "payload_length": 10 ** 12}, "payload_length 1000000000000 is over"),
    ({"type": "audio-chunk", "data_length": 2, "payload_length": (1 << 20) + 1}, "payload_length 1048577 is over"),
    ({"type": "synthesize", "data_length": -1}, "data_length must be a non-negative integer"),
    ({"type": "synthesize", "data_length": "12"}, "data_length must be a non-negative integer"),
    ({"type": "synthesize", "data_length": 1.5}, "data_length must be a non-negative integer"),
    ({"type": "synthesize", "payload_length": True}, "payload_length must be a non-negative integer"),
])
def test_declared_lengths_over_the_caps_get_an_error_and_are_never_read(tmp_path, header, needle):
    with wyoming_server(tmp_path) as (port, service):
        before = _rss()
        c = Raw(port)
        c.send(json.dumps(header).encode() + b"\n" + b"{" * 1000)
        kind, data, _ = c.read()
        assert kind == "error" and needle in data["text"] and data["code"] == "bad-event"
        assert c.closed()                       # the framing is lost: closed after the error
        c.close()
        assert _rss() - before < 50 << 20


@pytest.mark.parametrize("raw, needle", [
    (b"not json\n", "header is not JSON"),
    (b"[1, 2]\n", "header must be a JSON object"),
    (b"{\"type\": \"describe\"" + b" " * (70 * 1024) + b"}\n", "event header over"),
    (b"{\"type\": \"synthesize\", \"data_length\": 50}\n{\"text\": \"cut", "ended inside an event's data"),
])
def test_broken_framing_gets_an_error_then_the_connection_closes(tmp_path, raw, needle):
    with wyoming_server(tmp_path) as (port, service):
        c = Raw(port)
        c.send(raw)
        if b"cut" in raw:                        # the client itself ends its side mid-event
            c.sock.shutdown(socket.SHUT_WR)
        kind, data, _ = c.read()
        assert kind == "error" and needle in data["text"] and data["code"] == "bad-event"
        assert c.closed()
        c.close()


@pytest.mark.parametrize("kind, data, needle", [
    ("synthesize", {"text": 5}, "'text' must be a string, got int"),
    ("synthesize", {"text": ["a"]}, "'text' must be a string, got list"),
    ("synthesize", {"text": "Hi.", "voice": "af_alloy"}, "'voice' must be an object"),
    ("synthesize", {"text": "Hi.", "voice": {"name": 3}}, "'voice.name' must be a string"),
    ("synthesize", {"text": "Hi.", "voice": {"language": ["en"]}}, "'voice.language' must be a string"),
    ("synthesize-start", {"voice": 7}, "'voice' must be an object"),
    ("synthesize-chunk", {"text": None}, "'text' must be a string, got NoneType"),
    ("synthesize-chunk", {"text": "Hello."}, "synthesize-chunk without a synthesize-start"),
    ("synthesize", {"text": "\ud800"}, "lone surrogate"),
])
def test_a_malformed_field_gets_an_error_event_and_the_connection_goes_on(tmp_path, kind, data, needle):
    with wyoming_server(tmp_path) as (port, service):
        c = Raw(port)
        c.event(kind, data)
        got = c.read()
        assert got is not None and got[0] == "error" and needle in got[1]["text"], got
        if kind == "synthesize":                 # a synthesis asked for ends as Home Assistant reads it
            assert c.read()[0] == "audio-stop"
        c.event("describe")
        assert c.read()[0] == "info"             # the same connection still answers
        c.close()


@pytest.mark.parametrize("header, data", [
    ({"data": [1]}, None), ({"type": 5}, None), ({"type": ""}, None),
])
def test_a_header_with_a_bad_type_or_data_is_an_error_event(tmp_path, header, data):
    with wyoming_server(tmp_path) as (port, service):
        c = Raw(port)
        c.send(json.dumps(header).encode() + b"\n")
        kind, got, _ = c.read()
        assert kind == "error" and got["code"] == "bad-event"
        c.event("describe")
        assert c.read()[0] == "info"
        c.close()


@pytest.mark.parametrize("text", ["", "   ", "\n\t", None])
def test_an_empty_synthesize_gets_an_empty_audio_pair(tmp_path, text):
    with wyoming_server(tmp_path) as (port, service):
        c = Raw(port)
        c.event("synthesize", {} if text is None else {"text": text})
        start = c.read()
        assert start[0] == "audio-start" and start[1]["rate"] == 24000
        assert c.read()[0] == "audio-stop"
        c.close()


def test_a_stop_without_a_start_is_answered_stopped(tmp_path):
    with wyoming_server(tmp_path) as (port, service):
        c = Raw(port)
        c.event("synthesize-stop")
        assert c.read()[0] == "synthesize-stopped"
        c.event("synthesize-start")
        c.event("synthesize-stop")               # a stream with no text at all
        assert c.read()[0] == "synthesize-stopped"
        c.close()


def test_dropped_long_requests_stop_their_g2p_over_wyoming(tmp_path):
    g2p = SlowG2P()
    with wyoming_server(tmp_path, g2ps=lambda lang: g2p,
                        limits=Limits(workers=2, max_queue=8)) as (port, service):
        clients = []
        for _ in range(10):
            c = Raw(port)
            c.event("synthesize", {"text": _long_text()})
            clients.append(c)
        _wait(lambda: len(g2p.lengths) >= 3, what="G2P started")
        for c in clients:
            c.close()
        t0 = time.monotonic()
        _wait(lambda: service.running + service.waiting == 0, timeout=10, what="dropped requests ended")
        c = Raw(port)
        c.event("synthesize", {"text": "Hello there."})
        assert c.read()[0] == "audio-start" and time.monotonic() - t0 < 5
        c.close()
        settled = len(g2p.lengths)
        time.sleep(0.3)
        assert len(g2p.lengths) == settled < 10 * 20
    assert max(g2p.lengths) <= G2P_PIECE_CHARS


def test_a_wyoming_client_that_stops_reading_is_cut(tmp_path):
    synth = FakeSynth()
    with wyoming_server(tmp_path, synth, limits=Limits(workers=1, max_queue=0),
                        wyoming_limits=WyomingLimits(write_stall_s=1.0)) as (port, service):
        c = Raw(port, rcvbuf=4096)
        c.event("synthesize", {"text": sentences(40)})
        _wait(lambda: len(synth.calls) >= 1, what="synthesis started")
        _wait(lambda: service.running + service.waiting == 0, timeout=15, what="slot freed")
        calls = len(synth.calls)
        d = Raw(port)
        d.event("synthesize", {"text": "Hello there."})
        assert d.read()[0] == "audio-start"
        d.close()
        c.close()
    assert calls < 40, "the whole text was synthesised for a client that never read"


# -- found by fuzz/fuzz_wyoming.py ----------------------------------------------------------------
@pytest.mark.parametrize("kind", ["synthesize", "synthesize-start"])
def test_a_null_voice_is_the_default_voice(tmp_path, kind):
    """The wyoming package's from_event fails on "voice": null (a TypeError that closed the
    connection); the server reads the fields itself."""
    with wyoming_server(tmp_path) as (port, service):
        c = Raw(port)
        c.event(kind, {"text": "Hello there.", "voice": None})
        if kind == "synthesize-start":
            c.event("synthesize-chunk", {"text": "Hello there."})
            c.event("synthesize-stop")
        got = [c.read() for _ in range(2)]
        assert [g[0] for g in got] == ["audio-start", "audio-chunk"]
        c.close()


def test_events_before_a_broken_one_are_answered_before_the_error(tmp_path):
    """A header that is not JSON after a synthesize: the synthesize's audio, then the error, then
    the close (the reader's end of input did not count as the client leaving)."""
    with wyoming_server(tmp_path) as (port, service):
        c = Raw(port)
        c.event("synthesize", {"text": "Hello there."})
        c.send(b"\x00garbage\n")
        kinds = []
        while (got := c.read()) is not None and len(kinds) < 1000:
            kinds.append(got[0])
        assert kinds[0] == "audio-start" and kinds[-2:] == ["audio-stop", "error"] and "audio-chunk" in kinds
        c.close()


def test_fuzzed_events_bounded(tmp_path):
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parents[1] / "fuzz"))
    from fuzz_wyoming import fuzz
    with wyoming_server(tmp_path) as (port, service):
        counts = fuzz(port, n=150, seed=3)
    assert counts["info"] > 0 and counts["error-close"] > 0 and sum(counts.values()) == 150
