"""Drive `kcc serve` over loopback and report time to first audio, xRT, throughput, errors, RSS.

Starts the server as a child process on 127.0.0.1 (an ephemeral port), warms it, then runs
two bounded phases of streamed requests (response_format pcm, stream_format audio):
  1 client: --requests one after another;  N clients (--clients): --requests each, at once.
TTFA is from sending the request to the first audio byte; xRT is audio seconds per wall second
of one request; throughput is audio seconds per wall second over a whole phase; peak RSS is the
server's VmHWM; worst gap is the most silence a listener playing from the first byte would hear
(audio arriving after what came before had played out), over the phase's requests. Every phase stops issuing requests after --time-limit seconds.
    python bench/bench_serve.py                       # the real model (kcc.speech.engine.load_synthesizer(None))
    python bench/bench_serve.py --fake                # tests' FakeSynth / LetterG2P: the server alone
"""
from __future__ import annotations

import argparse
import http.client
import json
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
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


def one_request(port: int, doc: dict) -> dict:
    body = json.dumps(doc).encode()
    t0 = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        conn.request("POST", "/v1/audio/speech", body=body, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            return {"error": f"{resp.status}: {resp.read()[:200]!r}"}
        first, n, play_end, stall = None, 0, 0.0, 0.0
        while (data := resp.read1(65536)):
            now = time.perf_counter() - t0
            if first is None:
                first = play_end = now
            elif now > play_end:             # a listener playing from the first byte would hear a gap
                stall, play_end = stall + now - play_end, now
            play_end += len(data) / 2 / 24000
            n += len(data)
        wall = time.perf_counter() - t0
        audio_s = n / 2 / 24000
        return {"ttfa": first, "wall": wall, "audio_s": audio_s, "xrt": audio_s / wall, "stall": stall}
    except (OSError, http.client.HTTPException) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        conn.close()


def phase(port: int, doc: dict, clients: int, requests: int, time_limit: float) -> dict:
    results, lock = [], threading.Lock()
    t_end = time.perf_counter() + time_limit

    def client():
        for _ in range(requests):
            if time.perf_counter() > t_end:
                return
            r = one_request(port, doc)
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

    return {"clients": clients, "requests": len(results), "errors": len(results) - len(ok),
            "error_samples": [r["error"] for r in results if "error" in r][:3],
            "ttfa_p50_ms": 1000 * pct(50), "ttfa_p95_ms": 1000 * pct(95),
            "xrt_median": statistics.median(r["xrt"] for r in ok) if ok else float("nan"),
            "stall_max_ms": 1000 * max((r["stall"] for r in ok), default=float("nan")),
            "throughput_audio_s_per_s": sum(r["audio_s"] for r in ok) / wall, "wall_s": wall}


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fake", action="store_true", help="fake synthesizer and G2P (measures the server alone)")
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--voice", default=None)
    ap.add_argument("--requests", type=int, default=10, help="per client per phase")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2, help="the server's --workers")
    ap.add_argument("--threads", type=int, default=None, help="the server's kernel --threads")
    ap.add_argument("--first-chunk-seconds", type=float, default=None, help="the server's --first-chunk-seconds")
    ap.add_argument("--first-chunk-phonemes", type=int, default=None, help="the server's --first-chunk-phonemes")
    ap.add_argument("--time-limit", type=float, default=120.0, help="seconds per phase")
    ap.add_argument("--json", help="also write the results here")
    a = ap.parse_args()
    port = free_port()
    argv = [sys.executable, "-c", SERVER, str(ROOT), "fake" if a.fake else "real", "serve", "--port", str(port),
            "--workers", str(a.workers), "--max-queue", str(4 * a.clients)]
    if a.threads:
        argv += ["--threads", str(a.threads)]
    if a.first_chunk_seconds is not None:
        argv += ["--first-chunk-seconds", str(a.first_chunk_seconds)]
    if a.first_chunk_phonemes is not None:
        argv += ["--first-chunk-phonemes", str(a.first_chunk_phonemes)]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.perf_counter()
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
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
        for _ in range(2):                                   # warm: first-use caches, voice pack, G2P
            warm = one_request(port, doc)
            if "error" in warm:
                raise SystemExit(f"warm-up request failed: {warm['error']}")
        out = {"cpu": platform.processor() or platform.machine(), "fake": a.fake, "text_chars": len(a.text),
               "startup_s": startup, "workers": a.workers,
               "phases": [phase(port, doc, 1, a.requests, a.time_limit),
                          phase(port, doc, a.clients, a.requests, a.time_limit)],
               "peak_rss_mb": peak_rss_mb(proc.pid)}
    finally:
        proc.terminate()
        proc.wait(60)
    print(f"server start {out['startup_s']:.1f} s, peak RSS {out['peak_rss_mb']:.0f} MB, text {len(a.text)} chars"
          f"{' (fake synthesizer)' if a.fake else ''}")
    print("| clients | requests | errors | TTFA p50 ms | TTFA p95 ms | xRT (median) | audio s / s | worst gap ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for p in out["phases"]:
        print(f"| {p['clients']} | {p['requests']} | {p['errors']} | {p['ttfa_p50_ms']:.0f} | {p['ttfa_p95_ms']:.0f} | "
              f"{p['xrt_median']:.2f} | {p['throughput_audio_s_per_s']:.2f} | {p['stall_max_ms']:.0f} |")
        for e in p["error_samples"]:
            print(f"  error: {e}")
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
