"""The bf16 precision's kernels (gemm_tile_bf16.c, conv1d_bf16.c, norm_conv1d_bf16.c) against a float64
reference over the same bf16-rounded operands, at every dispatch path this CPU runs: the vdpbf16ps
tiles (AVX512_BF16 CPUs) and the ISO C emulation (a build forced to avx2fma takes it); plus the
option's rejection paths and the pass's rewrite.

The reference rounds x and the weights to bf16 exactly as the kernels do (nearest even), so the
only difference left is f32 summation: the tolerance is f32's, not bf16's.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest
from reduced_precision import assert_reduced_precision

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

from kcc.compiler import precision  # noqa: E402
from kcc.compiler.build import BuildOptions  # noqa: E402
from kcc.compiler.driver import compile_circuit  # noqa: E402
from kcc.compiler.isa import runnable_levels  # noqa: E402
from kcc.ops.conv import bf16_pairs  # noqa: E402
from kcc.weights.checkpoint import Checkpoint  # noqa: E402

LEVELS = [None] + (["avx2fma"] if "avx2fma" in runnable_levels() else [])   # None: the CPU dispatches


def bf16(a: np.ndarray) -> np.ndarray:
    """Round to bf16 (nearest even), as float64."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32).astype(np.uint64)
    r = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32)
    return r.view(np.float32).astype(np.float64)


def conv_ref(x, w, b, pad, dil, stride=1, slope=1.0, res=None):
    """float64 conv1d over time-major x [B, T, Cin], torch weight [Cout, Cin, K]."""
    bsz, t, _ = x.shape
    c_out, _, k = w.shape
    xp = np.pad(x, ((0, 0), (pad, pad), (0, 0)))
    t_out = (t + 2 * pad - dil * (k - 1) - 1) // stride + 1
    y = np.zeros((bsz, t_out, c_out))
    for kk in range(k):
        rows = xp[:, kk * dil: kk * dil + stride * (t_out - 1) + 1: stride, :]
        y += rows @ w[:, :, kk].T
    y += b
    y = np.where(y >= 0, y, y * slope)
    return y if res is None else y + res


def _circuit(op: dict, inputs: dict, weights: list[str], t_max: int) -> dict:
    return {"schema": "kcc.circuit/1", "name": "t_" + op["op"],
            "dims": {"B": {"min": 1, "max": 2},
                     **({"T": {"min": 1, "max": t_max}} if any("T" in s for s in inputs.values()) else {})},
            "inputs": [{"name": n, "dtype": "f32", "shape": s} for n, s in inputs.items()],
            "weights": {r: {"ref": f"t.{r}"} for r in weights},
            "blocks": [{"name": "b", "ops": [op], "checkpoints": []}], "outputs": [op["out"]]}


