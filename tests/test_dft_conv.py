"""dft_conv1d (block-DFT convolution, kcc/ops/dft_conv.py) beyond the op harness (tests/test_ops.py
runs its cases against the conv reference, 1 and 2 threads): Kokoro's geometries no worse than
the direct conv, the spectrum pack against np.fft, the direct path below min_rows bit for bit, its
rejection paths; and where kcc.compiler.passes.spectral_convs fires.

The op is declared explicitly (kcc.compiler.one_op) so each case picks its DFT length n; the weight
is in torch layout and packed at lowering twice (GEMM pack, spectrum).
"""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

torch = pytest.importorskip("torch")
F = torch.nn.functional

from kcc.ir import Graph, Tensor, WeightRef  # noqa: E402
from kcc.compiler.one_op import compile_op, run_cases  # noqa: E402
from kcc.ops import Case, LoweringError  # noqa: E402
from kcc.compiler.passes import spectral_convs  # noqa: E402
from tests.test_conv_ops import cm, tm  # noqa: E402

TOL = 2e-5


def _compile(op: str, w, b, pad: int, dil: int, n: int = 16, min_rows: int = 0, t_max: int = 512, **attrs):
    """One dft_conv1d (or the conv1d it replaces) over x [B, T, Cin] with runtime dims B, T."""
    c_out, c_in, k = w.shape
    ws = {"weight": w, "bias": b}
    if op == "dft_conv1d":
        ws["spectrum"] = attrs.pop("spectrum", w)
        attrs = {"n": n, "k_size": k, "c_out": attrs.pop("c_out", c_out), "min_rows": min_rows, **attrs}
    template = Case("template", {"x": np.zeros((1, 1, 1), np.float32)}, ws, {"padding": pad, "dilation": dil, **attrs})
    return compile_op(op, [template], shapes={"x": ["B", "T", c_in]}, dim_max={"B": 2, "T": t_max})


def _run(cc, x):
    return run_cases(cc, [Case("run", {"x": x})])[0]


def _weights(rng, c_in, c_out, k):
    w = (rng.standard_normal((c_out, c_in, k)) / np.sqrt(c_in * k)).astype(np.float32)
    return w, (0.1 * rng.standard_normal(c_out)).astype(np.float32)


@pytest.mark.parametrize("c_in,c_out,k,n,pad,dil,t,b", [
    (64, 64, 11, 32, 25, 5, 300, 1),     # generator resblock geometry (K 11, dilation 5)
    (48, 32, 7, 16, 9, 3, 97, 2),        # K 7, dilation 3, batch 2, T not a multiple of anything
    (40, 24, 5, 8, 0, 1, 50, 1),         # 'valid' conv, channel counts off the 16-lane blocks
    (32, 22, 7, 64, 3, 1, 200, 1),       # conv_post-like: 22 outputs, the longest DFT
    (16, 16, 3, 4, 1, 1, 9, 1),          # the shortest DFT (one slot pair), T shorter than a tile
])
def test_dft_conv_matches_torch_and_direct(c_in, c_out, k, n, pad, dil, t, b):
    rng = np.random.default_rng(c_in + k + n)
    w, bias = _weights(rng, c_in, c_out, k)
    x = rng.standard_normal((b, t, c_in)).astype(np.float32)
    ref64 = F.conv1d(cm(x).double(), torch.from_numpy(w).double(), torch.from_numpy(bias).double(), 1, pad, dil)
    got = _run(_compile("dft_conv1d", w, bias, pad, dil, n), x)
    direct = _run(_compile("conv1d", w, bias, pad, dil), x)
    want = tm(ref64)
    assert got.shape == want.shape == direct.shape
    err, err_direct = float(np.abs(got - want).max()), float(np.abs(direct - want).max())
    assert err <= TOL, f"max-abs {err:.3e}"
    # measured 0.7-2.3x the direct conv's own f32 error (Gauss's 3-multiply complex product
    # rounds its sums a + b, c + d, k1 - k3 once more); 2e-5 is the gate, 3x a regression bound
    assert err <= 3.0 * err_direct + 1e-7, f"DFT error {err:.2e} vs the direct conv's {err_direct:.2e}"


