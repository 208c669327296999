"""Int8 weight storage (issue 26, part 1): weights that are int8 * per-row scale in the checkpoint
stay int8 in the blob, and the int8 twins of linear / lstm_gates / bilstm / embedding expand them in
registers to the FP32 path's exact weights, so their outputs equal the FP32 ops' bit for bit.

Covers: the provenance record (kcc/weights/quantised.py) and each of its refusals; the packed
layouts; each kernel against a float64 reference and against its FP32 op at every dispatch
level this CPU runs (odd sizes, panel and K-chunk tails); lowering's choice of twin; and the
default model (the int8 ONNX import): provenance for named weights, int8 bytes in the blob,
front stages bit-identical to FP32 storage.
"""
from __future__ import annotations

import dataclasses
import importlib.util

import numpy as np
import pytest

from kcc.compiler.build import BuildOptions
from kcc.compiler.isa import runnable_levels
from kcc.compiler.one_op import compile_op, op_circuit, run_cases
from kcc.kernels.registry import get_kernel
from kcc.ops import OPS, LoweringError
from kcc.ops.core import Case, with_defaults
from kcc.ops.dense import PANEL, int8_exact, pack_q8_panels
from kcc.ops.recurrence import pack_q8_transposed
from kcc.weights.checkpoint import Checkpoint
from kcc.weights.quantised import Quantised, QuantisedError, check_exact, from_exact, symmetric

pytestmark = pytest.mark.sanitize
TWINS = {"linear_q8": "linear", "lstm_gates_q8": "lstm_gates", "bilstm_q8": "bilstm", "embedding_q8": "embedding"}
LEVELS = [None, *runnable_levels()]          # None: the portable build, dispatched at load


# -- the provenance record -----------------------------------------------------------------------

def test_symmetric_record_dequantises_to_int8_times_row_scale():
    q = np.array([[1, -2, 127], [0, 5, -127]], np.int8)
    quant = symmetric(q, np.zeros(2, np.int8), np.array([0.5, 0.25], np.float32))
    assert np.array_equal(quant.dequantise(), np.array([[0.5, -1.0, 63.5], [0.0, 1.25, -31.75]], np.float32))
    one = symmetric(q, np.int8(0), np.float32(2.0))             # a per-tensor scale goes to every row
    assert np.array_equal(one.scale, [2.0, 2.0]) and one.nbytes == 6 + 8


def test_asymmetric_or_unsigned_weights_have_no_record():
    q = np.ones((2, 3), np.int8)
    assert symmetric(q, np.array([0, 1], np.int8), np.ones(2, np.float32)) is None
    assert symmetric(q.astype(np.uint8), np.uint8(0), np.float32(1.0)) is None


@pytest.mark.parametrize("bad, why", [
    ("scale_count", "3 scales for an int8 tensor of 1 rows"), ("not_reproduced", "do not reproduce the FP32 tensor"),
    ("shape", "do not reproduce the FP32 tensor"), ("not_a_multiple", "do not reproduce the FP32 tensor"),
    ("past_127", "not int8 \\* a per-row scale"), ("no_rows", "needs at least one row, got shape \\(0, 4\\)")])
def test_every_bad_provenance_is_a_quantised_error(bad, why):
    q = np.array([[3, -4]], np.int8)
    with pytest.raises(QuantisedError, match=why):
        if bad == "scale_count":
            symmetric(q, np.int8(0), np.ones(3, np.float32))
        elif bad == "not_reproduced":
            check_exact("w", Quantised(q, np.array([0.5], np.float32)), np.array([[1.5, -2.5]], np.float32))
        elif bad == "shape":
            check_exact("w", Quantised(q, np.array([0.5], np.float32)), np.zeros((2, 1), np.float32))
        elif bad == "not_a_multiple":                   # 0.3 is no multiple of 1.0 / 127
            from_exact("w", np.array([[1.0, 0.3]], np.float32))
        elif bad == "past_127":                         # a subnormal row: max / 127 rounds to half of itself
            from_exact("w", np.array([[2.5e-43, 0.0]], np.float32))
        else:
            from_exact("w", np.zeros((0, 4), np.float32))


def test_from_exact_recovers_int8_and_row_scales():
    w = int8_exact(np.random.default_rng(1), 5, 9)
    quant = from_exact("w", w)
    assert quant.q.dtype == np.int8 and np.abs(quant.q).max() == 127
    assert np.array_equal(quant.dequantise(), w)
    zero = from_exact("z", np.zeros((2, 3), np.float32))        # an all-zero row: scale 0, q 0
    assert np.array_equal(zero.scale, [0, 0]) and not zero.q.any()


