"""Drive `kcc serve` (or `kcc wyoming`) over loopback: time to first audio, xRT, throughput, errors, RSS.

Starts the server as a child process on 127.0.0.1 (an ephemeral port) and waits until it says
ready (HTTP: GET /ready answers 200; Wyoming: it listens). The first request then is timed on
its own (a server that is warm when it says ready answers it as fast as later ones), two more
warm it, then two bounded phases of streamed requests (--transport: pcm, stream_format audio;
sse, stream_format sse, the audio of each speech.audio.delta event; wyoming, synthesize events):
  1 client: --requests one after another;  N clients (--clients): --requests each, at once.
TTFA is from sending the request to the first audio byte; xRT is audio seconds per wall second
of one request; throughput is audio seconds per wall second over a whole phase; peak RSS is the
server's VmHWM; worst gap is the most silence a listener playing from the first byte would hear
(audio arriving after what came before had played out), over the phase's requests. Every phase stops issuing requests after --time-limit seconds.
    python bench/bench_serve.py                       # the real model (kcc.speech.engine.load_synthesizer(None))
    python bench/bench_serve.py --fake                # tests' FakeSynth / LetterG2P: the server alone
    python bench/bench_serve.py --root /work/main     # another checkout's server (before / after)
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import http.client
import json
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.machine import cpu_label  # noqa: E402
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the woods."

SERVER = """
import sys
from pathlib import Path
sys.path[:0] = [sys.argv[1], str(Path(sys.argv[1]) / "tests")]
if sys.argv[2] == "fake":
    import tempfile
    import kcc.speech.engine, kcc.speech.g2p.g2p, kcc.speech.voices
    from test_say import FakeSynth, LetterG2P
    from test_server import make_catalog
    kcc.speech.engine.load_synthesizer = lambda *a, **k: FakeSynth(delay=0.02)
    kcc.speech.voices.voice_catalog = lambda dirs: make_catalog(Path(tempfile.mkdtemp()))
    kcc.speech.g2p.g2p.G2P = lambda lang, backend, **options: LetterG2P()
import argparse
from kcc.speech.serve.cli import add_parsers
ap = argparse.ArgumentParser()
add_parsers(ap.add_subparsers())
args = ap.parse_args(sys.argv[3:])
sys.exit(args.fn(args))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Playback:
    """A listener playing 16-bit 24 kHz audio from its first byte: when that came (TTFA, from t0),
    and the gaps it would hear where the next bytes came after the last ones had played."""

    def __init__(self, t0: float):
        self.t0, self.first, self.play_end, self.stall, self.bytes = t0, None, 0.0, 0.0, 0

    def heard(self, nbytes: int) -> None:
        now = time.perf_counter() - self.t0
        if self.first is None:
            self.first = self.play_end = now
        elif now > self.play_end:
            self.stall, self.play_end = self.stall + now - self.play_end, now
        self.play_end += nbytes / 2 / 24000
        self.bytes += nbytes

    def result(self) -> dict:
        wall, audio_s = time.perf_counter() - self.t0, self.bytes / 2 / 24000
        return {"ttfa": self.first, "wall": wall, "audio_s": audio_s, "xrt": audio_s / wall, "stall": self.stall}