@pytest.mark.parametrize("c_out,k,n", [(16, 11, 32), (22, 7, 16), (5, 3, 4)])
def test_spectrum_pack_is_the_conjugate_rfft_of_the_weight(c_out, k, n):
    """spectrum_pack against np.fft: slot f holds (c, d - c, c + d) of conj(rfft_n(w))_f * 2/n
    (slot 0: the real bins 0 and n/2 at 1/n, and a zero third part), in the GEMM pack's lanes."""
    from kcc.ops.dft_conv import spectrum_pack
    rng = np.random.default_rng(k)
    w = rng.standard_normal((c_out, 8, k)).astype(np.float32)
    spec = spectrum_pack(w, {"n": n})
    panels = -(-c_out // 16)
    assert spec.shape == (n // 2, 3, panels, 8, 16) and spec.dtype == np.float32
    z = np.conj(np.fft.rfft(w.astype(np.float64), n=n, axis=2))          # [Cout, Cin, n/2 + 1]
    lanes = lambda a: np.pad(a, ((0, panels * 16 - c_out), (0, 0))).reshape(panels, 16, 8).transpose(0, 2, 1)  # noqa: E731
    for f in range(n // 2):
        if f == 0:
            want = [z[:, :, 0].real / n, z[:, :, n // 2].real / n, np.zeros((c_out, 8))]
        else:
            c, d = z[:, :, f].real * 2 / n, z[:, :, f].imag * 2 / n
            want = [c, d - c, c + d]
        for part in range(3):
            np.testing.assert_allclose(spec[f, part], lanes(want[part]), rtol=1e-6, atol=1e-6)


def test_short_inputs_run_the_direct_conv_bit_for_bit():
    """Below min_rows the kernel is kcc_conv1d_gemm_f32 itself; at or above it, the DFT (not equal)."""
    rng = np.random.default_rng(9)
    w, bias = _weights(rng, 32, 32, 11)
    direct = _compile("conv1d", w, bias, 25, 5)
    dft = _compile("dft_conv1d", w, bias, 25, 5, n=32, min_rows=100)
    short, long_ = (rng.standard_normal((1, t, 32)).astype(np.float32) for t in (99, 100))
    assert np.array_equal(_run(dft, short), _run(direct, short))
    a, b = _run(dft, long_), _run(direct, long_)
    assert not np.array_equal(a, b) and float(np.abs(a - b).max()) <= TOL


@pytest.mark.parametrize("change,match", [
    ({"n": 24}, "must be a power of two"),
    ({"n": 8, "k": 11}, "above K-1 = 10"),
    ({"n": 128}, "must be a power of two in"),
    ({"min_rows": -1}, "min_rows -1 must be an integer >= 0"),
])
def test_dft_conv_rejects_bad_attrs(change, match):
    w, bias = _weights(np.random.default_rng(1), 16, 16, change.get("k", 7))
    with pytest.raises(LoweringError, match=match):
        _compile("dft_conv1d", w, bias, 3, 1, n=change.get("n", 16), min_rows=change.get("min_rows", 0))


def test_dft_conv_rejects_mismatched_spectrum_and_channels():
    w, bias = _weights(np.random.default_rng(2), 16, 16, 7)
    with pytest.raises(LoweringError, match="must name the same conv weight"):     # the spectrum of another weight
        _compile("dft_conv1d", w, bias, 3, 1, spectrum=np.zeros((16, 16, 5), np.float32))
    with pytest.raises(LoweringError, match="has 16 output channels, attr c_out is 8"):
        _compile("dft_conv1d", w, bias, 3, 1, c_out=8)


def test_dft_conv_rejects_channels_past_its_work_area():
    """A tile holds n/2 + 1 regions of three rows as wide as the wider side: 33 * 3 * 1344 floats
    at n = 64 exceed the 512 KiB area; the same conv at n = 16 fits."""
    from kcc.ops.dft_conv import fits_work, tiles_per_block
    assert not fits_work(1344, 16, 64) and fits_work(1344, 16, 16) and tiles_per_block(128, 128, 32) == 16
    w, bias = _weights(np.random.default_rng(4), 1344, 16, 7)
    with pytest.raises(LoweringError, match="Cin 1344 and Cout 16 at n = 64 exceed the kernel's work area"):
        _compile("dft_conv1d", w, bias, 3, 1, n=64)


def test_dft_conv_kernel_refuses_input_shorter_than_its_taps():
    """K 11, dilation 5, no padding needs T >= 51: at T = 20 the kernel returns KCC_EDIMS and the
    output keeps its canary."""
    w, bias = _weights(np.random.default_rng(4), 16, 16, 11)
    cc = _compile("dft_conv1d", w, bias, 0, 5, n=32)
    out = np.full(16 * 512, -777.0, np.float32)
    status, msg = cc.call([np.zeros((1, 20, 16), np.float32)], [1, 20], [out], cc.new_arena())
    assert status == -4 and "kcc_dft_conv1d_f32" in msg
    assert (out == -777.0).all()


def _one_conv_graph(c_in, c_out, k, bias=True) -> Graph:
    g = Graph(name="g", dims={"B": (1, 1), "T": (1, 4096)}, inputs=["x"], outputs=["y"])
    g.tensors["x"] = Tensor("x", "f32", ("B", "T", c_in), "input")
    g.tensors["y"] = Tensor("y", "f32", ("B", "T", c_out), "activation")
    g.weights["w"] = WeightRef("w", "t.w", "none", (k, -(-c_out // 16), c_in, 16))
    ws = {"weight": "w"}
    if bias:
        g.weights["b"] = WeightRef("b", "t.b", "none", (c_out,))
        ws["bias"] = "b"
    from kcc.ir import Op
    g.ops = [Op("c", "conv1d", {"x": "x"}, ws, {"stride": 1, "padding": (k - 1) // 2, "dilation": 1, "groups": 1,
                                                 "act": "none", "slope": 0.01}, "y")]
    return g


@pytest.mark.parametrize("c,k,fires", [(128, 11, True), (256, 7, True), (128, 3, False), (8, 11, False),
                                       (512, 5, False)])   # the text encoder's: a 50 MB spectrum, past the cache cap
def test_spectral_pass_fires_on_long_wide_convs_only(c, k, fires):
    g = spectral_convs(_one_conv_graph(c, c, k))
    types = [op.type for op in g.ops]
    assert types == (["dft_conv1d"] if fires else ["conv1d"])
    if fires:
        conv, = g.ops
        assert conv.attrs["min_rows"] > 0 and conv.weights["spectrum"] == conv.weights["weight"] == "w"
        assert conv.attrs["n"] in (16, 32, 64) and conv.attrs["n"] > k


def test_spectral_pass_keeps_a_conv_without_bias():
    assert [op.type for op in spectral_convs(_one_conv_graph(128, 128, 11, bias=False)).ops] == ["conv1d"]
