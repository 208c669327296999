"""Bounded fuzzing of `kcc wyoming`'s event reader: a seeded random loop over raw events.

Each case opens a connection and sends one to three events whose type, data, declared
data_length / payload_length and payload are drawn at random (known and unknown types, fields
of every JSON type, lengths honest, short, huge, negative or not integers, headers that are not
JSON), then a `describe`. The invariant: the server answers the describe with `info` (after any
error events and audio), or, when the framing was lost (a length over its cap, a header that is
not JSON, the client's side ended inside an event), sends an `error` event and then closes. A
connection closed without an error event, a reply that is not a Wyoming event, or no reply
within 20 s is a finding; so is the server's RSS growing by more than 100 MiB. Usage:
    python fuzz/fuzz_wyoming.py --port 10200 [-n 300] [--seed 0]     (a running `kcc wyoming`)
    python fuzz/fuzz_wyoming.py --self-serve [--seconds 30]            (in-process, test doubles)
tests/test_wyoming_hostile.py runs a short loop against an in-process server with fakes.
"""
from __future__ import annotations

import json
import random
import socket
from pathlib import Path

from seeded import cases
from server_fuzzer import Finding, main, test_doubles_on_path

TYPES = ["describe", "synthesize", "synthesize-start", "synthesize-chunk", "synthesize-stop", "audio-chunk",
         "audio-start", "transcribe", "ping", "", "x" * 300, "\u202e"]
VOICES = [None, {"name": "af_alloy"}, {"name": "jf_alpha"}, {"language": "ja"}, {"language": "en_GB"},
          {"name": "../../etc/passwd"}, {"name": "af_alloy(1)+am_echo(1)"}, "af_alloy", 3, {"name": 4}, []]


def _json_value(rng: random.Random):
    return rng.choice([None, True, 0, -1, 2 ** 70, 1.5, "", "Hello there.", "\ud800", "日本語です。", "x" * 5000,
                       [1, 2], {"a": {"b": []}}, "Sentence one. Sentence two! " * rng.randrange(1, 20)])


def _data(rng: random.Random):
    doc = {}
    for _ in range(rng.randrange(0, 4)):
        key = rng.choice(["text", "voice", "rate", "speaker", "extra"])
        doc[key] = rng.choice(VOICES) if key == "voice" else _json_value(rng)
    return doc if rng.randrange(8) else rng.choice([[1], "text", 3, None])


def event(rng: random.Random) -> tuple[bytes, bool]:
    """(raw bytes of one event, whether the server may close after it: the framing is lost)."""
    header: dict = {"type": rng.choice(TYPES) if rng.randrange(10) else rng.choice([5, None, ["synthesize"]])}
    body = json.dumps(_data(rng), ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
    payload = bytes(rng.randrange(256) for _ in range(rng.choice([0, 0, 1, 100, 3000])))
    mode = rng.randrange(12)
    fatal = False
    if mode == 0:
        header["data"] = _data(rng)                       # inline data, no data_length
        body = b""
    elif mode == 1:
        header["data_length"] = rng.choice([10 ** 9, 2 ** 63, 65 * 1024 + 1])
        fatal = True
    elif mode == 2:
        header["payload_length"] = rng.choice([10 ** 10, (1 << 20) + 1])
        fatal = True
    elif mode == 3:
        header["data_length"] = rng.choice([-1, "10", 1.0, True, [3]])
        fatal = True
    elif mode == 4:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 80))) + b"\n", True
    if body:
        header["data_length"] = header.get("data_length", len(body))
    if payload and "payload_length" not in header:
        header["payload_length"] = len(payload)
    raw = json.dumps(header).encode() + b"\n"
    if not fatal:
        raw += body + payload
    return raw, fatal


def _read_events(f) -> list[dict]:
    """Replies up to `info`, or to the connection's end."""
    got = []
    while True:
        line = f.readline()
        if not line:
            return got
        try:
            header = json.loads(line)
        except ValueError:
            raise Finding(f"a reply that is not a Wyoming event: {line[:100]!r}") from None
        data = header.get("data") or {}
        if header.get("data_length"):
            data.update(json.loads(f.read(header["data_length"])))
        if header.get("payload_length"):
            f.read(header["payload_length"])
        got.append({"type": header["type"], **data})
        if header["type"] == "info":
            return got


def one_case(port: int, rng: random.Random, host: str = "127.0.0.1") -> str:
    events = [event(rng) for _ in range(rng.randrange(1, 4))]
    with socket.create_connection((host, port), timeout=20) as s:
        f = s.makefile("rb")
        fatal = False
        for raw, may_close in events:
            s.sendall(raw)
            if may_close:
                fatal = True
                break
        if not fatal:
            s.sendall(b'{"type": "describe"}\n')
        try:
            got = _read_events(f)
        except socket.timeout:
            raise Finding(f"no reply within 20 s to {[r[:120] for r, _ in events]}") from None
        except ConnectionResetError:
            got = None
        f.close()
    if got and got[-1]["type"] == "info":
        return "info"
    if not got or got[-1]["type"] != "error":
        raise Finding(f"closed without an error event after {[r[:120] for r, _ in events]}: {got and got[-3:]}")
    return "error-close"


def fuzz(port: int, n: int = 200, seed: int = 0, seconds: float = float("inf"), host: str = "127.0.0.1",
         rss=None) -> dict[str, int]:
    """rss: a callable returning the server's resident bytes (checked against 100 MiB growth)."""
    rng = random.Random(seed)
    counts = {"info": 0, "error-close": 0}
    start_rss = rss() if rss else 0
    for _ in cases(n, seconds):
        counts[one_case(port, rng, host)] += 1
        if rss and rss() - start_rss > 100 << 20:
            raise Finding(f"server RSS grew by {(rss() - start_rss) >> 20} MiB")
    return counts


def _self_serve(seconds: float, seed: int) -> dict[str, int]:
    test_doubles_on_path()
    import tempfile
    from test_wyoming import wyoming_server

    def rss():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096
    with tempfile.TemporaryDirectory() as tmp, wyoming_server(Path(tmp)) as (port, _service):
        return fuzz(port, n=10 ** 9, seed=seed, seconds=seconds, rss=rss)


if __name__ == "__main__":
    main(__doc__, seconds=30, options=lambda ap: ap.add_argument("-n", type=int, default=200),
         self_serve=lambda a: _self_serve(a.seconds, a.seed),
         against_port=lambda a: fuzz(a.port, a.n, a.seed, a.seconds, a.host))
