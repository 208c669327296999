"""The conv variants chosen at lowering (kcc/ops/conv.py VARIANTS): which kernel each shipped
conv shape binds (the adain_conv1d fusion has one kernel), and every variant on the shipped
circuits' conv geometries (the real model's and the full config's: the same layer shapes)
against the float64 numpy reference, bit-identical at 1 and 2 threads.

A kernel change that must not change results is checked bit for bit on these cases: record the
outputs before it (`python tests/test_conv_variants.py record PATH`), then run this file with
KCC_CONV_RECORD=PATH (without it that comparison skips). The split of the one run-time-dispatching
kcc_conv1d_f32 into its variants was proved so.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from kcc.compiler.costs import bind_op
from kcc.compiler.lower import lower_circuit
from kcc.compiler.one_op import compile_op, op_circuit, run_cases
from kcc.compiler.passes import DEFAULT_PASSES
from kcc.ops import OPS, Case, LoweringError
from kcc.ops.conv import conv_case, conv_reference, variant
from kcc.ops.fused import _case as adain_conv_case

pytestmark = pytest.mark.sanitize

# (name, c_in, c_out, K, attrs): the conv geometries of kcc/circuits/*.json (real model = full
# config). The shipped convs carry no act (an activation is its own op); the leaky and res rows
# exercise the epilogue the fused, residual-fused and spectral paths share.
CONV1D = (
    ("f0_curve_1in_1out_s2", 1, 1, 3, {"stride": 2, "padding": 1}),
    ("decode_conv1x1_1090_1024", 1090, 1024, 1, {}),
    ("decode_conv1x1_1090_512", 1090, 512, 1, {}),
    ("decode_k3_1090_512", 1090, 512, 3, {"padding": 1}),
    ("noise_conv1x1_22_128", 22, 128, 1, {}),
    ("noise_k12_s6_22_256", 22, 256, 12, {"stride": 6, "padding": 3}),
    ("f0_proj_256_1", 256, 1, 1, {}),
    ("shortcut_512_256", 512, 256, 1, {}),
    ("asr_res_512_64", 512, 64, 1, {}),
    ("prosody_k3_512_256", 512, 256, 3, {"padding": 1}),
    ("text_cnn_k5_512", 512, 512, 5, {"padding": 2, "act": "leaky_relu", "slope": 0.2}),
    ("encode_conv1x1_514_1024", 514, 1024, 1, {}),
    ("resblock_k3_d3_256", 256, 256, 3, {"padding": 3, "dilation": 3, "res": True}),
    ("conv_post_k7_128_22", 128, 22, 7, {"padding": 3}),
    ("resblock_k11_d5_128", 128, 128, 11, {"padding": 25, "dilation": 5, "res": True}),
)
CONV_T = (
    ("upsample_depthwise_1090_s2", 1090, 1090, 3, {"stride": 2, "padding": 1, "output_padding": 1, "groups": 1090}),
    ("f0_upsample_depthwise_512_s2", 512, 512, 3, {"stride": 2, "padding": 1, "output_padding": 1, "groups": 512}),
    ("ups0_k20_s10_512_256", 512, 256, 20, {"stride": 10, "padding": 5, "act": "leaky_relu", "slope": 0.1}),
    ("ups1_k12_s6_256_128", 256, 128, 12, {"stride": 6, "padding": 3, "act": "leaky_relu", "slope": 0.1}),
)
# (name, c_in, c_out, K, n_style, norm_act, conv attrs) of the shipped adain -> conv fusions.
ADAIN_CONV = (
    ("gen_snake_k3_d5_256", 256, 256, 3, 128, "snake", {"padding": 5, "dilation": 5}),
    ("prosody_leaky_k3_512", 512, 512, 3, 128, "leaky_relu", {"padding": 1}),
    ("encode_leaky_k3_514_1024", 514, 1024, 3, 128, "leaky_relu", {"padding": 1, "res": True}),
)
ROWS = {"conv1d": 97, "conv_transpose1d": 41, "adain_conv1d": 83}


def _conv_cases(table, transposed: bool) -> list[Case]:
    rng = np.random.default_rng(25)
    cases = []
    for name, c_in, c_out, k, attrs in table:
        a = {key: v for key, v in attrs.items() if key != "res"}
        t = ROWS["conv_transpose1d" if transposed else "conv1d"]
        probe = conv_case(rng, name, 1, t, c_in, c_out, k, rank2=c_in == 1, transposed=transposed, **a)
        t_out = conv_reference(probe.inputs["x"], probe.weights["weight"], None, {"padding": 0, "dilation": 1, **a},
                               transposed).shape[1]
        cases.append(conv_case(rng, name, 1, t, c_in, c_out, k, rank2=c_in == 1, transposed=transposed,
                               res_t=t_out if attrs.get("res") else None, **a))
    return cases


def shipped_cases() -> dict[str, list[Case]]:
    rng = np.random.default_rng(26)
    adain = [adain_conv_case(rng, name, 1, ROWS["adain_conv1d"], c_in, c_out, k, n_style, norm_act,
                             res=attrs.get("res", False), **{key: v for key, v in attrs.items() if key != "res"})
             for name, c_in, c_out, k, n_style, norm_act, attrs in ADAIN_CONV]
    return {"conv1d": _conv_cases(CONV1D, False), "conv_transpose1d": _conv_cases(CONV_T, True), "adain_conv1d": adain}


def outputs(threads: int) -> dict[str, np.ndarray]:
    got = {}
    for op, cases in shipped_cases().items():
        cc = compile_op(op, cases)
        cc.set_threads(threads)
        got.update({f"{op}/{c.name}": out for c, out in zip(cases, run_cases(cc, cases))})
    return got


# The variant each table row takes (no shipped conv is grouped: the op harness's cases cover it).
EXPECTED = {"f0_curve_1in_1out_s2": "depthwise", "upsample_depthwise_1090_s2": "depthwise",
            "f0_upsample_depthwise_512_s2": "depthwise", "ups0_k20_s10_512_256": "polyphase",
            "ups1_k12_s6_256_128": "polyphase"}


def test_lowering_binds_each_shipped_conv_to_its_variants_kernel():
    for op, cases in shipped_cases().items():
        if op == "adain_conv1d":
            continue
        g, _ = lower_circuit(*op_circuit(op, cases))
        for case, lowered in zip(cases, g.ops):
            want = EXPECTED.get(case.name, "gemm")
            assert bind_op(g, lowered)[0] == f"kcc_conv1d_{want}_f32", case.name


def test_the_rule_table_orders_depthwise_before_the_gemm_variants():
    assert variant(1, 1, 1, 1, False) == variant(1, 1, 1, 2, True) == "depthwise"   # one channel in and out
    assert variant(8, 8, 8, 3, True) == "depthwise"
    assert variant(8, 16, 1, 3, False) == "gemm"
    assert variant(8, 16, 1, 1, True) == "polyphase"
    assert variant(8, 16, 1, 2, True) == variant(8, 16, 2, 1, False) == variant(8, 16, 4, 1, True) == "grouped"


# What spectral_convs (the cost model kcc.ops.dft_conv.choose) makes of the shipped circuits:
# (n, min_rows) -> the generator's convs; no other circuit has one. Changes only with a measured
# reason (CHANGELOG: the FFT inverse made the 128-channel convs' longer transforms pay).
DFT_CHOICES = {
    (16, 42): "stage0.3 stage0.5 stage0.8 stage0.10 stage0.13 stage0.15 stage0.35 stage0.37 stage0.40 stage0.42 "
              "stage0.45 stage0.47",
    (32, 40): "stage0.50 stage0.52 stage0.55 stage0.57 stage0.60 stage0.62",
    (64, 91): "stage1.2 stage1.4 stage1.7 stage1.9 stage1.12 stage1.14 stage1.50 stage1.52 stage1.55 stage1.57 "
              "stage1.60 stage1.62",
    (32, 92): "stage1.35 stage1.37 stage1.40 stage1.42 stage1.45 stage1.47",
    (32, 142): "head.0",
}


def test_spectral_convs_choices_on_the_shipped_circuits_are_unchanged(full_ckpt):
    want = {name: nm for nm, names in DFT_CHOICES.items() for name in names.split()}
    for path in sorted((Path(__file__).resolve().parents[1] / "kcc" / "circuits").glob("*.json")):
        g, _ = lower_circuit(json.loads(path.read_text()), full_ckpt, DEFAULT_PASSES)
        got = {op.name: (op.attrs["n"], op.attrs["min_rows"]) for op in g.ops if op.type == "dft_conv1d"}
        assert got == (want if path.stem == "kokoro_generator" else {}), path.stem


@pytest.mark.parametrize("op,c_in,c_out,k,attrs,match", [
    ("conv1d_bf16", 8, 8, 3, {"groups": 8}, "groups=8 is not a GEMM-variant conv"),
    ("conv1d_bf16", 8, 16, 3, {"groups": 2}, "groups=2 is not a GEMM-variant conv"),
    ("conv1d_bf16", 1, 1, 3, {}, "is not a GEMM-variant conv"),
    ("conv_transpose1d_bf16", 8, 16, 3, {"stride": 2, "dilation": 2}, "not a polyphase-variant transposed conv"),
    ("conv_transpose1d_bf16", 8, 8, 3, {"stride": 2, "groups": 8}, "not a polyphase-variant transposed conv"),
])
def test_ops_bound_to_the_gemm_variants_refuse_other_shapes_by_name(op, c_in, c_out, k, attrs, match):
    """The bf16 twins exist for the GEMM and polyphase variants only: other shapes are a named
    LoweringError at lowering, not a kernel status at run time."""
    case = conv_case(np.random.default_rng(27), "refused", 1, 12, c_in, c_out, k, rank2=c_in == 1, transposed="transpose" in op, **attrs)
    with pytest.raises(LoweringError, match=match):
        compile_op(op, [case])


@pytest.fixture(scope="module")
def runs():
    return {n: outputs(n) for n in (1, 2)}


def test_every_shipped_geometry_matches_the_float64_reference(runs):
    for op, cases in shipped_cases().items():
        for c in cases:
            ref = OPS[op].reference(c.inputs, c.weights, {**OPS[op].attrs, **c.attrs}).astype(np.float64)
            got = runs[2][f"{op}/{c.name}"]
            assert got.shape == ref.shape, c.name
            scale = max(1.0, float(np.abs(ref).max()))
            err = float(np.abs(got - ref).max())
            assert err <= 2e-5 * scale, f"{op}/{c.name}: max-abs {err:.3e} (scale {scale:.1f})"


def test_one_and_two_threads_are_bit_identical(runs):
    assert runs[1].keys() == runs[2].keys()
    for key in runs[1]:
        assert np.array_equal(runs[1][key], runs[2][key]), key


@pytest.mark.skipif(not os.environ.get("KCC_CONV_RECORD"), reason="no recorded outputs of the replaced kernel")
def test_bit_identical_to_the_recorded_outputs_of_the_replaced_kernel(runs):
    old = np.load(os.environ["KCC_CONV_RECORD"])
    assert sorted(old.files) == sorted(runs[2])
    for key in old.files:
        assert np.array_equal(old[key], runs[2][key]), key


if __name__ == "__main__" and sys.argv[1:2] == ["record"]:
    np.savez(sys.argv[2], **outputs(2))
