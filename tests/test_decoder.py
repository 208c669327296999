"""X-Ray of the decoder circuit (istftnet Decoder up to the generator) against its pinned
captures, for both seeded configs (their decoders have the same shapes, different weights)."""
from __future__ import annotations

import numpy as np
import pytest

from kcc.compiler.driver import compile_circuit
from kcc.compiler.xray import FP32_GATE, Gate, load_pinned, xray_compiled

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

CHECKPOINTS = ["kokoro.decoder.f0_conv", "kokoro.decoder.n_conv", "kokoro.decoder.asr_res",
               "kokoro.decoder.encode", *[f"kokoro.decoder.decode.{i}" for i in range(4)],
               "kokoro.decoder.generator_input"]


@pytest.fixture(scope="module", params=["small", "full"])
def config(request):
    return request.param


@pytest.fixture(scope="module")
def compiled(request, config):
    return compile_circuit("kokoro_decoder", request.getfixturevalue(f"{config}_ckpt"))


@pytest.fixture(scope="module")
def pinned(config):
    return load_pinned("decoder", config)


def test_decoder_xray_passes_fp32_gate(compiled, pinned):
    report = xray_compiled(compiled, pinned)
    assert [r.name for r in report.results] == CHECKPOINTS
    for r in report.results:
        assert r.status == "PASS", f"{r.name}: {r.reason}"
        assert r.finite and r.cosine >= 0.99999 and r.rel_rmse <= 2e-5
        if r.name == "kokoro.decoder.f0_conv":   # Hz-scale outputs: ulp-limited gate, see the circuit
            assert r.gate == Gate(max_abs=1e-4, max_rmse=5e-5) and r.max_abs <= 1e-4
        else:
            assert r.gate == FP32_GATE and r.max_abs <= 2e-5
    assert report.passed
    assert report.result("kokoro.decoder.generator_input").shape == (1, 20, 512)


def test_decoder_output_is_generator_input(compiled, pinned):
    ins = {k: pinned.inputs[k] for k in ("asr", "f0", "n", "style_dec")}
    out = compiled.run(ins).outputs["gen_in"]
    ref = pinned.checkpoints["kokoro.decoder.generator_input"]
    assert out.shape == ref.shape
    assert float(np.abs(out - ref).max()) <= 2e-5


def test_decoder_rejects_f0_not_twice_the_frames(compiled, pinned):
    ins = {k: pinned.inputs[k] for k in ("asr", "f0", "n", "style_dec")}
    ins["f0"] = ins["f0"][:, :-1]
    with pytest.raises(ValueError, match=r"\(2\*F\)"):
        compiled.run(ins)