def one_request(port: int, doc: dict, transport: str = "pcm") -> dict:
    if transport == "wyoming":
        return asyncio.run(wyoming_request(port, doc))
    if transport == "sse":
        doc = {**doc, "stream_format": "sse"}
    body = json.dumps(doc).encode()
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("POST", "/v1/audio/speech", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return {"error": f"{resp.status}: {resp.read()[:200]!r}"}
        playback, events = Playback(t0), SseAudio() if transport == "sse" else None
        while (data := resp.read1(65536)):
            if events is not None:            # the audio in the events completed so far
                data = events.feed(data)
                if not data:
                    continue
            playback.heard(len(data))
        return playback.result()
    except (OSError, http.client.HTTPException) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        conn.close()


class SseAudio:
    """stream_format sse: the PCM bytes of each complete speech.audio.delta event."""

    def __init__(self):
        self.buf = b""

    def feed(self, data: bytes) -> bytes:
        self.buf += data
        *whole, self.buf = self.buf.split(b"\n\n")
        out = b""
        for ev in whole:
            if ev.startswith(b"data: "):
                doc = json.loads(ev[6:])
                if doc.get("type") == "speech.audio.delta":
                    out += base64.b64decode(doc["audio"])
        return out


async def wyoming_request(port: int, doc: dict) -> dict:
    """One Wyoming `synthesize`: time to the first audio-chunk, audio until audio-stop."""
    from wyoming.audio import AudioChunk, AudioStop
    from wyoming.client import AsyncTcpClient
    from wyoming.error import Error
    from wyoming.tts import Synthesize, SynthesizeVoice
    t0 = time.perf_counter()
    try:
        async with AsyncTcpClient("127.0.0.1", port) as client:
            voice = SynthesizeVoice(name=doc["voice"]) if doc.get("voice") else None
            await client.write_event(Synthesize(text=doc["input"], voice=voice).event())
            playback = Playback(t0)
            while (event := await client.read_event()) is not None:
                if Error.is_type(event.type):
                    return {"error": Error.from_event(event).text}
                if AudioStop.is_type(event.type):
                    break
                if AudioChunk.is_type(event.type):
                    playback.heard(len(AudioChunk.from_event(event).audio))
        return playback.result()
    except OSError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


def phase(port: int, doc: dict, clients: int, requests: int, time_limit: float, transport: str = "pcm") -> dict:
    results, lock = [], threading.Lock()
    t_end = time.perf_counter() + time_limit

    def client():
        for _ in range(requests):
            if time.perf_counter() > t_end:
                return
            r = one_request(port, doc, transport)
            with lock:
                results.append(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ok = [r for r in results if "error" not in r]
    ttfa = sorted(r["ttfa"] for r in ok)

    def pct(p):
        return ttfa[min(len(ttfa) - 1, round(p / 100 * (len(ttfa) - 1)))] if ttfa else float("nan")

    return {"clients": clients, "transport": transport, "requests": len(results), "errors": len(results) - len(ok),
            "error_samples": [r["error"] for r in results if "error" in r][:3],
            "ttfa_p50_ms": 1000 * pct(50), "ttfa_p95_ms": 1000 * pct(95),
            "xrt_median": statistics.median(r["xrt"] for r in ok) if ok else float("nan"),
            "stall_max_ms": 1000 * max((r["stall"] for r in ok), default=float("nan")),
            "throughput_audio_s_per_s": sum(r["audio_s"] for r in ok) / wall, "wall_s": wall}


def peak_rss_mb(pid: int, field: str = "VmHWM") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


class RssCurve:
    """The server's VmRSS / RssAnon / RssFile (MB) every `every` seconds, from a thread."""

    def __init__(self, pid: int, every: float):
        self.pid, self.every, self.rows, self.done = pid, every, [], threading.Event()
        self.t0 = time.perf_counter()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.wait(self.every if self.rows else 0):
            self.rows.append({"t": time.perf_counter() - self.t0,
                              **{k: peak_rss_mb(self.pid, f) for k, f in
                                 (("rss", "VmRSS"), ("anon", "RssAnon"), ("file", "RssFile"))}})

    def stop(self) -> list[dict]:
        self.done.set()
        self.thread.join()
        return self.rows


def http_ready(port: int) -> bool:
    """GET /ready answers 200 (a server that warms first answers 503 until warm)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        conn.request("GET", "/ready")
        return conn.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fake", action="store_true", help="fake synthesizer and G2P (measures the server alone)")
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--voice", default=None)
    ap.add_argument("--requests", type=int, default=10, help="per client per phase")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2, help="the server's --workers")
    ap.add_argument("--threads", type=int, default=None, help="the server's kernel --threads")
    ap.add_argument("--first-chunk-phonemes", type=int, default=None, help="the server's --first-chunk-phonemes")
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds per phase")
    ap.add_argument("--transport", choices=("pcm", "sse", "wyoming"), default="pcm",
                    help="HTTP streamed pcm, HTTP stream_format sse, or `kcc wyoming`'s synthesize events")
    ap.add_argument("--root", default=str(ROOT), help="the kcc tree the server runs (another checkout: 'before')")
    ap.add_argument("--json", help="also write the results here")
    ap.add_argument("--precision", default=None, help="the server's --precision")
    ap.add_argument("--languages", default=None, help="the server's --languages (the G2P it warms and offers)")
    ap.add_argument("--only-clients", action="store_true", help="only the --clients phase (no 1-client phase)")
    ap.add_argument("--rss-every", type=float, default=None,
                    help="also sample the server's memory every this many seconds (VmRSS, RssAnon, RssFile)")
    a = ap.parse_args()
    port = free_port()
    command = ["wyoming", "--uri", f"tcp://127.0.0.1:{port}"] if a.transport == "wyoming" else ["serve", "--port", str(port)]
    argv = [sys.executable, "-c", SERVER, a.root, "fake" if a.fake else "real", *command,
            "--workers", str(a.workers), "--max-queue", str(4 * a.clients)]
    if a.threads:
        argv += ["--threads", str(a.threads)]
    if a.first_chunk_phonemes is not None:
        argv += ["--first-chunk-phonemes", str(a.first_chunk_phonemes)]
    if a.precision:
        argv += ["--precision", a.precision]
    if a.languages:
        argv += ["--languages", a.languages]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.perf_counter()
        while True:
            try:                      # ready: Wyoming listening; HTTP's /ready 200 (503 while warming)
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                if a.transport == "wyoming" or http_ready(port):
                    break
                time.sleep(0.2)
            except OSError:
                if proc.poll() is not None:
                    print(proc.stderr.read(), file=sys.stderr)
                    return 1
                if time.perf_counter() - t0 > 900:
                    raise SystemExit("server did not start within 900 s")
                time.sleep(0.2)
        threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()   # drain the log
        startup = time.perf_counter() - t0
        doc = {"model": "kokoro", "input": a.text, "response_format": "pcm", **({"voice": a.voice} if a.voice else {})}
        idle_rss = peak_rss_mb(proc.pid, "VmRSS")
        cold = one_request(port, doc, a.transport)          # the first request once the server says ready
        if "error" in cold:
            raise SystemExit(f"first request failed: {cold['error']}")
        for _ in range(2):                                   # then warm: whatever the server left to first use
            warm = one_request(port, doc, a.transport)
            if "error" in warm:
                raise SystemExit(f"warm-up request failed: {warm['error']}")
        curve = RssCurve(proc.pid, a.rss_every) if a.rss_every else None
        phases = [] if a.only_clients else [phase(port, doc, 1, a.requests, a.time_limit, a.transport)]
        phases.append(phase(port, doc, a.clients, a.requests, a.time_limit, a.transport))
        out = {"cpu": cpu_label(), "fake": a.fake, "text_chars": len(a.text), "root": a.root,
               "transport": a.transport, "startup_s": startup, "workers": a.workers, "precision": a.precision,
               "languages": a.languages,
               "first_request_ttfa_ms": 1000 * cold["ttfa"], "idle_rss_mb": idle_rss,
               "phases": phases, "peak_rss_mb": peak_rss_mb(proc.pid),
               "rss_curve": curve.stop() if curve else None}
    finally:
        proc.terminate()
        proc.wait(60)
    print(f"{out['cpu']}; {a.transport} from {a.root}; server ready after {out['startup_s']:.1f} s; first request's "
          f"first audio {out['first_request_ttfa_ms']:.0f} ms; RSS idle {out['idle_rss_mb']:.0f} MB, peak "
          f"{out['peak_rss_mb']:.0f} MB; text {len(a.text)} chars{' (fake synthesizer)' if a.fake else ''}")
    print("| clients | requests | errors | TTFA p50 ms | TTFA p95 ms | xRT (median) | audio s / s | worst gap ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for p in out["phases"]:
        print(f"| {p['clients']} | {p['requests']} | {p['errors']} | {p['ttfa_p50_ms']:.0f} | {p['ttfa_p95_ms']:.0f} | "
              f"{p['xrt_median']:.2f} | {p['throughput_audio_s_per_s']:.2f} | {p['stall_max_ms']:.0f} |")
        for e in p["error_samples"]:
            print(f"  error: {e}")
    if out["rss_curve"]:
        rows = out["rss_curve"]
        print(f"server memory every {a.rss_every:g} s over {rows[-1]['t']:.0f} s (MB): " + ", ".join(
            f"{k} first {rows[0][k]:.0f} / max {max(r[k] for r in rows):.0f} / last {rows[-1][k]:.0f}"
            for k in ("rss", "anon", "file")))
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
