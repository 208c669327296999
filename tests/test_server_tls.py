"""`kcc serve --tls-cert --tls-key`: HTTPS end to end with a self-signed certificate, and every way
the pair can be wrong refused by name at start (kcc.speech.serve.security.check_tls), before the
model loads."""
from __future__ import annotations

import http.client
import json
import signal
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from kcc.speech.serve.security import Tls, TlsError, check_tls
from kcc.speech.audio.wav import pcm16
from test_server import _until_value, expected, free_port, serve_cli

pytestmark = pytest.mark.tools("openssl")


def _self_signed(where: Path, name: str = "server") -> tuple[Path, Path]:
    cert, key = where / f"{name}.crt", where / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "2", "-subj", "/CN=localhost", "-addext",
                    "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    key.chmod(0o600)
    return cert, key


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    return _self_signed(tmp_path_factory.mktemp("tls"))


def test_a_good_pair_is_taken(pair):
    cert, key = pair
    assert check_tls(str(cert), str(key)) == Tls(str(cert), str(key))
    assert check_tls(None, None) is None and check_tls("", "") is None
    assert Tls(str(cert), str(key)).uvicorn_options() == {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}


def _bad_pairs(tmp: Path, cert: Path, key: Path):
    other_cert, other_key = _self_signed(tmp, "other")
    loose = tmp / "loose.key"
    loose.write_bytes(key.read_bytes())
    loose.chmod(0o644)
    garbage = tmp / "garbage.pem"
    garbage.write_text("-----BEGIN CERTIFICATE-----\nnot base64 at all\n-----END CERTIFICATE-----\n")
    empty = tmp / "empty.key"
    empty.touch(mode=0o600)
    return [
        ((cert, None), "needs both --tls-cert and --tls-key"),
        ((None, key), "needs both --tls-cert and --tls-key"),
        ((cert, tmp / "missing.key"), "--tls-key .*missing.key: no such file"),
        ((tmp / "missing.crt", key), "--tls-cert .*missing.crt: no such file"),
        ((tmp, key), "--tls-cert .*: no such file"),                                 # a directory
        ((cert, loose), "readable by other users (mode 644); chmod 600 it"),
        ((cert, other_key), "not a certificate and its matching private key"),       # key of another cert
        ((other_cert, key), "not a certificate and its matching private key"),
        ((garbage, key), "not a certificate and its matching private key"),
        ((cert, empty), "not a certificate and its matching private key"),
        ((key, cert), "readable by other users"),                                    # swapped: the cert is 644
    ]


def test_every_wrong_pair_is_a_tls_error(tmp_path, pair):
    cert, key = pair
    for (c, k), message in _bad_pairs(tmp_path, cert, key):
        with pytest.raises(TlsError, match=message.replace("(", r"\(").replace(")", r"\)")):
            check_tls(str(c) if c else None, str(k) if k else None)


def test_the_server_speaks_https_only(tmp_path, pair):
    cert, key = pair
    port = free_port()
    env = {"KCC_TLS_KEY": str(key)}       # the key from the environment
    trusted = ssl.create_default_context(cafile=str(cert))
    with serve_cli(tmp_path, ["serve", "--port", str(port), "--tls-cert", str(cert)], env) as proc:
        def ready():
            try:
                c = http.client.HTTPSConnection("127.0.0.1", port, context=trusted, timeout=5)
                try:
                    c.request("GET", "/ready")
                    status = c.getresponse().status
                    return None if status == 503 else status     # 503: still warming up
                finally:
                    c.close()
            except OSError:
                assert proc.poll() is None, proc.stderr.read().decode()
                return None
        assert _until_value(ready) == 200
        c = http.client.HTTPSConnection("localhost", port, context=trusted, timeout=30)
        body = json.dumps({"input": "Over a secure line.", "voice": "af_alloy", "response_format": "pcm"})
        c.request("POST", "/v1/audio/speech", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        assert r.status == 200 and r.read() == pcm16(expected("Over a secure line.", "af_alloy"))
        c.close()
        # A client that does not trust this certificate is refused by its own TLS check ...
        with pytest.raises(ssl.SSLCertVerificationError):
            http.client.HTTPSConnection("127.0.0.1", port, context=ssl.create_default_context(), timeout=5).request(
                "GET", "/health")
        # ... and plain HTTP gets no answer from the routes at all.
        plain = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            plain.request("GET", "/health")
            status = plain.getresponse().status
        except (OSError, http.client.HTTPException):
            status = None
        finally:
            plain.close()
        assert status != 200
        proc.send_signal(signal.SIGTERM)
        proc.wait(20)
    assert f"kcc serve: https://127.0.0.1:{port}/" in proc.stderr.read().decode()


def test_a_bad_pair_stops_the_server_before_the_model_loads(tmp_path, pair):
    cert, key = pair
    loose = tmp_path / "loose.key"
    loose.write_bytes(key.read_bytes())
    loose.chmod(0o640)
    out = subprocess.run([sys.executable, "-m", "kcc.cli", "serve", "--port", str(free_port()), "--tls-cert",
                          str(cert), "--tls-key", str(loose), "--checkpoint", str(tmp_path / "never-read.pth")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "TlsError" in out.stderr and "chmod 600" in out.stderr, out.stderr
    assert "never-read" not in out.stderr