# -- packed layouts -------------------------------------------------------------------------------

def test_q8_panel_words_hold_scales_then_int8_panels():
    rng = np.random.default_rng(2)
    n, k = 19, 5                                                   # two panels, the second 3 wide
    quant = from_exact("w", int8_exact(rng, n, k))
    words = pack_q8_panels(quant)
    raw = words.view(np.uint8)
    scales = raw[:2 * PANEL * 4].view(np.float32)
    assert np.array_equal(scales[:n], quant.scale) and not scales[n:].any()
    q = raw[2 * PANEL * 4:2 * PANEL * 4 + 2 * k * PANEL].view(np.int8).reshape(2, k, PANEL)
    assert np.array_equal(q[0], quant.q[:PANEL].T) and np.array_equal(q[1, :, :3], quant.q[PANEL:].T)
    assert not q[1, :, 3:].any() and words.nbytes == 2 * PANEL * 4 + 2 * k * PANEL


def test_q8_row_words_hold_each_rows_scale_then_its_int8_values():
    from kcc.ops.embedding import pack_q8_rows
    quant = from_exact("t", int8_exact(np.random.default_rng(7), 3, 5))      # 5 values: padded to 2 words
    words = pack_q8_rows(quant)
    assert words.shape == (3, 3)
    assert np.array_equal(words[:, 0], quant.scale)
    assert np.array_equal(words[:, 1:].copy().view(np.int8)[:, :5], quant.q) and not words[:, 1:].view(np.int8)[:, 5:].any()


def test_q8_transposed_words_hold_gate_scales_then_whh_transposed():
    quant = from_exact("w", int8_exact(np.random.default_rng(3), 12, 3))   # H = 3
    raw = pack_q8_transposed(quant).view(np.uint8)
    assert np.array_equal(raw[:48].view(np.float32), quant.scale)
    assert np.array_equal(raw[48:48 + 36].view(np.int8).reshape(3, 12), quant.q.T)


# -- kernels: the f64 reference and the FP32 op, at each dispatch level ---------------------------

@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("op", sorted(TWINS))
def test_int8_twin_matches_reference_and_its_fp32_op_bit_for_bit(op, isa):
    defn = OPS[op]
    cases = defn.cases()
    opts = BuildOptions(isa=isa)
    cc, cc32 = compile_op(op, cases, opts), compile_op(TWINS[op], cases, opts)
    tol = get_kernel(_kernel_of(cc)).contract.tolerance
    for threads in (1, 2):
        cc.set_threads(threads)
        for case, got, want in zip(cases, run_cases(cc, cases), run_cases(cc32, cases)):
            ref = defn.reference(case.inputs, case.weights, with_defaults(defn, case.attrs))
            err = np.abs(got.astype(np.float64) - ref).max()
            assert err <= tol * max(1.0, np.abs(ref).max()), f"{op}/{case.name} ({isa}, {threads} threads): {err:.3e}"
            assert np.array_equal(got, want), f"{op}/{case.name} ({isa}): differs from {TWINS[op]}"


def _kernel_of(cc) -> str:
    from kcc.compiler.costs import bind_op
    (name,) = {bind_op(cc.graph, o)[0] for o in cc.graph.ops}
    return name


# -- lowering: which op, which bytes --------------------------------------------------------------

def _linear_case(rng, n=21, k=10):
    return Case("one", {"x": rng.standard_normal((2, 3, k)).astype(np.float32)},
                {"weight": int8_exact(rng, n, k), "bias": rng.standard_normal(n).astype(np.float32)})


def test_checkpoint_provenance_picks_the_twin_and_the_blob_holds_int8():
    from kcc.compiler.driver import compile_circuit
    rng = np.random.default_rng(4)
    case = _linear_case(rng)
    doc, ckpt = op_circuit("linear", [case])
    quant = {"w.c0.weight": from_exact("w", case.weights["weight"])}
    cc8 = compile_circuit(doc, dataclasses.replace(ckpt, quant=quant), passes=[])
    cc32 = compile_circuit(doc, ckpt, passes=[])
    assert [o.type for o in cc8.graph.ops] == ["linear_q8"] and [o.type for o in cc32.graph.ops] == ["linear"]
    (packed,) = [w for w in cc8.graph.weights if w.endswith(".q8panel16")]
    buf = cc8.plan.weights[packed]
    blob = np.asarray(cc8.weights).view(np.uint8)
    q = blob[buf.offset + 2 * PANEL * 4:buf.offset + 2 * PANEL * 4 + 10 * PANEL].view(np.int8).reshape(10, PANEL)
    assert np.array_equal(q, quant["w.c0.weight"].q[:PANEL].T)
    assert cc8.plan.weights_bytes < cc32.plan.weights_bytes
    feed = {"c0_x": case.inputs["x"]}
    assert np.array_equal(cc8.run(feed).outputs["c0_out"], cc32.run(feed).outputs["c0_out"])


