"""Style instance norm (adain, and its fused conv) cut for short inputs: the per-channel constants
(the style fc) in parallel channel blocks, the rows in equal chunks for the threads.

Widths past one channel block (KCC_IN_CBLOCK) and odd ones (the 4-channel fc groups' tail), row
counts around the chunk size: each must give the same bits at 1, 2 and 3 threads, and match the
float64 reference at the kernel's contract (bench/results/short_synthesis.md has the timings).
"""
from __future__ import annotations

import numpy as np
import pytest

from kcc.compiler.build import BuildOptions
from kcc.compiler.one_op import compile_op, run_cases
from kcc.kernels.registry import c_constant, get_kernel
from kcc.ops import OPS, Case
from kcc.ops.adain import adain_weights
from kcc.ops.conv import conv_case
from kcc.ops.core import with_defaults

CBLOCK = c_constant("instance_norm_style_f32.c", "KCC_IN_CBLOCK")
CHUNK = c_constant("instance_norm_style_f32.c", "KCC_IN_CHUNK")

# (rows, channels, style, act): two rows (one row has no variance: torch's x * scale + offset then
# cancels to ulps of x / sqrt(eps)); a chunk and one row; 9 chunks' worth (5 + 4 before the
# even cut); channels past one block and not a multiple of 4; the snake path.
SHAPES = [(2, 7, 16, "none"), (CHUNK + 1, 2 * CBLOCK + 3, 32, "leaky_relu"), (9 * CHUNK - 56, 130, 128, "snake"),
          (26, 1030, 64, "none")]


def adain_cases(rng) -> list[Case]:
    out = []
    for k, (t, c, s, act) in enumerate(SHAPES):
        x = (rng.standard_normal((1, t, c)) * 2 + 0.5).astype(np.float32)
        style = rng.standard_normal((1, s)).astype(np.float32)
        out.append(Case(f"s{k}", {"x": x, "style": style}, adain_weights(rng, c, s, act == "snake"),
                        {"act": act, "slope": 0.2}))
    return out


def conv_cases(rng) -> list[Case]:
    """adain (the SHAPES past the first) feeding a K 3 conv, as the decoder's fused blocks."""
    out = []
    for k, (t, c, s, act) in enumerate(SHAPES[1:]):
        conv = conv_case(rng, f"n{k}", 1, t, c, 48 + k, 3, padding=1)
        style = rng.standard_normal((1, s)).astype(np.float32)
        out.append(Case(conv.name, {"x": conv.inputs["x"] * 2 + 0.5, "style": style},
                        {**adain_weights(rng, c, s, act == "snake"), **conv.weights},
                        {"padding": 1, "norm_act": act, "norm_slope": 0.2}))
    return out


@pytest.mark.parametrize("op,make", [("adain", adain_cases), ("adain_conv1d", conv_cases)])
def test_same_bits_at_every_thread_count_and_within_contract(op, make):
    cases = make(np.random.default_rng(21))
    cc = compile_op(op, cases, BuildOptions())
    got = {}
    for threads in (1, 2, 3):
        cc.set_threads(threads)
        got[threads] = run_cases(cc, cases)
    for case, a, b, c in zip(cases, got[1], got[2], got[3]):
        assert np.array_equal(a, b) and np.array_equal(a, c), f"{op} {case.name}: thread counts differ"
    defn = OPS[op]
    tol = max(get_kernel(k).contract.tolerance for k in
              {"adain": ["kcc_instance_norm_style_f32"], "adain_conv1d": ["kcc_norm_conv1d_f32"]}[op])
    for case, out in zip(cases, got[1]):
        ref = defn.reference(case.inputs, case.weights, with_defaults(defn, case.attrs))
        err = float(np.abs(out.astype(np.float64) - ref).max())
        assert err <= tol * max(1.0, float(np.abs(ref).max())), f"{op} {case.name}: max error {err:.3g}"
        assert np.abs(out).max() > 0.1, f"{op} {case.name}: an all-zero output would pass the thread check"


def test_fused_conv_equals_adain_then_conv_on_wide_short_inputs():
    """The fused kernel shares the statistics helper: on the wide, short shapes the decoder runs
    (26 rows x 1030 channels) it must still give adain -> conv1d's exact bits."""
    case = conv_cases(np.random.default_rng(5))[2]
    fused = run_cases(compile_op("adain_conv1d", [case], BuildOptions()), [case])[0]
    norm = {k: v for k, v in case.weights.items() if k not in ("weight", "bias")}
    a_case = Case("a", case.inputs, norm, {"act": case.attrs["norm_act"], "slope": 0.2})
    normed = run_cases(compile_op("adain", [a_case], BuildOptions()), [a_case])[0]
    c_case = Case("c", {"x": normed}, {"weight": case.weights["weight"], "bias": case.weights["bias"]},
                  {"padding": 1})
    plain = run_cases(compile_op("conv1d", [c_case], BuildOptions()), [c_case])[0]
    assert fused.shape == (1, 26, 50) and np.abs(fused).max() > 0.1
    assert np.array_equal(fused, plain)
