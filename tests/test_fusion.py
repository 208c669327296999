"""Fusion passes (kcc.compiler.passes): where they fire, and that fused == unfused, bit for bit.

The generator body (kokoro_generator from upstream's `har`, see test_generator.body_circuit)
is compiled fused (FUSION_PASSES, OpenMP build) and unfused (passes=[], serial build); both
must hold the FP32 gate at every checkpoint and give the same bits at every checkpoint
(np.array_equal), and the fused build must give identical bits with 1 and 2 threads.
DEFAULT_PASSES adds spectral_convs (K 7 / 11 convs as block DFTs: not bit-identical, up to 7e-6
apart at resblocks.3-5 on this capture; tests/test_dft_conv.py and the generator X-Ray hold it).
"""
from __future__ import annotations

import collections

import numpy as np
import pytest

from kcc.compiler.build import BuildOptions
from kcc.circuits import load_circuit
from kcc.compiler.lower import lower_circuit
from kcc.compiler.passes import DEFAULT_PASSES, FUSION_PASSES, fuse_adain_conv, fuse_residual_add
from kcc.compiler.driver import compile_circuit
from kcc.compiler.xray import compare_arrays, load_pinned
from tests.test_generator import HAR, body_circuit


@pytest.fixture(scope="module")
def pinned():
    return load_pinned("generator", "small")


def _counts(doc, ckpt, passes):
    g, _ = lower_circuit(doc, ckpt, passes)
    return collections.Counter(op.type for op in g.ops), g


def test_passes_fire_where_expected(small_ckpt):
    """8 AdaINResBlock1 (6 resblocks + 2 noise_res) x 3 passes x 2 (adain -> conv) = 48 fused
    convs, each pass's residual add in the second one (24); the adds left are real joins."""
    doc = load_circuit("kokoro_generator")
    before, _ = _counts(doc, small_ckpt, [])
    after, g = _counts(doc, small_ckpt, FUSION_PASSES)
    assert before["adain"] == 48 and before["add"] == 28 and before["conv1d"] == 51
    assert after["adain_conv1d"] == 48 and after["adain"] == 0 and after["conv1d"] == 3
    assert sum("res" in op.inputs for op in g.ops) == 24 and after["add"] == 4
    names = {c.tensor for c in g.checkpoints}
    assert names <= {op.output for op in g.ops}          # every checkpoint tensor is still produced
    only_res, _ = _counts(doc, small_ckpt, [fuse_residual_add])
    assert only_res["add"] == 4 and only_res["adain"] == 48   # the residual pass alone, into plain convs
    only_norm, _ = _counts(doc, small_ckpt, [fuse_adain_conv])
    assert only_norm["adain_conv1d"] == 48 and only_norm["add"] == 28
    # with spectral_convs first: the K 7 / 11 convs (2 of 3 resblocks per stage, both noise_res)
    # become block DFTs and keep their adain; the K 3 ones fuse as before; conv_post (K 7, 22
    # outputs) becomes one too (with FFT transforms: 1.4-1.5x faster than direct at T = 40000)
    full, g = _counts(doc, small_ckpt, DEFAULT_PASSES)
    assert full["dft_conv1d"] == 37 and full["adain"] == 36
    post = [op for op in g.ops if op.type == "dft_conv1d" and op.attrs["c_out"] == 22]
    assert len(post) == 1 and post[0].attrs["n"] == 32
    # by channels (kcc.ops.dft_conv.choose): 256 keeps the short transforms (a longer one's spectrum
    # would pass LONGER_MAX_SPECTRUM), 128 takes the longer ones
    n_of = {(op.attrs["c_out"], op.attrs["k_size"]): op.attrs["n"] for op in g.ops if op.type == "dft_conv1d"}
    assert n_of == {(256, 7): 16, (256, 11): 32, (128, 7): 32, (128, 11): 64, (22, 7): 32}
    # and winograd_convs then takes the 12 fused K 3 convs (F(3, 3), the norm fused in)
    assert full["winograd_conv1d"] == 12 and full["adain_conv1d"] == 0 and full["add"] == 4
    assert {op.attrs["m"] for op in g.ops if op.type == "winograd_conv1d"} == {3}
    assert sum("res" in op.inputs for op in g.ops) == 24


def test_checkpoint_tensor_is_never_fused_away(small_ckpt):
    """s0_up (checkpoint kokoro.generator.ups0) feeds an add but keeps its own buffer."""
    _, g = _counts(load_circuit("kokoro_generator"), small_ckpt, FUSION_PASSES)
    ups = [op for op in g.ops if op.type == "conv_transpose1d"]
    assert [op.output for op in ups] == ["s0_up", "s1_up"] and all("res" not in op.inputs for op in ups)


def test_fused_matches_unfused_and_upstream(small_ckpt, pinned):
    doc = body_circuit()
    fused = compile_circuit(doc, small_ckpt, options=BuildOptions(openmp=True), passes=FUSION_PASSES)
    plain = compile_circuit(doc, small_ckpt, passes=[])
    assert len(fused.graph.ops) < len(plain.graph.ops) - 60
    ins = {k: v for k, v in pinned.inputs.items() if k in fused.graph.inputs}
    ins["har"] = pinned.checkpoints[HAR]
    got = {}
    for n in (1, 2):
        assert fused.set_threads(n) == n
        got[n] = fused.run(ins, with_checkpoints=True).checkpoints
    ref = plain.run(ins, with_checkpoints=True).checkpoints
    worst = {}
    for name, want in ref.items():
        assert np.array_equal(got[1][name], got[2][name]), f"{name}: 1 vs 2 threads differ"
        diff = float(np.abs(got[1][name].astype(np.float64) - want).max())
        assert np.array_equal(got[1][name], want), f"{name}: fused differs from unfused by up to {diff:.3g}"
        for which, arr in (("fused", got[1][name]), ("unfused", want)):
            r = compare_arrays(name, pinned.checkpoints[name], arr)
            assert r.status == "PASS", (which, name, r.reason)
            worst[which] = max(worst.get(which, 0.0), r.max_abs)
    print("worst max_abs vs upstream:", worst)
