"""kokoro_text_encoder: generated C vs upstream TextEncoder captures (3 lengths small, 1 full)."""
from __future__ import annotations

import numpy as np
import pytest

from kcc.compiler.driver import compile_circuit
from kcc.compiler.xray import load_pinned, render, xray_compiled

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

CANARY = -333.0


@pytest.fixture(scope="module")
def te_small(small_ckpt):
    return compile_circuit("kokoro_text_encoder", small_ckpt)


@pytest.mark.parametrize("capture", ["middle_t12", "middle_t24", "middle_t36"])
def test_xray_small(te_small, capture):
    pinned = load_pinned(capture, "small")
    report = xray_compiled(te_small, pinned)
    print(render(report))
    assert [r.name for r in report.results][-1] == "kokoro.text_encoder.output"
    assert report.passed, render(report)
    assert pinned.inputs["input_ids"].shape[1] == int(capture[-2:])


@pytest.mark.full
@pytest.mark.parametrize("capture", ["middle_t12", "middle_t24", "middle_t36"])
def test_xray_full(full_ckpt, capture):
    report = xray_compiled(compile_circuit("kokoro_text_encoder", full_ckpt), load_pinned(capture, "full"))
    print(render(report))
    assert report.passed, render(report)


def test_padded_batch_matches_single_runs(te_small):
    """A short sequence padded into a batch gives its own unpadded result and zero padded rows."""
    pinned = load_pinned("middle_t36", "small")
    ids36 = pinned.inputs["input_ids"]
    ids12 = load_pinned("middle_t12", "small").inputs["input_ids"]
    batch = np.zeros((2, 36), np.int32)
    batch[0], batch[1, :12] = ids36[0], ids12[0]
    y = te_small.run({"input_ids": batch, "lengths": np.array([36, 12], np.int32)}).outputs["t_en"]
    alone = te_small.run({"input_ids": ids12, "lengths": np.array([12], np.int32)}).outputs["t_en"]
    assert np.abs(y[1, :12] - alone[0]).max() <= 1e-6
    assert not y[1, 12:].any()
    assert np.abs(y[0] - pinned.checkpoints["kokoro.text_encoder.output"][0]).max() <= 2e-5


@pytest.mark.parametrize("ids, lengths", [([[0, 178, 3]], [3]), ([[0, -1, 3]], [3]), ([[0, 5, 3]], [4]),
                                          ([[0, 5, 3]], [0])])
def test_bad_input_leaves_output_untouched(te_small, ids, lengths):
    ids = np.array(ids, np.int32)
    out = np.full((1, ids.shape[1], 512), CANARY, np.float32)
    status, msg = te_small.call([ids, np.array(lengths, np.int32)], list(ids.shape), [out], te_small.new_arena())
    assert status != 0 and "rejected" in msg
    assert (out == CANARY).all()
