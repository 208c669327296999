"""Bounded fuzzing of `kcc serve`'s connections: seeded hostile clients, all at once, while a
probe checks that the server still answers.

Client behaviours, drawn at random: idle (connects, sends nothing), slowloris (a header byte
every 0.1-1 s), a partial head then silence, a request then a close after 0-1 s, a stream
request that never reads (tiny receive buffer), a slow reader (a few KiB a second), random
bytes, pipelined requests then silence, a body shorter than its Content-Length, a normal
request. The invariants: every probe (GET /health and a short POST /v1/audio/speech, one after
the other, every half second) is answered within PROBE_BOUND_S: /health 200, the speech 200
or, while the clients' own requests fill the synthesis queue, 503 with Retry-After, but never
for longer than BUSY_S in a row (a client that holds a slot without reading is cut sooner);
when the hostile clients are done, the server has no request running or queued within
SETTLE_S. Usage:
    python fuzz/fuzz_clients.py --port 8880 [--seconds 30] [--clients 60]   (a running `kcc serve`;
                                                                             the settle check needs --self-serve)
    python fuzz/fuzz_clients.py --self-serve [--seconds 30]                 (in-process, test doubles,
                                                                             short deadlines)
tests/test_server_hostile.py runs a short loop against an in-process server with fakes.
"""
from __future__ import annotations

import http.client
import json
import random
import socket
import threading
import time
from pathlib import Path

from server_fuzzer import Finding, main, test_doubles_on_path

PROBE_BOUND_S = 5.0
BUSY_S = 10.0
SETTLE_S = 15.0
LONG = " ".join(f"Sentence number {i} has several plain words, and a comma." for i in range(60))


def _request(body: dict | bytes, host: str, *, length: int | None = None) -> bytes:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return (b"POST /v1/audio/speech HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (host.encode(), len(raw) if length is None else length) + raw)


def hostile_client(port: int, rng: random.Random, stop: threading.Event, host: str) -> str:
    """One client's behaviour until `stop` (or its own end); the name of what it did."""
    kind = rng.choice(["idle", "slowloris", "partial", "drop", "non_reader", "slow_reader", "garbage",
                       "pipelined", "short_body", "normal"])
    sock = socket.socket()
    if kind in ("non_reader", "slow_reader"):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(2)
    try:
        sock.connect((host, port))
        long_doc = {"input": LONG, "response_format": rng.choice(["pcm", "wav", "mp3"]),
                    "stream_format": rng.choice(["audio", "sse"])}
        if kind == "slowloris":
            sock.sendall(b"POST /v1/audio/speech HTTP/1.1\r\n")
            while not stop.wait(rng.uniform(0.1, 1.0)):
                sock.sendall(rng.choice([b"X", b"-", b"a", b":"]))
        elif kind == "partial":
            sock.sendall(_request(long_doc, host)[:rng.randrange(1, 60)])
        elif kind == "drop":
            sock.sendall(_request(long_doc, host))
            stop.wait(rng.uniform(0, 1))
        elif kind == "non_reader":
            sock.sendall(_request(long_doc, host))
        elif kind == "slow_reader":
            sock.sendall(_request(long_doc, host))
            while not stop.wait(0.5) and sock.recv(2048):
                pass
        elif kind == "garbage":
            sock.sendall(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 3000))))
        elif kind == "pipelined":
            sock.sendall(b"".join(_request({"input": "Hi.", "response_format": "pcm", "stream": False}, host)
                                  for _ in range(rng.randrange(2, 6))))
        elif kind == "short_body":
            sock.sendall(_request(long_doc, host, length=len(json.dumps(long_doc)) + 100))
        elif kind == "normal":
            sock.sendall(_request({"input": "Hello there.", "response_format": "pcm", "stream": False}, host))
            while sock.recv(65536):
                pass
        stop.wait(rng.uniform(0, 3)) if kind != "slowloris" else None
    except OSError:
        pass                               # the server closing a hostile connection is the point
    finally:
        sock.close()
    return kind


