"""kokoro_prosody: alignment expansion + F0/N prediction vs upstream F0Ntrain captures.

Two-phase contract: F = sum(durations) is passed by the caller; durations that do not sum to
F (or are negative) and a NaN style give a nonzero status with every output canary untouched.
The expansion equals upstream's one-hot alignment matmul exactly, zero durations included.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kcc.weights.checkpoint import Checkpoint
from kcc.compiler.driver import compile_circuit
from kcc.compiler.xray import load_pinned, render, xray_compiled

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

CANARY = -222.0


@pytest.fixture(scope="module")
def prosody_small(small_ckpt):
    return compile_circuit("kokoro_prosody", small_ckpt)


def _inputs(pinned):
    return {k: pinned.inputs[k] for k in ("d", "durations", "style_pred", "t_en")}


def test_xray_small(prosody_small):
    pinned = load_pinned("middle_t12", "small")
    report = xray_compiled(prosody_small, pinned)
    print(render(report))
    assert report.passed, render(report)
    assert report.result("kokoro.predictor.expanded").max_abs == 0.0
    assert report.result("kokoro.asr").max_abs == 0.0
    for name in ("kokoro.predictor.f0", "kokoro.predictor.n"):
        r = report.result(name)
        assert r.cosine >= 0.99999 and r.rel_rmse <= 2e-5
    assert report.result("kokoro.predictor.n").max_abs <= 2e-5   # only f0 (Hz scale) has a loosened gate


@pytest.mark.full
def test_xray_full(full_ckpt):
    report = xray_compiled(compile_circuit("kokoro_prosody", full_ckpt), load_pinned("middle_t12", "full"))
    print(render(report))
    assert report.passed, render(report)


def test_two_phase_run_with_explicit_frames(prosody_small):
    pinned = load_pinned("middle_t12", "small")
    frames = int(pinned.inputs["durations"].sum())
    out = prosody_small.run(_inputs(pinned), dims={"F": frames}).outputs
    assert out["en"].shape == (1, frames, 640) and out["f0"].shape == (1, 2 * frames)
    assert np.abs(out["n"] - pinned.checkpoints["kokoro.predictor.n"]).max() <= 2e-5
    with pytest.raises(ValueError, match="dim F is not set"):
        prosody_small.run(_inputs(pinned))


def _call(c, inputs, frames):
    g = c.graph
    dims = c.infer_dims(inputs, {"F": frames})
    outs = [np.full(c.shape_of(n, dims), CANARY, np.float32) for n in g.outputs]
    status, msg = c.call([np.ascontiguousarray(inputs[n]) for n in g.inputs], [dims[d] for d in g.dims],
                         outs, c.new_arena())
    return status, msg, outs


@pytest.mark.parametrize("case", ["sum_low", "sum_high", "negative", "nan_style"])
def test_bad_input_leaves_outputs_untouched(prosody_small, case):
    pinned = load_pinned("middle_t12", "small")
    inputs = _inputs(pinned)
    frames = int(inputs["durations"].sum())
    if case == "sum_low":
        frames -= 1
    elif case == "sum_high":
        frames += 1
    elif case == "negative":
        dur = inputs["durations"].copy()
        dur[0, 3], dur[0, 4] = -2, dur[0, 4] + 2        # same sum, one negative count
        inputs["durations"] = dur
    else:
        style = inputs["style_pred"].copy()
        style[0, 0] = np.nan
        inputs["style_pred"] = style
    status, msg, outs = _call(prosody_small, inputs, frames)
    assert status != 0, msg
    assert ("kcc_check_finite_copy_f32" if case == "nan_style" else "kcc_expand_by_durations_f32") in msg
    assert all((o == CANARY).all() for o in outs)


def test_expansion_equals_one_hot_matmul():
    doc = {"schema": "kcc.circuit/1", "name": "test_expand",
           "dims": {"T": {"min": 1, "max": 16}, "F": {"min": 1, "max": 64}},
           "inputs": [{"name": "x", "dtype": "f32", "shape": [1, "T", 5]},
                      {"name": "dur", "dtype": "i32", "shape": [1, "T"]}],
           "weights": {},
           "blocks": [{"name": "e", "ops": [{"op": "expand_by_durations", "in": {"x": "x", "durations": "dur"},
                                             "attrs": {"frames": "F"}, "out": "y"}],
                       "checkpoints": [{"name": "y", "tensor": "y", "layout": "time_major", "dtype": "f32",
                                        "axes": ["batch", "frame", "channel"]}]}],
           "outputs": ["y"]}
    c = compile_circuit(doc, Checkpoint(Path("none"), {}))
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 9, 5)).astype(np.float32)
    dur = np.array([[2, 0, 1, 5, 0, 0, 3, 1, 4]], np.int32)
    frames = int(dur.sum())
    idx = np.repeat(np.arange(9), dur[0])                 # upstream: repeat_interleave + one-hot
    aln = np.zeros((9, frames), np.float32)
    aln[idx, np.arange(frames)] = 1
    ref = (x[0].T @ aln).T[None]
    y = c.run({"x": x, "dur": dur}, dims={"F": frames}).outputs["y"]
    assert (y == ref).all()
