"""Bounded HTTP fuzzing of POST /v1/audio/speech: a seeded random loop over request bodies.

Each body is a valid request with a few fields mutated (wrong types, huge or deep values, lone
surrogates, paths as voices, random bytes, truncations). Every answer must be a well-formed
JSON error (4xx/5xx with {"error": {"message", "code"}}) or 200 audio of the requested format
that PyAV decodes; the connection must never drop. Usage:
    python fuzz/fuzz_http.py --port 8880 [-n 500] [--seed 0]     (a running `kcc serve`)
tests/test_server.py runs a short loop against an in-process server with fakes.
"""
from __future__ import annotations

import argparse
import http.client
import io
import json
import random

import av

BASE = {"model": "tts-1", "input": "Hello there.", "voice": "af_alloy", "response_format": "pcm", "speed": 1.0}
FORMATS = ["mp3", "opus", "aac", "flac", "wav", "pcm"]
MEDIA = {"mp3": "audio/mpeg", "opus": "audio/ogg", "aac": "audio/aac", "flac": "audio/flac", "wav": "audio/wav",
         "pcm": "audio/pcm"}


def _value(rng: random.Random):
    pick = rng.randrange(16)
    if pick == 0:
        return rng.choice([None, True, False, 0, -1, 2 ** 63, 1e308, -0.0, 0.3])
    if pick == 1:
        return [rng.choice(FORMATS)]
    if pick == 2:
        return {"id": rng.choice(["af_alloy", "alloy", "../x", 3])}
    if pick == 3:
        return "".join(chr(rng.randrange(0x20, 0x3000)) for _ in range(rng.randrange(1, 40)))
    if pick == 4:
        return rng.choice(["\ud800", "a\udfffb", "\x00\x1b[31m", "\u202e", "🙂" * 50])
    if pick == 5:
        return rng.choice(["../../etc/passwd", "/etc/passwd", "x.npy", "voices.npz:a", "af_alloy:0.5," * 12])
    if pick == 6:
        return rng.choice(FORMATS + ["ogg", "", "MP3"])
    if pick == 7:
        return rng.uniform(-10, 10)
    if pick == 8:
        return "x" * rng.choice([0, 1, 4096, 4097, 20000])
    return rng.choice(["af_alloy", "am_echo", "alloy", "af_alloy(2)+am_echo(1)", "sse", "audio", 1.5, 0.25, 4.0])


def body(rng: random.Random) -> bytes:
    doc = dict(BASE)
    for _ in range(rng.randrange(1, 4)):
        key = rng.choice(list(BASE) + ["stream", "stream_format", "seed", "lang_code", "instructions",
                                       "volume_multiplier", "normalization_options", "extra"])
        doc[key] = _value(rng)
    raw = json.dumps(doc).encode()
    mode = rng.randrange(12)
    if mode == 0:
        return raw[:rng.randrange(len(raw))]                               # truncated
    if mode == 1:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
    if mode == 2:
        n = rng.choice([10, 1000, 50_000])
        return b'{"input": "hi", "x": ' + b"[" * n + b"]" * n + b"}"
    if mode == 3:
        return raw.replace(b'"speed": 1.0', b'"speed": ' + b"9" * rng.choice([400, 5000]))
    return raw


def check(status: int, headers: dict, data: bytes, sent: bytes) -> str:
    ctype = headers.get("content-type", "")
    if status == 200:
        try:
            fmt = json.loads(sent).get("response_format", "mp3")
        except ValueError as exc:
            raise AssertionError(f"200 for a body that is not JSON: {sent[:80]!r}") from exc
        fmt = fmt if isinstance(fmt, str) else "?"
        if ctype.startswith("text/event-stream"):
            assert b"speech.audio" in data or b'"error"' in data, data[:200]
            return "audio"
        assert ctype.startswith(MEDIA[fmt]), (fmt, ctype)
        kw = {"format": "s16le", "options": {"sample_rate": "24000", "ch_layout": "mono"}} if fmt == "pcm" else {}
        with av.open(io.BytesIO(data), **kw) as c:
            assert sum(f.samples for f in c.decode(c.streams.audio[0])) > 0
        return "audio"
    assert 400 <= status < 600 and ctype == "application/json", (status, ctype, data[:200])
    err = json.loads(data)["error"]
    assert isinstance(err["code"], str) and err["code"] and isinstance(err["message"], str) and err["message"], err
    return "error"


def fuzz(port: int, n: int = 200, seed: int = 0, host: str = "127.0.0.1") -> dict[str, int]:
    rng = random.Random(seed)
    counts = {"audio": 0, "error": 0}
    for _ in range(n):
        sent = body(rng)
        conn = http.client.HTTPConnection(host, port, timeout=60)
        try:
            conn.request("POST", "/v1/audio/speech", body=sent, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            counts[check(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data, sent)] += 1
        finally:
            conn.close()
    return counts


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(fuzz(a.port, a.n, a.seed, a.host))
