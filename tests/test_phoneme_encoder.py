"""The complete ALBERT phoneme encoder in generated C, X-Rayed stage by stage.

Pinned captures (oracle/captures/phoneme_encoder.py): `phoneme_encoder` small (the 36-token
pinned ids) and full (a 16-token prefix of them, to keep the fixture small), and
`phoneme_encoder_padded` small (a batch of 36, 20 and 7 tokens padded with 0). Every one of the
27 checkpoints must pass the FP32 gate; the ops the encoder introduced (linear, layer_norm,
attention) are also checked directly against torch on odd shapes.
"""
from __future__ import annotations

import os

import numpy as np
import pytest

from kcc.compiler.runtime import KccRunError

from kcc.compiler.driver import compile_circuit
from kcc.compiler.xray import FP32_GATE, load_pinned, xray_compiled

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

P = "kokoro.phoneme_encoder."
ORDER = ([P + "embeddings", P + "projection"]
         + [f"{P}layer{i}.{k}" for i in range(12) for k in ("attention", "ffn")] + [P + "bert_encoder"])
CANARY = -777.0


@pytest.fixture(scope="module")
def enc_small(small_ckpt):
    return compile_circuit("kokoro_phoneme_encoder", small_ckpt)


@pytest.fixture(scope="module")
def enc_full(full_ckpt):
    return compile_circuit("kokoro_phoneme_encoder", full_ckpt)


def _assert_all_pass(report, n_tok):
    assert [r.name for r in report.results] == ORDER
    for r in report.results:
        assert r.status == "PASS", f"{r.name}: {r.reason}"
        assert r.max_abs <= FP32_GATE.max_abs and r.cosine >= FP32_GATE.min_cosine, r.name
        assert r.shape[1] == n_tok, r.name
    assert report.passed


@pytest.mark.parametrize("config,n_tok", [("small", 36), ("full", 16)])
def test_xray_every_stage(request, config, n_tok):
    compiled = request.getfixturevalue(f"enc_{config}")
    pinned = load_pinned("phoneme_encoder", config)
    assert pinned.inputs["input_ids"].shape == (1, n_tok)
    report = xray_compiled(compiled, pinned)
    _assert_all_pass(report, n_tok)
    # The output the next stage consumes is the final checkpoint, [B, T, hidden_dim].
    out = compiled.run({k: pinned.inputs[k] for k in compiled.graph.inputs}).outputs
    (d_en,) = out.values()
    np.testing.assert_allclose(d_en, pinned.checkpoints[P + "bert_encoder"], atol=2e-5, rtol=0)


def test_xray_padded_batch(enc_small):
    pinned = load_pinned("phoneme_encoder_padded", "small")
    assert pinned.inputs["lengths"].tolist() == [36, 20, 7]
    _assert_all_pass(xray_compiled(enc_small, pinned), 36)


def test_variable_lengths_same_library(enc_small):
    """One compiled object serves T = 36 and T = 20: the 20-token utterance alone matches its
    valid rows in the padded batch (upstream masks padded keys, so they must agree)."""
    pinned = load_pinned("phoneme_encoder_padded", "small")
    lib, arena = enc_small.library_path, enc_small.new_arena()
    ids = pinned.inputs["input_ids"][1:2, :20]
    res = enc_small.run({"input_ids": ids, "token_type_ids": np.zeros_like(ids),
                         "lengths": np.array([20], dtype=np.int32)}, arena=arena, with_checkpoints=True)
    for name in (P + "layer0.attention", P + "layer11.ffn", P + "bert_encoder"):
        got, ref = res.checkpoints[name], pinned.checkpoints[name][1:2, :20]
        assert got.shape == ref.shape
        assert np.abs(got - ref).max() <= 2e-5, name
    # Same arena, longer input, same library: still the pinned values.
    full = enc_small.run({k: pinned.inputs[k] for k in enc_small.graph.inputs}, arena=arena).outputs["d_en"]
    assert np.abs(full - pinned.checkpoints[P + "bert_encoder"]).max() <= 2e-5
    assert enc_small.library_path == lib


def test_t_beyond_max_is_refused(enc_small):
    ids = np.zeros((1, 513), dtype=np.int32)
    with pytest.raises(ValueError, match=r"dim T = 513 is outside the planned range \[1, 512\]"):
        enc_small.run({"input_ids": ids, "token_type_ids": ids, "lengths": np.array([513], dtype=np.int32)})


@pytest.mark.parametrize("bad", [0, 37, -1])
def test_length_out_of_range_leaves_output_untouched(enc_small, bad):
    pinned = load_pinned("phoneme_encoder", "small")
    ids = pinned.inputs["input_ids"]
    out = np.full((1, 36, enc_small.graph.tensors[enc_small.graph.outputs[0]].shape[-1]), CANARY, np.float32)
    status, msg = enc_small.call([ids, np.zeros_like(ids), np.array([bad], dtype=np.int32)], [1, 36], [out],
                                 enc_small.new_arena())
    assert status == -1 and "attention" in msg, (status, msg)
    assert (out == CANARY).all()
    with pytest.raises(KccRunError, match="kcc_attention_f32"):
        enc_small.run({"input_ids": ids, "token_type_ids": np.zeros_like(ids), "lengths": np.array([bad], np.int32)})


