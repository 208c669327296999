"""Signal ops (kcc/ops/signal.py) against pinned upstream captures, beyond the op harness
(tests/test_ops.py: every op against its numpy reference on small seeded cases): the harmonic
source (short with upstream's noise, long and fully voiced for phase accumulation), the STFT of
the source, the iSTFT in both spectrum modes, long inputs across thread counts, and the seeded
RNG's statistics over 10^5-10^6 draws."""
from __future__ import annotations

import numpy as np
import pytest

from kcc.ops import Case, LoweringError
from kcc.compiler.driver import compile_circuit
from kcc.compiler.one_op import compile_op, run_cases
from kcc.ops.signal import rng_reference
from kcc.compiler.xray import compare_arrays, load_pinned

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

TOL = 2e-5


def _circuit(name, dims, inputs, ops, checkpoints, weights=None):
    return {"schema": "kcc.circuit/1", "name": name, "dims": dims,
            "inputs": [{"name": n, "dtype": d, "shape": s} for n, d, s in inputs],
            "weights": weights or {}, "outputs": [checkpoints[-1]],
            "blocks": [{"name": "b", "ops": ops, "checkpoints": [
                {"name": c, "tensor": c, "layout": "flat", "dtype": "f32", "axes": []} for c in checkpoints]}]}


SOURCE = _circuit(
    "t_source", {"N": {"min": 1, "max": 512}},
    [("f0", "f32", [1, "N"]), ("ini", "f32", [1, 9]), ("noise", "f32", [1, "(300*N)", 9])],
    [{"op": "harmonic_source", "in": {"f0": "f0", "init_phase": "ini", "noise": "noise"},
      "w": {"mix_w": "w", "mix_b": "b"}, "attrs": {"upsample": 300}, "out": "src"},
     {"op": "stft", "in": {"x": "src"}, "attrs": {"n_fft": 20, "hop": 5}, "out": "har"}],
    ["src", "har"],
    {"w": {"ref": "decoder.generator.m_source.l_linear.weight"},
     "b": {"ref": "decoder.generator.m_source.l_linear.bias"}})


@pytest.fixture(scope="module")
def source(small_ckpt):
    return compile_circuit(SOURCE, small_ckpt)


@pytest.fixture(scope="module")
def gen_capture():
    return load_pinned("generator", "small")


@pytest.fixture(scope="module")
def sig_capture():
    return load_pinned("signal_ops", "small")


def test_source_matches_upstream_with_its_noise(source, gen_capture):
    ins = gen_capture.inputs
    r = source.run({"f0": ins["f0"], "ini": ins["rand_ini"], "noise": ins["sine_noise"]}, with_checkpoints=True)
    res = compare_arrays("source", gen_capture.checkpoints["kokoro.generator.source"], r.checkpoints["src"])
    assert res.status == "PASS", res.reason
    assert res.max_abs < 1e-6 and res.snr_db > 120


def test_long_voiced_source_phase_does_not_drift(source, sig_capture):
    """2.5 s fully voiced, zero noise: the phase reaches ~1e5 rad; torch's f32 arithmetic is replayed."""
    f0 = sig_capture.inputs["f0_long"]
    assert f0.shape == (1, 200) and (f0 > 10).all()
    r = source.run({"f0": f0, "ini": sig_capture.inputs["rand_ini_long"],
                    "noise": np.zeros((1, 300 * f0.shape[1], 9), np.float32)}, with_checkpoints=True)
    res = compare_arrays("source_long", sig_capture.checkpoints["signal.source_long"], r.checkpoints["src"])
    assert res.status == "PASS", res.reason
    assert res.max_abs < 1e-6


