"""kokoro_duration: DurationEncoder + duration head vs upstream, integer durations exactly.

X-Ray PASS at 3 lengths (small and full); durations equal upstream's pred_dur as integers
at 3 lengths x 3 speeds; the rounding is torch.round's half-to-even; bad speed, NaN style and
bad lengths give a nonzero status with both output canaries untouched.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from kcc.weights.checkpoint import Checkpoint
from kcc.compiler.driver import compile_circuit
from kcc.compiler.xray import load_pinned, render, xray_compiled

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

CAPTURES = ["middle_t12", "middle_t24", "middle_t36"]
CANARY_F, CANARY_I = -444.0, -444


@pytest.fixture(scope="module")
def dur_small(small_ckpt):
    return compile_circuit("kokoro_duration", small_ckpt)


def _inputs(pinned, speed):
    return {"d_en": pinned.inputs["d_en"], "style_pred": pinned.inputs["style_pred"],
            "lengths": pinned.inputs["lengths"], "speed": np.array([speed], np.float32)}


@pytest.mark.parametrize("capture", CAPTURES)
def test_xray_small(dur_small, capture):
    report = xray_compiled(dur_small, load_pinned(capture, "small"))
    print(render(report))
    assert report.passed, render(report)
    assert report.result("kokoro.predictor.durations").max_abs == 0.0


@pytest.mark.full
def test_xray_full(full_ckpt):
    c = compile_circuit("kokoro_duration", full_ckpt)
    for capture in ("middle_t12", "middle_t24", "middle_t36"):
        pinned = load_pinned(capture, "full")
        report = xray_compiled(c, pinned)
        print(render(report))
        assert report.passed, render(report)
        want = pinned.checkpoints["kokoro.predictor.durations_by_speed"].astype(np.int64)
        for speed, ref in zip(pinned.inputs["speeds"], want):
            assert (c.run(_inputs(pinned, float(speed))).outputs["durations"][0] == ref).all()


@pytest.mark.parametrize("capture", CAPTURES)
def test_durations_exact_at_three_speeds(dur_small, capture):
    pinned = load_pinned(capture, "small")
    speeds = pinned.inputs["speeds"]
    want = pinned.checkpoints["kokoro.predictor.durations_by_speed"].astype(np.int64)
    assert list(np.round(speeds, 3)) == [0.8, 1.0, 1.3]
    for speed, ref in zip(speeds, want):
        got = dur_small.run(_inputs(pinned, float(speed))).outputs["durations"]
        assert got.dtype == np.int32 and got.shape == (1, ref.size)
        assert (got[0] == ref).all(), f"speed {speed}: {got[0].tolist()} != {ref.tolist()}"
    assert not (want[0] == want[2]).all(), "the speeds must actually change the durations"


def _durations_only():
    doc = {"schema": "kcc.circuit/1", "name": "test_durations_op",
           "dims": {"B": {"min": 1, "max": 2}, "T": {"min": 1, "max": 8}, "K": {"min": 1, "max": 16}},
           "inputs": [{"name": "logits", "dtype": "f32", "shape": ["B", "T", "K"]},
                      {"name": "speed", "dtype": "f32", "shape": ["B"]},
                      {"name": "lengths", "dtype": "i32", "shape": ["B"]}],
           "weights": {},
           "blocks": [{"name": "d", "ops": [{"op": "durations", "in": {"logits": "logits", "speed": "speed",
                                                                       "lengths": "lengths"}, "out": "dur"}],
                       "checkpoints": [{"name": "dur", "tensor": "dur", "layout": "token_major", "dtype": "f32",
                                        "axes": ["batch", "token"]}]}],
           "outputs": ["dur"]}
    return compile_circuit(doc, Checkpoint(Path("none"), {}))


def test_rounding_is_half_to_even_and_clamped():
    c = _durations_only()
    # sigmoid(0) = 0.5 exactly: n zero logits sum to n/2, so ties are exercised exactly;
    # -30 logits contribute ~1e-13 each (a count of 0.0 -> clamped to 1).
    logits = np.full((1, 6, 16), -30.0, np.float32)
    for t, n in enumerate([5, 7, 9, 1, 3, 0]):       # 2.5, 3.5, 4.5, 0.5, 1.5, ~0
        logits[0, t, :n] = 0.0
    got = c.run({"logits": logits, "speed": np.array([1.0], np.float32), "lengths": np.array([6], np.int32)})
    ref = torch.round(torch.sigmoid(torch.from_numpy(logits)).sum(-1)).clamp(min=1).long().numpy()
    assert got.outputs["dur"][0].tolist() == [2, 4, 4, 1, 2, 1] == ref[0].tolist()
    # padded tokens get 0 frames
    got = c.run({"logits": logits, "speed": np.array([1.0], np.float32), "lengths": np.array([2], np.int32)})
    assert got.outputs["dur"][0].tolist() == [2, 4, 0, 0, 0, 0]


def _call_with_canaries(c, inputs):
    g = c.graph
    dims = c.infer_dims(inputs)
    ins = [np.ascontiguousarray(inputs[n]) for n in g.inputs]
    outs = [np.full(c.shape_of(n, dims), CANARY_I if g.tensors[n].dtype == "i32" else CANARY_F,
                    np.int32 if g.tensors[n].dtype == "i32" else np.float32) for n in g.outputs]
    status, msg = c.call(ins, [dims[d] for d in g.dims], outs, c.new_arena())
    return status, msg, outs


@pytest.mark.parametrize("speed", [0.0, -1.0, float("nan"), 6.0, float("inf")])
def test_bad_speed_rejected_outputs_untouched(dur_small, speed):
    pinned = load_pinned("middle_t12", "small")
    status, msg, outs = _call_with_canaries(dur_small, _inputs(pinned, speed))
    assert status != 0 and "durations" in msg
    assert all((o == (CANARY_I if o.dtype == np.int32 else CANARY_F)).all() for o in outs)


@pytest.mark.parametrize("what", ["nan_style", "inf_style", "zero_length", "long_length"])
def test_bad_style_or_lengths_rejected(dur_small, what):
    pinned = load_pinned("middle_t12", "small")
    inputs = _inputs(pinned, 1.0)
    if what.endswith("style"):
        style = inputs["style_pred"].copy()
        style[0, 17] = np.nan if what == "nan_style" else np.inf
        inputs["style_pred"] = style
    else:
        inputs["lengths"] = np.array([0 if what == "zero_length" else 13], np.int32)
    status, msg, outs = _call_with_canaries(dur_small, inputs)
    assert status != 0 and "style_in.0 (kcc_rows_concat_mask_f32)" in msg  # the first op
    assert all((o == (CANARY_I if o.dtype == np.int32 else CANARY_F)).all() for o in outs)