def test_int8_op_on_a_weight_that_is_not_int8_is_a_lowering_error():
    case = _linear_case(np.random.default_rng(5))
    case.weights["weight"][0, 0] = 0.1234567
    with pytest.raises(LoweringError, match="int8 storage needs an int8 weight"):
        compile_op("linear_q8", [case])


# -- the default model ----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def real_ckpt():
    if importlib.util.find_spec("onnx") is None:
        pytest.skip("'onnx' is not installed (pip install -e .[real])")
    from kcc.weights import real_model
    try:
        files = real_model.fetch(offline=True)
    except real_model.FetchError as exc:
        pytest.skip(f"the real model is not cached: {exc}")
    return real_model.import_checkpoint(files)


NAMED = ["text_encoder.lstm.weight_hh_l0", "text_encoder.embedding.weight", "predictor.lstm.weight_ih_l0_reverse",
         "bert.encoder.albert_layer_groups.0.albert_layers.0.ffn.weight", "predictor.duration_proj.linear_layer.weight"]


def test_default_model_records_int8_provenance_for_named_weights(real_ckpt):
    for ref in NAMED:
        quant = real_ckpt.quant[ref]
        assert quant.q.dtype == np.int8 and np.array_equal(quant.dequantise(), real_ckpt.tensors[ref]), ref
    assert len(real_ckpt.quant) >= 100
    assert not any(k.endswith(("weight_v", "weight_g")) for k in real_ckpt.quant)   # weight-normed: FP32


@pytest.fixture(scope="module")
def front_runs(real_ckpt):
    """The stages with int8 ops (ALBERT, text encoder, duration and prosody LSTMs) with int8 and
    with FP32 storage."""
    from kcc.model.pipeline import FRONT, Synthesizer
    runs = {}
    for label, ckpt in (("int8", real_ckpt), ("fp32", dataclasses.replace(real_ckpt, quant={}))):
        synth = Synthesizer(ckpt, stages=[*FRONT, "kokoro_prosody"], max_frames=400)
        rng = np.random.default_rng(6)
        ids = np.array([[0, *rng.integers(1, 170, 40), 0]], np.int32)
        style = (0.3 * rng.standard_normal((1, 256))).astype(np.float32)
        env = {"input_ids": ids, "token_type_ids": np.zeros_like(ids), "lengths": np.array([42], np.int32),
               "speed": np.array([1.0], np.float32), "style_dec": style[:, :128].copy(),
               "style_pred": style[:, 128:].copy()}
        checkpoints, _ = synth.run(env, with_checkpoints=True)
        runs[label] = (synth, checkpoints, env)
    return runs


def test_default_model_blob_holds_int8_and_shrinks(front_runs):
    synth8, synth32 = front_runs["int8"][0], front_runs["fp32"][0]
    types8 = {o.type for c in synth8.circuits.values() for o in c.graph.ops}
    types32 = {o.type for c in synth32.circuits.values() for o in c.graph.ops}
    assert {"linear_q8", "lstm_gates_q8", "bilstm_q8", "embedding_q8"} <= types8 and not types32 & set(TWINS)
    size8 = sum(c.plan.weights_bytes for c in synth8.circuits.values())
    size32 = sum(c.plan.weights_bytes for c in synth32.circuits.values())
    assert 45e6 < size32 - size8 < 0.75 * size32, (size8, size32)     # ~69 MB of FP32 -> ~17 MB of int8


def test_default_model_front_and_prosody_are_bit_identical_with_int8_storage(front_runs):
    ck8, env8 = front_runs["int8"][1:]
    ck32, env32 = front_runs["fp32"][1:]
    assert ck8.keys() == ck32.keys() and ck8
    for name in ck8:
        assert np.array_equal(ck8[name], ck32[name]), name
    assert np.array_equal(env8["durations"], env32["durations"])
    for name in ("en", "f0", "n", "asr"):              # the prosody stage's outputs
        assert np.array_equal(env8[name], env32[name]), name