# -- the ops on their own, against torch, on shapes with tails ----------------------------------

def _one_op_circuit(op: dict, inputs: list[dict], weights: dict) -> dict:
    return {"schema": "kcc.circuit/1", "name": "t_op", "dims": {"B": {"min": 1, "max": 4}, "T": {"min": 1, "max": 64}},
            "inputs": inputs, "weights": {k: {"ref": v} for k, v in weights.items()},
            "blocks": [{"name": "b", "ops": [op], "checkpoints": [
                {"name": "y", "tensor": "y", "layout": "time_major", "dtype": "f32", "axes": ["b", "t", "c"]}]}],
            "outputs": ["y"]}


@pytest.mark.parametrize("act", ["none", "gelu_new", "leaky_relu", "tanh", "sigmoid", "relu"])
def test_linear_matches_torch(small_ckpt, act):
    import torch
    from transformers.activations import ACT2FN
    ref_act = {"none": lambda y: y, "gelu_new": ACT2FN["gelu_new"], "tanh": torch.tanh, "sigmoid": torch.sigmoid,
               "leaky_relu": lambda y: torch.nn.functional.leaky_relu(y, 0.2), "relu": torch.relu}[act]
    mod = "predictor.duration_proj.linear_layer"           # [50, K]: N is not a multiple of 16
    w, b = small_ckpt.get(mod + ".weight"), small_ckpt.get(mod + ".bias")
    k = w.shape[1]
    c = compile_circuit(_one_op_circuit(
        {"op": "linear", "in": {"x": "x"}, "w": {"weight": "w", "bias": "b"}, "attrs": {"act": act, "slope": 0.2}, "out": "y"},
        [{"name": "x", "dtype": "f32", "shape": ["B", "T", k]}], {"w": mod + ".weight", "b": mod + ".bias"}), small_ckpt)
    x = np.random.default_rng(0).standard_normal((3, 7, k)).astype(np.float32)   # 21 rows: a row tail
    y = c.run({"x": x}).outputs["y"]
    pre = torch.nn.functional.linear(torch.from_numpy(x), torch.from_numpy(w.copy()), torch.from_numpy(b.copy()))
    ref = ref_act(pre).numpy()
    assert y.shape == (3, 7, w.shape[0])
    # f32 GEMMs in different summation orders: a few ulps of the pre-activation scale.
    assert np.abs(y - ref).max() <= 2e-6 * max(1.0, float(pre.abs().max()))



def _cpu_has_fma() -> bool:
    try:
        return " fma " in open("/proc/cpuinfo").read().replace("\n", " ")
    except OSError:
        return False


@pytest.mark.skipif(not _cpu_has_fma() or os.environ.get("KCC_SANITIZE") == "1"
                    or os.environ.get("KCC_ISA") in ("baseline", "avx2"),
                    reason="portable builds take the fused twins only on FMA CPUs (and levels), not under the sanitizers")
def test_portable_gemm_runs_the_native_fused_chains(small_ckpt):
    """gemm_f32.c: portable builds carry fused-multiply-add twins of the GEMM tiles and take them on
    FMA CPUs, so a GEMM-only op gives the native build's bits (22 rows, N = 50: row and column tails)."""
    from kcc.compiler.build import BuildOptions
    mod = "predictor.duration_proj.linear_layer"
    k = small_ckpt.get(mod + ".weight").shape[1]
    doc = _one_op_circuit({"op": "linear", "in": {"x": "x"}, "w": {"weight": "w", "bias": "b"}, "out": "y"},
                          [{"name": "x", "dtype": "f32", "shape": ["B", "T", k]}], {"w": mod + ".weight", "b": mod + ".bias"})
    x = np.random.default_rng(3).standard_normal((2, 11, k)).astype(np.float32)
    portable = compile_circuit(doc, small_ckpt).run({"x": x}).outputs["y"]
    native = compile_circuit(doc, small_ckpt, options=BuildOptions(opt="-O3", native=True)).run({"x": x}).outputs["y"]
    np.testing.assert_array_equal(portable, native)