def test_stft_matches_torch_up_to_the_phase_conditioning(source, gen_capture):
    """Magnitudes and complex bin values within the gate. Phases are compared as what they are:
    angle() of a bin with |X| near f32 noise is ill-conditioned (error ~ noise / |X|), and frame 0
    is the reflection-symmetric frame whose spectrum is real up to rounding noise, so a negative
    bin's phase is +pi or -pi by the sign of torch's (MKL's) noise. 2*pi differences must be in
    frame 0 only; elsewhere a phase may differ only as much as its bin's magnitude allows."""
    ins = gen_capture.inputs
    r = source.run({"f0": ins["f0"], "ini": ins["rand_ini"], "noise": ins["sine_noise"]}, with_checkpoints=True)
    ref, got = gen_capture.checkpoints["kokoro.generator.har"], r.checkpoints["har"]
    assert got.shape == ref.shape == (1, 481, 22)
    assert np.abs(got[..., :11] - ref[..., :11]).max() <= TOL
    z_ref = ref[..., :11] * np.exp(1j * ref[..., 11:].astype(np.float64))
    z_got = got[..., :11] * np.exp(1j * got[..., 11:].astype(np.float64))
    assert np.abs(z_got - z_ref).max() <= TOL
    d = (got[..., 11:] - ref[..., 11:]).astype(np.float64)
    cut = np.argwhere(np.abs(d) > 1)
    assert set(cut[:, 1].tolist()) <= {0}, f"2*pi phase differences outside frame 0: {cut.tolist()}"
    assert np.allclose(np.abs(d[np.abs(d) > 1]), 2 * np.pi, atol=1e-5)
    well = ref[:, 1:, :11] > 1e-2          # phases of bins well above the noise floor
    assert np.abs(d[:, 1:][well]).max() <= TOL


def _istft(spec, n_fft=20):
    """The iSTFT head as one op over x [1, T, n_fft + 2] (T a runtime dim)."""
    template = Case("template", {"x": np.zeros((1, 2, n_fft + 2), np.float32)},
                    attrs={"n_fft": n_fft, "hop": 5, "spec": spec})
    return compile_op("istft", [template], shapes={"x": [1, "T", n_fft + 2]}, dim_max={"T": 4096})


def _run(cc, x):
    return run_cases(cc, [Case("run", {"x": x})])[0]


def test_istft_polar_matches_torch(sig_capture):
    y = _run(_istft("polar"), sig_capture.inputs["istft_polar_in"])
    res = compare_arrays("istft", sig_capture.checkpoints["signal.istft_polar"], y)
    assert res.status == "PASS", res.reason
    assert y.shape == (1, 96 * 5)


def test_istft_exp_sin_head_matches_upstream_waveform(gen_capture):
    y = _run(_istft("exp_sin"), gen_capture.checkpoints["kokoro.generator.conv_post"])
    res = compare_arrays("waveform", gen_capture.checkpoints["kokoro.waveform"], y)
    assert res.status == "PASS", res.reason
    assert res.snr_db > 100


def test_signal_ops_are_identical_serial_and_threaded(small_ckpt):
    """The source walks its phase serially and forks from snapshots; the STFT splits frames and
    the iSTFT output chunks: serial, 1 and 2 threads give the same bits (inputs long enough for
    many chunks: 60 frames -> 18,000 samples)."""
    from kcc.compiler.build import BuildOptions
    rng = np.random.default_rng(7)
    n = 60
    f0 = np.abs(150 + 60 * rng.standard_normal((1, n))).astype(np.float32)
    f0[:, ::7] = 0.0                                               # unvoiced frames too
    ins = {"f0": f0, "ini": rng.random((1, 9)).astype(np.float32),
           "noise": rng.standard_normal((1, 300 * n, 9)).astype(np.float32)}
    serial = compile_circuit(SOURCE, small_ckpt).run(ins, with_checkpoints=True).checkpoints
    threaded = compile_circuit(SOURCE, small_ckpt, options=BuildOptions(openmp=True))
    for t in (1, 2):
        assert threaded.set_threads(t) == t
        got = threaded.run(ins, with_checkpoints=True).checkpoints
        for name, want in serial.items():
            assert np.isfinite(want).all() and np.array_equal(got[name], want), (name, t)
    spec = rng.standard_normal((1, 3000, 22)).astype(np.float32)
    head = _istft("exp_sin")
    outs = []
    for t in (1, 2):
        assert head.set_threads(t) == t
        outs.append(_run(head, spec))
    assert np.isfinite(outs[0]).all() and np.array_equal(outs[0], outs[1])