def probe(port: int, host: str) -> tuple[float, bool]:
    """GET /health and a short speech request: (the seconds both took, whether the speech was
    refused busy); Finding if either fails otherwise."""
    t0, busy = time.monotonic(), False
    for method, path, body in (("GET", "/health", None),
                               ("POST", "/v1/audio/speech", {"input": "Hi there.", "response_format": "pcm",
                                                             "stream": False})):
        conn = http.client.HTTPConnection(host, port, timeout=PROBE_BOUND_S)
        try:
            conn.request(method, path, body=json.dumps(body) if body else None,
                         headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
        except OSError as exc:
            raise Finding(f"probe {method} {path} failed: {type(exc).__name__}: {exc}") from None
        finally:
            conn.close()
        if path != "/health" and resp.status == 503 and resp.getheader("Retry-After") and b"server busy" in data:
            busy = True
        elif resp.status != 200 or not data:
            raise Finding(f"probe {method} {path}: {resp.status} {data[:200]!r}")
    took = time.monotonic() - t0
    if took > PROBE_BOUND_S:
        raise Finding(f"probes took {took:.1f} s (bound {PROBE_BOUND_S} s)")
    return took, busy


def fuzz(port: int, seconds: float = 20, clients: int = 60, seed: int = 0, host: str = "127.0.0.1",
         idle=None) -> dict:
    """idle: a callable true once the server has nothing running or queued (checked at the end)."""
    rng = random.Random(seed)
    stop = threading.Event()
    kinds: dict[str, int] = {}
    lock = threading.Lock()

    def run_client(r: random.Random):
        while not stop.is_set():
            kind = hostile_client(port, r, stop, host)
            with lock:
                kinds[kind] = kinds.get(kind, 0) + 1

    threads = [threading.Thread(target=run_client, args=(random.Random(rng.random()),), daemon=True)
               for _ in range(clients)]
    for t in threads:
        t.start()
    worst, probes, busy, busy_since, t0 = 0.0, 0, 0, None, time.monotonic()
    try:
        while time.monotonic() - t0 < seconds:
            took, refused = probe(port, host)
            worst, probes, busy = max(worst, took), probes + 1, busy + refused
            busy_since = (busy_since or time.monotonic()) if refused else None
            if busy_since is not None and time.monotonic() - busy_since > BUSY_S:
                raise Finding(f"the speech probe was refused busy for over {BUSY_S:g} s")
            time.sleep(0.5)
    finally:
        stop.set()
        for t in threads:
            t.join(10)
    if idle is not None:
        t1 = time.monotonic()
        while not idle():
            if time.monotonic() - t1 > SETTLE_S:
                raise Finding(f"requests still running or queued {SETTLE_S:g} s after the clients left")
            time.sleep(0.1)
    return {"probes": probes, "busy": busy, "worst_probe_s": round(worst, 2), "clients": kinds}


def _self_serve(seconds: float, clients: int, seed: int) -> dict:
    test_doubles_on_path()
    import tempfile
    from kcc.speech.serve.connection import ConnectionLimits
    from kcc.speech.serve.listener import ListenerLimits
    from kcc.speech.serve.service import Limits
    from test_server import serving
    from kcc.speech.serve.app import HttpLimits
    conn = ConnectionLimits(head_timeout_s=2.0, write_stall_s=2.0)
    http = HttpLimits(body_timeout_s=2.0, read_lag_s=2.0)
    with tempfile.TemporaryDirectory() as tmp, serving(Path(tmp), limits=Limits(first_chunk_seconds=0),
                                                         connection=conn, http=http,
                                                         listener=ListenerLimits(first_byte_s=2.0)) as srv:
        svc = srv.service
        return fuzz(srv.port, seconds, clients, seed,
                    idle=lambda: svc.running + svc.waiting == 0 and not svc.jobs and srv.gate.active == 0)


if __name__ == "__main__":
    main(__doc__, seconds=20, options=lambda ap: ap.add_argument("--clients", type=int, default=60),
         self_serve=lambda a: _self_serve(a.seconds, a.clients, a.seed),
         against_port=lambda a: fuzz(a.port, a.seconds, a.clients, a.seed, a.host))