def _compile(op, inputs, weights: dict, t_max, isa, prec="bf16"):
    ckpt = Checkpoint(Path("<memory>"), {f"t.{r}": np.ascontiguousarray(v, np.float32) for r, v in weights.items()})
    return compile_circuit(_circuit(op, inputs, list(weights), t_max), ckpt, BuildOptions(isa=isa, precision=prec),
                           passes=[])


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("cin,cout,k,stride,pad,dil,t", [
    (128, 128, 3, 1, 1, 1, 70),        # the resblock shape: two full panels, a partial 8-row tile
    (256, 40, 7, 1, 9, 3, 33),         # two K chunks, a partial panel pair, dilation
    (33, 5, 1, 1, 0, 1, 9),            # odd Cin (a zero pair row), Cout < one panel, conv1x1
    (22, 48, 12, 6, 3, 1, 61),         # stride 6 (noise_convs), three panels
    (300, 20, 3, 2, 2, 2, 17),         # odd chunk tail (300 = 2 x 128 + 44), stride and dilation
    (2048, 16, 3, 1, 1, 1, 70),        # input rows too wide to round once per block: rounded per tile
])
def test_conv1d_bf16_matches_the_rounded_reference(isa, cin, cout, k, stride, pad, dil, t):
    rng = np.random.default_rng(cin * 7 + k)
    x = rng.standard_normal((2, t, cin)).astype(np.float32)
    w = (rng.standard_normal((cout, cin, k)) / np.sqrt(cin * k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    res = rng.standard_normal((2, (t + 2 * pad - dil * (k - 1) - 1) // stride + 1, cout)).astype(np.float32)
    op = {"op": "conv1d", "in": {"x": "x", "res": "res"}, "w": {"weight": "weight", "bias": "bias"},
          "attrs": {"stride": stride, "padding": pad, "dilation": dil, "act": "leaky_relu", "slope": 0.1},
          "out": "y"}
    cc = _compile(op, {"x": ["B", t, cin], "res": ["B", res.shape[1], cout]}, {"weight": w, "bias": b}, t, isa)
    assert [o.type for o in cc.graph.ops] == ["conv1d_bf16"]
    assert_reduced_precision(cc, {"x": x, "res": res},
                             lambda xs, ws, bias, slope, r: conv_ref(xs, ws, bias, pad, dil, stride, slope, r),
                             x, w, bf16(x), bf16(w), b, res, taps=cin * k)


@pytest.mark.parametrize("isa", LEVELS)
def test_adain_conv1d_bf16_matches_its_fp32_twin_on_rounded_weights(isa):
    """The fused AdaIN + snake + conv: the bf16 op against the fp32 op run on bf16-rounded weights
    (the normalised activations are rounded inside the kernel, so the gap is bf16's on one operand)."""
    rng = np.random.default_rng(3)
    c, t, k = 128, 150, 3
    x = rng.standard_normal((1, t, c)).astype(np.float32)
    style = rng.standard_normal((1, 64)).astype(np.float32)
    w = (rng.standard_normal((c, c, k)) / np.sqrt(c * k)).astype(np.float32)
    weights = {"norm_w": np.ones(c, np.float32), "norm_b": np.zeros(c, np.float32),
               "fc_w": (rng.standard_normal((2 * c, 64)) * 0.1).astype(np.float32),
               "fc_b": np.zeros(2 * c, np.float32), "alpha": np.ones(c, np.float32), "weight": w,
               "bias": rng.standard_normal(c).astype(np.float32)}
    op = {"op": "adain_conv1d", "in": {"x": "x", "style": "style"}, "w": {r: r for r in weights},
          "attrs": {"norm_act": "snake", "padding": 1, "act": "none"}, "out": "y"}
    inputs = {"x": ["B", "T", c], "style": ["B", 64]}
    got = _compile(op, inputs, weights, t, isa).run({"x": x, "style": style}).outputs["y"]
    twin = _compile(op, inputs, {**weights, "weight": bf16(w).astype(np.float32)}, t, isa, "fp32")
    assert [o.type for o in twin.graph.ops] == ["adain_conv1d"]
    ref = twin.run({"x": x, "style": style}).outputs["y"]
    scale = np.abs(ref).max()
    err = np.abs(got - ref).max()
    assert err <= 1.5e-2 * scale, (err, scale)          # the activations' bf16 rounding
    assert err > 0                                     # and they were rounded


def test_bf16_pairs_layout_rounds_to_nearest_even_and_pads_odd_rows():
    w = np.array([[[1.0] * 16, [1.0 + 2 ** -8] * 16, [1.0 + 3 * 2 ** -8] * 16]], np.float32)   # [1, 3, 16]
    words = bf16_pairs(w).view(np.uint32)
    assert words.shape == (1, 2, 16)
    # 1 + 2^-8 is a tie: to even (1.0, 0x3F80); 1 + 3*2^-8 ties up to 1 + 2^-6 (0x3F82); the pad row is 0
    assert words[0, 0, 0] == 0x3F80 | (0x3F80 << 16)
    assert words[0, 1, 0] == 0x3F82


def test_the_pass_keeps_grouped_and_depthwise_convs_fp32():
    rng = np.random.default_rng(0)
    op = {"op": "conv1d", "in": {"x": "x"}, "w": {"weight": "weight"}, "attrs": {"groups": 8, "padding": 1},
          "out": "y"}
    w = rng.standard_normal((8, 1, 3)).astype(np.float32)
    cc = _compile(op, {"x": ["B", "T", 8]}, {"weight": w}, 16, None)
    assert [o.type for o in cc.graph.ops] == ["conv1d"]


@pytest.mark.parametrize("value, match", [("fp16", "unknown precision 'fp16'"), ("INT8", "unknown precision 'INT8'")])
def test_precisions_kcc_cannot_build_are_named_errors(value, match, monkeypatch):
    with pytest.raises(precision.PrecisionError, match=match):
        precision.check(value)
    with pytest.raises(precision.PrecisionError, match=match):
        BuildOptions(precision=value).flags()
    monkeypatch.setenv("KCC_PRECISION", value)
    with pytest.raises(precision.PrecisionError, match=match):
        BuildOptions().flags()


def test_precision_is_in_the_artifact_key_and_fp32_is_the_default(monkeypatch):
    from kcc.compiler.artifact import artifact_key
    monkeypatch.delenv("KCC_PRECISION", raising=False)
    assert BuildOptions().precision == "fp32"
    keys = {p: artifact_key("m", BuildOptions(precision=p), 100, ["s"]) for p in ("fp32", "bf16")}
    assert keys["fp32"] != keys["bf16"]
    monkeypatch.setenv("KCC_PRECISION", "bf16")
    assert BuildOptions().precision == "bf16"


def test_load_falls_back_to_fp32_without_avx512_bf16(monkeypatch):
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: False)
    opts = precision.for_this_cpu(BuildOptions(precision="bf16"))
    assert opts.precision == "fp32"
    monkeypatch.setattr(precision, "cpu_has_bf16", lambda: True)
    assert precision.for_this_cpu(BuildOptions(precision="bf16")).precision == "bf16"
    if "avx2fma" in runnable_levels():
        assert precision.for_this_cpu(BuildOptions(precision="bf16", isa="avx2fma")).precision == "fp32"


def test_add_precision_argument():
    ap = argparse.ArgumentParser()
    precision.add_precision_argument(ap)
    assert ap.parse_args([]).precision is None
    assert ap.parse_args(["--precision", "bf16"]).precision == "bf16"
    with pytest.raises(SystemExit):
        ap.parse_args(["--precision", "fp64"])


@pytest.mark.parametrize("isa", LEVELS)
def test_dft_conv1d_bf16_is_the_conv_to_bf16_precision_and_its_short_path_is_conv1d_bf16(isa):
    rng = np.random.default_rng(5)
    c, t, k, dil, n = 128, 300, 7, 3, 16
    x = rng.standard_normal((1, t, c)).astype(np.float32)
    w = (rng.standard_normal((c, c, k)) / np.sqrt(c * k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    pad = dil * (k - 1) // 2
    ref = conv_ref(x.astype(np.float64), w.astype(np.float64), b, pad, dil)
    outs = {}
    for min_rows in (0, 10 ** 6):
        op = {"op": "dft_conv1d", "in": {"x": "x"}, "w": {"weight": "weight", "spectrum": "weight", "bias": "bias"},
              "attrs": {"n": n, "k_size": k, "c_out": c, "min_rows": min_rows, "padding": pad, "dilation": dil},
              "out": "y"}
        cc = _compile(op, {"x": ["B", t, c]}, {"weight": w, "bias": b}, t, isa)
        assert [o.type for o in cc.graph.ops] == ["dft_conv1d_bf16"]
        outs[min_rows] = cc.run({"x": x}).outputs["y"]
    scale = np.abs(ref).max()
    err = np.abs(outs[0] - ref).max()
    assert 1e-4 * scale < err < 2e-2 * scale, (err, scale)
    op = {"op": "conv1d", "in": {"x": "x"}, "w": {"weight": "weight", "bias": "bias"},
          "attrs": {"padding": pad, "dilation": dil}, "out": "y"}
    direct = _compile(op, {"x": ["B", t, c]}, {"weight": w, "bias": b}, t, isa).run({"x": x}).outputs["y"]
    assert np.array_equal(outs[10 ** 6], direct)


def conv_transpose_ref(x, w, b, stride, pad, output_padding=0):
    """float64 ConvTranspose1d over time-major x [B, T, Cin], torch weight [Cin, Cout, K]."""
    bsz, t, _ = x.shape
    _, c_out, k = w.shape
    full = np.zeros((bsz, (t - 1) * stride + k + output_padding, c_out))
    for kk in range(k):
        full[:, kk: kk + stride * (t - 1) + 1: stride, :] += x @ w[:, :, kk]
    t_out = (t - 1) * stride - 2 * pad + k + output_padding
    return full[:, pad: pad + t_out, :] + b


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("cin,cout,k,stride,pad,t", [
    (64, 40, 20, 10, 5, 13),           # the generator's ups.0 geometry, narrower
    (33, 16, 12, 6, 3, 70),            # ups.1's stride, odd Cin, more rows than one block
])
def test_conv_transpose1d_bf16_matches_the_rounded_reference(isa, cin, cout, k, stride, pad, t):
    rng = np.random.default_rng(cin + k)
    x = rng.standard_normal((1, t, cin)).astype(np.float32)
    w = (rng.standard_normal((cin, cout, k)) / np.sqrt(cin)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    op = {"op": "conv_transpose1d", "in": {"x": "x"}, "w": {"weight": "weight", "bias": "bias"},
          "attrs": {"stride": stride, "padding": pad}, "out": "y"}
    cc = _compile(op, {"x": ["B", t, cin]}, {"weight": w, "bias": b}, t, isa)
    assert [o.type for o in cc.graph.ops] == ["conv_transpose1d_bf16"]
    assert_reduced_precision(cc, {"x": x}, lambda xs, ws, bias, slope, r: conv_transpose_ref(xs, ws, bias, stride, pad),
                             x, w, bf16(x), bf16(w), b, None, taps=cin * k)


@pytest.mark.parametrize("isa", LEVELS)
def test_non_finite_activations_stay_non_finite(isa):
    """A NaN or inf input row reaches the output as NaN / inf on both paths (the ISO C rounding's
    carry must not turn a NaN into -0)."""
    x = np.ones((1, 4, 16), np.float32)
    x[0, 1, 3] = np.nan
    x[0, 2, 5] = np.float32(np.frombuffer(np.uint32(0x7FFFFFFF).tobytes(), np.float32)[0])   # NaN, all payload bits
    x[0, 3, 7] = np.inf
    w = np.full((16, 16, 1), 0.5, np.float32)
    op = {"op": "conv1d", "in": {"x": "x"}, "w": {"weight": "weight"}, "attrs": {}, "out": "y"}
    y = _compile(op, {"x": ["B", 4, 16]}, {"weight": w}, 4, isa).run({"x": x}).outputs["y"]
    assert np.all(y[0, 0] == 8.0)
    assert np.isnan(y[0, 1]).all() and np.isnan(y[0, 2]).all()
    assert np.isposinf(y[0, 3]).all()


def test_with_precision_applies_a_command_line_value_and_refuses_unknown_ones():
    base = BuildOptions(precision="fp32")
    assert precision.with_precision(base, None) is base
    assert precision.with_precision(base, "bf16").precision == "bf16"
    assert precision.with_precision(base, "int8").precision == "int8"
    with pytest.raises(precision.PrecisionError, match="unknown precision 'fp16'"):
        precision.with_precision(base, "fp16")
