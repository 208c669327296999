"""The attention op beyond the op harness (tests/test_ops.py runs its block-crossing shapes,
partial panels, head_dim past one chunk, padded sequences and thread counts against the numpy
reference): a running max that grows block by block, with its error bound scaled by the scores,
and the head_dim bound."""
from __future__ import annotations

import numpy as np
import pytest

from kcc.compiler.one_op import run_op
from kcc.ops import OPS
from kcc.ops.core import LoweringError

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan


def _run(q, k, v, lengths, heads):
    width = q.shape[2]
    shapes = {r: ["B", "T", width] for r in ("q", "k", "v")} | {"lengths": ["B"]}
    return run_op("attention", {"q": q, "k": k, "v": v, "lengths": lengths}, attrs={"heads": heads},
                  shapes=shapes, dim_max={"B": 3, "T": q.shape[1]})


def test_a_running_max_that_grows_in_every_key_block():
    """Keys grow along time, so each later key block raises every row's max (the output is
    rescaled up to T/64 times); lengths at and past a block edge."""
    rng = np.random.default_rng(200)
    b, t, width = 3, 200, 64
    q, k, v = (rng.standard_normal((b, t, width)).astype(np.float32) for _ in range(3))
    k = np.abs(k * (1.0 + 0.05 * np.arange(t, dtype=np.float32))[None, :, None])
    q = np.abs(q) * 0.1
    lengths = np.array([200, 64, 65], np.int32)
    y = _run(q, k, v, lengths, 1)
    ref = OPS["attention"].reference({"q": q, "k": k, "v": v, "lengths": lengths}, {}, {"heads": 1})
    # f32 scores carry ~2^-24 |s| absolute error into exp, and the f32 chains over the keys a few
    # ulps of |v|: bound by both scales.
    s_max = float(np.abs(np.einsum("btd,bsd->bts", q.astype(np.float64), k)).max()) * width ** -0.5
    assert s_max > 5                                               # scores well above unit scale
    err = float(np.abs(y - ref).max())
    assert err <= 2e-6 * s_max * max(1.0, float(np.abs(v).max())), (err, s_max)


def test_head_dim_past_the_kernel_bound_is_refused_at_lowering():
    z = np.zeros((1, 8, 640), np.float32)
    with pytest.raises(LoweringError, match=r"head_dim 320 .* exceeds the kernel's 256"):
        _run(z, z, z, np.array([8], np.int32), 2)
