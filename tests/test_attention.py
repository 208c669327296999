"""The attention op on its own, against a float64 reference: shapes that cross its query and key
blocks (64 each), partial GEMM panels, head_dim past one 128-term chunk, padded sequences, a
running max that grows block by block, thread counts, and the head_dim bound."""
from __future__ import annotations

import numpy as np
import pytest

from kcc.compiler.build import BuildOptions
from kcc.ops.core import LoweringError
from kcc.compiler.driver import compile_circuit

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan


def _circuit(width: int, heads: int, t_max: int) -> dict:
    inputs = [{"name": n, "dtype": "f32", "shape": ["B", "T", width]} for n in ("q", "k", "v")]
    return {"schema": "kcc.circuit/1", "name": "t_attention",
            "dims": {"B": {"min": 1, "max": 3}, "T": {"min": 1, "max": t_max}},
            "inputs": [*inputs, {"name": "lengths", "dtype": "i32", "shape": ["B"]}], "weights": {},
            "blocks": [{"name": "b", "ops": [{"op": "attention", "in": {"q": "q", "k": "k", "v": "v", "lengths": "lengths"},
                                              "attrs": {"heads": heads}, "out": "y"}], "checkpoints": []}],
            "outputs": ["y"]}


def _reference(q, k, v, lengths, heads, scale):
    b, t, w = q.shape
    d = w // heads
    out = np.empty((b, t, w))
    for s in range(b):
        n = lengths[s]
        for h in range(heads):
            sl = slice(h * d, (h + 1) * d)
            sc = q[s, :, sl].astype(np.float64) @ k[s, :n, sl].astype(np.float64).T * scale
            p = np.exp(sc - sc.max(axis=1, keepdims=True))
            out[s, :, sl] = p @ v[s, :n, sl] / p.sum(axis=1, keepdims=True)
    return out


def _inputs(b, t, w, rng, ramp=0.0):
    q, k, v = (rng.standard_normal((b, t, w)).astype(np.float32) for _ in range(3))
    if ramp:          # keys grow along time, so each later key block raises every row's max
        k *= (1.0 + ramp * np.arange(t, dtype=np.float32))[None, :, None]
        q = np.abs(q) * 0.1
        k = np.abs(k)
    return q, k, v


@pytest.mark.parametrize("b,t,width,heads,lengths,ramp", [
    (2, 150, 120, 3, [150, 77], 0.0),     # 3 query and key blocks, head_dim 40 (2.5 panels), padding
    (1, 70, 320, 2, [70], 0.0),           # head_dim 160: two 128-term chunks
    (1, 1, 64, 4, [1], 0.0),              # one token
    (3, 200, 64, 1, [200, 64, 65], 0.05),  # the max grows in every key block; lengths at a block edge
])
def test_attention_matches_float64(small_ckpt, b, t, width, heads, lengths, ramp):
    rng = np.random.default_rng(t + width)
    q, k, v = _inputs(b, t, width, rng, ramp)
    lens = np.array(lengths, dtype=np.int32)
    scale = (width // heads) ** -0.5
    ref = _reference(q, k, v, lens, heads, scale)
    c = compile_circuit(_circuit(width, heads, t), small_ckpt)
    y = c.run({"q": q, "k": k, "v": v, "lengths": lens}).outputs["y"]
    assert y.shape == (b, t, width)
    # f32 scores carry ~2^-24 |s| absolute error into exp, and the f32 chains over the keys a few
    # ulps of |v|: bound by both scales.
    s_max = float(np.abs(np.einsum("btd,bsd->bts", q.astype(np.float64), k)).max()) * scale
    err = float(np.abs(y - ref).max())
    assert err <= 2e-6 * max(1.0, s_max) * max(1.0, float(np.abs(v).max())), (err, s_max)


def test_attention_threads_are_bit_identical(small_ckpt):
    rng = np.random.default_rng(5)
    q, k, v = _inputs(2, 130, 96, rng)
    ins = {"q": q, "k": k, "v": v, "lengths": np.array([130, 99], dtype=np.int32)}
    c = compile_circuit(_circuit(96, 2, 130), small_ckpt, BuildOptions(openmp=True))
    outs = []
    for n in (1, 2, 3):
        c.set_threads(n)
        outs.append(c.run(ins).outputs["y"])
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_head_dim_past_the_kernel_bound_is_refused_at_lowering(small_ckpt):
    with pytest.raises(LoweringError, match=r"head_dim 320 .* exceeds the kernel's 256"):
        compile_circuit(_circuit(640, 2, 8), small_ckpt)
