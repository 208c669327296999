"""The local Ray that `kcc batch --engine ray` starts refuses a client without its per-run token
(its GCS and raylet listen on every interface in Ray 2.60, so the token is what keeps another
host, or another local user, from running code in it). Skipped like test_batch_ray.py."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

if os.environ.get("KCC_SKIP_RAY") == "1":
    pytest.skip("KCC_SKIP_RAY=1", allow_module_level=True)
ray = pytest.importorskip("ray")

from kcc.speech.batch import Batch                                            # noqa: E402
from test_batch import PHONEME_ITEMS, job_kwargs, voice_dir                    # noqa: E402,F401

TESTS = Path(__file__).resolve().parent


def _listening(pids: set[int]) -> list[tuple[str, int, str]]:
    import psutil                          # (Ray ships it on its path)
    out = []
    for c in psutil.net_connections("inet"):
        if c.status == psutil.CONN_LISTEN and c.pid in pids:
            out.append((c.laddr.ip, c.laddr.port, psutil.Process(c.pid).name()))
    return out


def _connect(gcs: str, env: dict) -> subprocess.CompletedProcess:
    code = f"import ray; ray.init(address={gcs!r}, log_to_driver=False); print('CONNECTED', len(ray.nodes()))"
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


def test_the_local_ray_requires_its_token(tmp_path, monkeypatch):
    assert not ray.is_initialized()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS.parent), str(TESTS)]))
    for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")           # the user's setting: not for kcc's own Ray
    job = Batch(PHONEME_ITEMS[:2], tmp_path / "out", engine="ray", **job_kwargs(threads=1))
    it = iter(job)
    try:
        _probe(it, tmp_path)
    finally:
        it.close()
    assert not ray.is_initialized() and os.environ["RAY_AUTH_MODE"] == "disabled"
    assert "RAY_AUTH_TOKEN" not in os.environ                 # the run's token went with its Ray
    assert job.ok


def _probe(it, tmp_path):
    import psutil
    first = next(it)                                          # Ray is up while the job runs
    assert first.status == "done", first.reason
    gcs = ray._private.worker.global_worker.node.gcs_address
    token = os.environ["RAY_AUTH_TOKEN"]
    assert os.environ["RAY_AUTH_MODE"] == "token" and len(token) == 64
    ray_pids = {p.pid for p in psutil.Process().children(recursive=True)}
    sockets = _listening(ray_pids)
    assert any(name == "gcs_server" for _, _, name in sockets), sockets
    outsider = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    outsider["HOME"] = str(tmp_path / "someone")               # no ~/.ray/auth_token of ours either
    for label, env in (("no token", outsider), ("a wrong token", {**outsider, "RAY_AUTH_MODE": "token",
                                                                   "RAY_AUTH_TOKEN": "0" * 64})):
        refused = _connect(gcs, env)
        assert refused.returncode != 0 and "CONNECTED" not in refused.stdout, label
        assert "Unauthenticated" in refused.stderr or "Authentication" in refused.stderr, (label, refused.stderr[-2000:])
    allowed = _connect(gcs, {**outsider, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token})
    assert "CONNECTED 1" in allowed.stdout, allowed.stderr[-2000:]
    assert [o.status for o in it] == ["done"]