def test_signal_ops_reject_bad_attrs():
    with pytest.raises(LoweringError, match="n_fft must be an even integer"):
        _istft("polar", n_fft=21)
    with pytest.raises(LoweringError, match="spec 'cartesian'"):
        _istft("cartesian")


RNG = _circuit(
    "t_rng", {"N": {"min": 1, "max": 4096}}, [("seed", "i32", [1]), ("like", "f32", [1, "N"])],
    [{"op": "random_fill", "in": {"seed": "seed"}, "attrs": {"shape": [1, "(100*N)"], "dist": "uniform",
                                                               "stream": 0}, "out": "u"},
     {"op": "random_fill", "in": {"seed": "seed"}, "attrs": {"shape": [1, "(100*N)", 9], "dist": "normal",
                                                               "stream": 1}, "out": "z"},
     {"op": "random_fill", "in": {"seed": "seed"}, "attrs": {"shape": [1, "(100*N)"], "dist": "uniform",
                                                               "stream": 2}, "out": "u2"}],
    ["u", "z", "u2"])


@pytest.fixture(scope="module")
def rng(small_ckpt):
    # 'like' only fixes N; the circuit's outputs do not read it.
    return compile_circuit(RNG, small_ckpt)


def _draw(rng, seed, n=1000):
    return rng.run({"seed": np.array([seed], np.int32), "like": np.zeros((1, n), np.float32)},
                   with_checkpoints=True).checkpoints


def test_rng_statistics(rng):
    d = _draw(rng, 12345)
    u, z = d["u"].astype(np.float64).ravel(), d["z"].astype(np.float64).ravel()
    assert u.size == 100_000 and z.size == 900_000
    assert u.min() >= 0.0 and u.max() < 1.0
    assert abs(u.mean() - 0.5) < 0.005 and abs(u.std() - np.sqrt(1 / 12)) < 0.005
    assert abs(z.mean()) < 0.005 and abs(z.std() - 1.0) < 0.005
    assert abs(np.mean(z ** 4) - 3.0) < 0.05                      # Gaussian kurtosis
    assert abs(np.mean(np.abs(z) < 1.0) - 0.6826894921) < 0.003    # one-sigma mass
    hist = np.histogram(u, bins=10, range=(0, 1))[0]
    assert hist.min() > 9500 and hist.max() < 10500
    assert abs(np.corrcoef(z[:-1], z[1:])[0, 1]) < 0.005           # neighbours (Box-Muller pairs too)


def test_rng_normal_is_the_documented_box_muller(rng):
    """random_fill_f32.c's formula in numpy (splitmix64 counters, Box-Muller with numpy's libm
    log / cos / sin in f64): the C's own vectorised ln and sincos round to the same f32 but for
    rare ties, never more than 1 ulp away."""
    seed = 4242
    z = _draw(rng, seed)["z"].ravel()
    ref = rng_reference(seed, 1, "normal", z.size)
    ulps = np.abs(z.view(np.int32).astype(np.int64) - ref.view(np.int32).astype(np.int64))
    assert ulps.max() <= 1 and (ulps == 0).mean() >= 0.9999, (ulps.max(), (ulps == 0).mean())


def test_rng_is_deterministic_per_seed_and_stream(rng):
    a, b, c = _draw(rng, 7), _draw(rng, 7), _draw(rng, 8)
    assert np.array_equal(a["z"], b["z"]) and np.array_equal(a["u"], b["u"])
    assert not np.array_equal(a["u"], c["u"])
    assert abs(np.corrcoef(a["u"].ravel(), a["u2"].ravel())[0, 1]) < 0.02   # streams independent
    # Counter based: a longer draw extends, never reshuffles, the shorter one.
    assert np.array_equal(_draw(rng, 7, n=10)["u"], a["u"][:, :1000])