@pytest.mark.parametrize("act", ["gelu_new", "tanh", "sigmoid"])
def test_epilogue_transcendentals_are_correctly_rounded(act):
    """The GEMM epilogue's transcendentals (kcc_common.h: kcc_exp_f64 under gelu_new as
    x / (1 + e^(-2y)), kcc_tanh_f32, kcc_sigmoid_f32; the BiLSTM uses the last two) in double,
    rounded once: against 80-bit references over [-20, 20] (and [-1/8, 1/8], where tanh takes its
    series) every value is within 1 ulp and nearly all are exact. gelu's tanh form
    0.5 x (1 + tanh(y)) in double cancels where tanh(y) nears -1: > 1 ulp on ~10% of the sweep."""
    from pathlib import Path
    from kcc.weights.checkpoint import Checkpoint
    n, t = 64, 2048
    ck = Checkpoint(Path("<memory>"), {"t.w": np.eye(n, dtype=np.float32), "t.b": np.zeros(n, np.float32)})
    doc = _one_op_circuit({"op": "linear", "in": {"x": "x"}, "w": {"weight": "w", "bias": "b"},
                           "attrs": {"act": "gelu_new"}, "out": "y"},
                          [{"name": "x", "dtype": "f32", "shape": ["B", "T", n]}], {"w": "t.w", "b": "t.b"})
    doc["blocks"][0]["ops"][0]["attrs"]["act"] = act
    doc["dims"]["T"]["max"] = t
    rng = np.random.default_rng(11)
    x = np.concatenate([rng.uniform(-20, 20, (1, t // 2, n)), rng.uniform(-0.125, 0.125, (1, t // 2, n))], axis=1)
    x = x.astype(np.float32)
    got = compile_circuit(doc, ck).run({"x": x}).outputs["y"]
    xl = x.astype(np.longdouble)
    if act == "gelu_new":
        y = np.sqrt(np.longdouble(2) / np.pi) * (xl + np.longdouble(0.044715) * xl ** 3)
        ref = (xl / (1 + np.exp(-2 * y))).astype(np.float32)
    else:
        ref = (np.tanh(xl) if act == "tanh" else 1 / (1 + np.exp(-xl))).astype(np.float32)
    ulps = np.abs(got.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64))
    assert ulps.max() <= 1
    assert (ulps == 0).mean() >= 0.9999


@pytest.mark.parametrize("act", ["gelu_new", "tanh", "sigmoid"])
def test_epilogue_transcendentals_pass_nan_through(act):
    """A NaN pre-activation stays NaN through kcc_exp_f64's saturation (tanh once gave +-1)."""
    from pathlib import Path
    from kcc.weights.checkpoint import Checkpoint
    n = 16
    ck = Checkpoint(Path("<memory>"), {"t.w": np.eye(n, dtype=np.float32), "t.b": np.zeros(n, np.float32)})
    doc = _one_op_circuit({"op": "linear", "in": {"x": "x"}, "w": {"weight": "w", "bias": "b"},
                           "attrs": {"act": act}, "out": "y"},
                          [{"name": "x", "dtype": "f32", "shape": ["B", "T", n]}], {"w": "t.w", "b": "t.b"})
    x = np.zeros((1, 1, n), np.float32)
    x[0, 0, 3] = np.nan
    y = compile_circuit(doc, ck).run({"x": x}).outputs["y"]
    assert np.isnan(y[0, 0, 3])

def test_layer_norm_with_residual_matches_torch(small_ckpt):
    import torch
    ln = "bert.encoder.albert_layer_groups.0.albert_layers.0.attention.LayerNorm"
    g, bt = small_ckpt.get(ln + ".weight"), small_ckpt.get(ln + ".bias")
    c = compile_circuit(_one_op_circuit(
        {"op": "layer_norm", "in": {"x": "x", "res": "r"}, "w": {"gamma": "g", "beta": "bt"}, "attrs": {"eps": 1e-12}, "out": "y"},
        [{"name": "x", "dtype": "f32", "shape": ["B", "T", g.shape[0]]}, {"name": "r", "dtype": "f32", "shape": ["B", "T", g.shape[0]]}],
        {"g": ln + ".weight", "bt": ln + ".bias"}), small_ckpt)
    rng = np.random.default_rng(1)
    x, r = (rng.standard_normal((2, 5, g.shape[0])).astype(np.float32) * 3 + 1 for _ in range(2))
    y = c.run({"x": x, "r": r}).outputs["y"]
    ref = torch.nn.functional.layer_norm(torch.from_numpy(x + r), (g.shape[0],), torch.from_numpy(g.copy()),
                                         torch.from_numpy(bt.copy()), 1e-12).numpy()
    assert np.abs(y - ref).max() <= 2e-6


def test_threaded_build_is_bit_identical(small_ckpt, enc_small):
    """OpenMP splits GEMM tiles, attention rows and LayerNorm rows; no sum changes order."""
    from kcc.compiler.build import BuildOptions
    threaded = compile_circuit("kokoro_phoneme_encoder", small_ckpt, BuildOptions(openmp=True))
    threaded.set_threads(2)
    pinned = load_pinned("phoneme_encoder_padded", "small")
    inputs = {k: pinned.inputs[k] for k in enc_small.graph.inputs}
    a = enc_small.run(inputs).outputs["d_en"]
    b = threaded.run(inputs).outputs["d_en"]
    assert np.array_equal(a, b)
    assert xray_compiled(threaded, pinned).passed
