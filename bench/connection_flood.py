"""A real client's latency while 2000 sockets stall, against `kcc serve` (HTTP, HTTPS) and
`kcc wyoming`, for two checkouts: the code before kcc accepted connections itself and now.

Each server runs as a child process from the given tree (tests' FakeSynth and LetterG2P: the
connection handling alone, no model) with the usual file limit (soft = hard = --fd-limit,
1024), on 127.0.0.1. A flood thread keeps --flood sockets open that never send a byte (a
socket the server closes is opened again, as an attacker would); meanwhile a client probes
`GET /health` (HTTP, HTTPS) or `describe` (Wyoming) once every --interval seconds, each with a
--timeout deadline (a timeout counts as a failure at the deadline). Reported: probe latency
p50/p95 before the flood and during it, failures, the server's log growth (lines, bytes) during
the flood and its RSS at the end.
    python bench/connection_flood.py --before /tmp/kcc-before --after . -o bench/results/connection_flood.md
"""
from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import cpu_name, short_commit  # noqa: E402

SERVER = """
import sys, tempfile
from pathlib import Path
sys.path[:0] = [sys.argv[1], str(Path(sys.argv[1]) / "tests")]
import kcc.speech.engine, kcc.speech.g2p, kcc.speech.voices
from test_say import FakeSynth, LetterG2P
from test_server import make_catalog
kcc.speech.engine.load_synthesizer = lambda *a, **k: FakeSynth()
kcc.speech.voices.voice_catalog = lambda dirs: make_catalog(Path(tempfile.mkdtemp()))
kcc.speech.g2p.G2P = lambda lang, backend, **options: LetterG2P()
import argparse
from kcc.speech.serve.cli import add_parsers
ap = argparse.ArgumentParser()
add_parsers(ap.add_subparsers())
args = ap.parse_args(sys.argv[2:])
sys.exit(args.fn(args))
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def self_signed(where: Path) -> tuple[Path, Path]:
    cert, key = where / "c.crt", where / "c.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    key.chmod(0o600)
    return cert, key


def probe(transport: str, port: int, timeout: float, context) -> float | None:
    """One probe's latency in seconds, None when it failed or passed the deadline."""
    t0 = time.perf_counter()
    try:
        if transport == "wyoming":
            with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
                s.sendall(b'{"type": "describe"}\n')
                f = s.makefile("rb")
                header = json.loads(f.readline())
                if header.get("data_length"):
                    f.read(header["data_length"])
                ok = header["type"] == "info"
        else:
            c = (http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=timeout) if context
                 else http.client.HTTPConnection("127.0.0.1", port, timeout=timeout))
            try:
                c.request("GET", "/health")
                r = c.getresponse()
                ok = r.status == 200 and json.loads(r.read())["status"] == "ok"
            finally:
                c.close()
    except (OSError, ValueError, http.client.HTTPException):
        return None
    took = time.perf_counter() - t0
    return took if ok and took <= timeout else None


class Flood:
    """`n` sockets that never send a byte, reopened when the server closes them."""

    def __init__(self, port: int, n: int):
        self.port, self.n, self.socks, self.opened = port, n, [], 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def _open(self) -> socket.socket:
        s = socket.socket()
        s.setblocking(False)
        s.connect_ex(("127.0.0.1", self.port))
        self.opened += 1
        return s

    def run(self) -> None:
        self.socks = [self._open() for _ in range(self.n)]
        while not self.stop.wait(0.5):
            for i, s in enumerate(self.socks):
                try:
                    gone = s.recv(1) == b""
                except BlockingIOError:
                    gone = False
                except OSError:
                    gone = True
                if gone:
                    s.close()
                    self.socks[i] = self._open()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(10)
        for s in self.socks:
            s.close()


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], q: float) -> str:
    if not values:
        return "-"
    values = sorted(values)
    return f"{1000 * values[min(len(values) - 1, int(q * len(values)))]:.0f}"


def run(tree: Path, transport: str, a, cert_key) -> dict:
    port, ctx = free_port(), None
    argv = ["wyoming" if transport == "wyoming" else "serve", "--port", str(port)]
    if transport == "https":
        argv += ["--tls-cert", str(cert_key[0]), "--tls-key", str(cert_key[1])]
        ctx = ssl.create_default_context(cafile=str(cert_key[0]))
    err = tempfile.TemporaryFile()
    limit = a.fd_limit
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(tree.resolve()), *argv], stdout=subprocess.DEVNULL,
                            stderr=err, env={**os.environ, "KCC_FIRST_CHUNK_SECONDS": "0"},
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit)))
    try:
        t0 = time.monotonic()
        while probe(transport, port, 2.0, ctx) is None:
            if proc.poll() is not None or time.monotonic() - t0 > 60:
                err.seek(0)
                raise SystemExit(f"{tree} {transport}: server did not start\n{err.read().decode()[-2000:]}")
            time.sleep(0.2)
        quiet = [probe(transport, port, a.timeout, ctx) for _ in range(20)]
        log_before = err.tell()
        err.seek(0)
        lines_before = err.read().count(b"\n")
        flood = Flood(port, a.flood)
        flood.thread.start()
        time.sleep(a.settle)
        during, t1 = [], time.monotonic()
        while time.monotonic() - t1 < a.seconds:
            during.append(probe(transport, port, a.timeout, ctx))
            time.sleep(a.interval)
        rss = rss_mb(proc.pid)
        flood.close()
        err.seek(0)
        log = err.read()
        return {"quiet": quiet, "during": during, "opened": flood.opened, "rss_mb": rss,
                "log_lines": log.count(b"\n") - lines_before, "log_bytes": len(log) - log_before,
                "flood_s": a.settle + a.seconds}
    finally:
        proc.kill()
        proc.wait()
        err.close()


def row(label: str, transport: str, r: dict) -> str:
    ok_q = [x for x in r["quiet"] if x is not None]
    ok_d = [x for x in r["during"] if x is not None]
    failed = len(r["during"]) - len(ok_d)
    return (f"| {label} | {transport} | {pct(ok_q, .5)} / {pct(ok_q, .95)} | {pct(ok_d, .5)} / {pct(ok_d, .95)} | "
            f"{failed} of {len(r['during'])} | {r['opened']} | {r['log_lines']} ({r['log_bytes'] / 1024:.0f} KiB) | "
            f"{r['rss_mb']:.0f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", type=Path, required=True, help="a checkout of the code before")
    ap.add_argument("--before-label", default="`git archive ed73a59` (asyncio's accept)",
                    help="what --before is, for the report")
    ap.add_argument("--after", type=Path, default=Path("."), help="a checkout of the code now")
    ap.add_argument("--transports", default="http,https,wyoming")
    ap.add_argument("--flood", type=int, default=2000)
    ap.add_argument("--fd-limit", type=int, default=1024)
    ap.add_argument("--settle", type=float, default=3.0, help="seconds of flood before probing")
    ap.add_argument("--seconds", type=float, default=20.0, help="seconds of probing during the flood")
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--timeout", type=float, default=5.0)
    ap.add_argument("-o", "--out", type=Path)
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        cert_key = self_signed(Path(tmp))
        for transport in a.transports.split(","):
            for label, tree in (("before", a.before), ("after", a.after)):
                r = run(tree, transport, a, cert_key)
                rows.append(row(label, transport, r))
                print(rows[-1], flush=True)
    text = "\n".join([
        "# A real client while 2000 sockets stall (bench/connection_flood.py)",
        "",
        f"CPU: {cpu_name()} (Zen 4, family 25 model 17), 2 cores, a machine shared with other jobs: upper bounds. "
        f"Code: after = {short_commit()}, before = {a.before_label}. Server: a child process per row with "
        f"tests' FakeSynth (connection handling only), file limit "
        f"soft = hard = {a.fd_limit}. Flood: {a.flood} loopback sockets that never send a byte, each reopened "
        f"when the server closes it; probes every {a.interval:g} s for {a.seconds:g} s after {a.settle:g} s of "
        f"flood, each with a {a.timeout:g} s deadline (a timeout is a failure). Latency in ms, of the probes "
        "that succeeded.",
        "",
        "| code | transport | probe p50 / p95, no flood | probe p50 / p95, flood | probes failed, flood | "
        "sockets opened | server log during the flood | server RSS MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        *rows,
        "",
        "Reading it: before, every probe during the flood timed out (HTTP too: the old 512-connection cap "
        "was above what 1024 fds leave once asyncio's accepts fail) and asyncio logged a traceback per failed "
        "accept (17-26 MB of log in 23 s); after, every probe is answered, the flood's sockets are closed to "
        "make room (sockets opened: the flood reopening them, ~2000 a second) and the server's log during the "
        "flood is one tally line a minute plus one access-log line per HTTP probe. The flood latency after is "
        "the cost of that churn on 2 shared cores, the flood client included.",
        ""])
    if a.out:
        a.out.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
