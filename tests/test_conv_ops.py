"""conv1d, conv_transpose1d, adain and the elementwise family: what the op harness
(tests/test_ops.py, every op against its numpy reference) does not check.

Kokoro's own layer shapes with the seeded checkpoint's real (weight-norm-folded) weights against
torch / the upstream istftnet modules, Snake's large-argument path, the adain -> conv fusion and
GEMM row blocks bit for bit across thread counts, and every rejection. One-op circuits come from
kcc.compiler.one_op with runtime dims B and T, as the shipped circuits have them.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

torch = pytest.importorskip("torch")
F = torch.nn.functional

from kcc.weights.checkpoint import Checkpoint  # noqa: E402
from kcc.ops import LoweringError  # noqa: E402
from kcc.ops.elementwise import same_extent  # noqa: E402
from kcc.compiler.runtime import KccRunError  # noqa: E402
from kcc.compiler.driver import compile_circuit  # noqa: E402
from kcc.compiler.one_op import compile_op, run_op  # noqa: E402
from kcc.ops import Case  # noqa: E402

TOL = 2e-5


def _circuit(ops, inputs: dict, weights: dict, out: str, t_max: int = 64) -> dict:
    """A multi-op chain (fusion and threading tests); one op goes through kcc.compiler.one_op."""
    return {"schema": "kcc.circuit/1", "name": "t_" + ops[0]["op"],
            "dims": {"B": {"min": 1, "max": 2}, "T": {"min": 1, "max": t_max}},
            "inputs": [{"name": n, "dtype": "f32", "shape": s} for n, s in inputs.items()],
            "weights": weights, "blocks": [{"name": "b", "ops": ops}], "outputs": [out]}


def _mem_ckpt(arrays: dict) -> Checkpoint:
    return Checkpoint(Path("<memory>"), {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items()})


def _shapes(x: np.ndarray, extra_inputs: dict) -> dict:
    return {"x": ["B", "T", *x.shape[2:]], **{k: ["B", *v.shape[1:]] for k, v in extra_inputs.items()}}


def run_one(op: str, x: np.ndarray, weights: dict, attrs: dict, extra_inputs: dict | None = None,
            t_max: int = 64) -> np.ndarray:
    """Compile `op` over input x ([B, T, C] or [B, T]) with runtime dims B, T and run it."""
    extra = extra_inputs or {}
    return run_op(op, {"x": x, **extra}, weights, attrs, shapes=_shapes(x, extra), dim_max={"B": 2, "T": t_max})


def tm(t):       # torch [B, C, T] -> numpy time-major [B, T, C]
    return t.detach().transpose(1, 2).contiguous().numpy()


def cm(a):       # numpy time-major -> torch channel-major
    return torch.from_numpy(np.ascontiguousarray(a)).transpose(1, 2)


def _close(got, ref, tol=TOL):
    assert got.shape == ref.shape
    err = float(np.abs(got.astype(np.float64) - ref).max())
    assert err <= tol, f"max-abs {err:.3e} > {tol}"
    return err


# -- conv1d ----------------------------------------------------------------------------------

def test_conv1d_one_channel_rows_with_real_f0_conv(full_ckpt):
    """decoder.F0_conv on an F0 curve in Hz given as a [B, T] row: stride 2, k 3, pad 1."""
    w, b = full_ckpt.weight_norm("decoder.F0_conv"), np.array(full_ckpt.get("decoder.F0_conv.bias"))
    f0 = (150 + 100 * np.sin(np.arange(2 * 13) / 3.0))[None].astype(np.float32)
    got = run_one("conv1d", f0, {"weight": w, "bias": b}, {"stride": 2, "padding": 1})
    ref = F.conv1d(torch.from_numpy(f0)[:, None], torch.from_numpy(w), torch.from_numpy(b), 2, 1)
    assert got.shape == (1, 13, 1)
    _close(got, tm(ref), tol=2e-5 * 300)   # outputs ~ 1e2: a few f32 ulps


def test_conv1d_rejects_wrong_channels():
    w = np.zeros((4, 3, 3), np.float32)
    with pytest.raises(LoweringError, match="expects 3 input channels, x has 5"):
        run_one("conv1d", np.zeros((1, 8, 5), np.float32), {"weight": w}, {})


def test_conv1d_kernel_rejects_too_short_input():
    """k 5 without padding needs T >= 5: called with T = 3 the kernel refuses before writing."""
    case = Case("short", {"x": np.zeros((1, 8, 2), np.float32)}, {"weight": np.ones((2, 2, 5), np.float32)})
    cc = compile_op("conv1d", [case], shapes={"x": ["B", "T", 2]}, dim_max={"B": 2, "T": 64})
    out = np.full(8, 7.0, np.float32)
    status, msg = cc.call([np.zeros((1, 3, 2), np.float32)], [1, 3], [out], cc.new_arena())
    assert status == -4 and "kcc_conv1d_gemm_f32" in msg       # KCC_EDIMS
    assert (out == 7.0).all()


# -- conv_transpose1d ------------------------------------------------------------------------

@pytest.mark.parametrize("module,attrs", [
    ("decoder.decode.3.pool", {"stride": 2, "padding": 1, "output_padding": 1, "groups": 1090}),
    ("decoder.generator.ups.1", {"stride": 6, "padding": 3}),
])
def test_conv_transpose1d_real_weights(small_ckpt, module, attrs):
    w, b = small_ckpt.weight_norm(module), np.array(small_ckpt.get(f"{module}.bias"))
    cin = w.shape[0]
    x = np.random.default_rng(1).standard_normal((1, 9, cin)).astype(np.float32)
    got = run_one("conv_transpose1d", x, {"weight": w, "bias": b}, attrs)
    ref = F.conv_transpose1d(cm(x), torch.from_numpy(w), torch.from_numpy(b), attrs["stride"], attrs["padding"],
                             attrs.get("output_padding", 0), attrs.get("groups", 1))
    _close(got, tm(ref))


# -- adain -----------------------------------------------------------------------------------

def _adain_module(ckpt, ref):
    from oracle.upstream import kokoro_modules
    _, _, istft = kokoro_modules()
    c = ckpt.get(f"{ref}.norm.weight").shape[0]
    m = istft.AdaIN1d(128, c).eval()
    m.load_state_dict({k: torch.from_numpy(np.array(ckpt.get(f"{ref}.{k}"))) for k in m.state_dict()})
    return m


@pytest.mark.parametrize("act", ["none", "leaky_relu", "snake"])
def test_adain_matches_upstream(small_ckpt, act):
    ref_mod = "decoder.generator.resblocks.1.adain1.2"
    m = _adain_module(small_ckpt, ref_mod)
    c = m.norm.weight.shape[0]
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((2, 150, c)) * 2 + 0.5).astype(np.float32)   # 150 rows: three row chunks
    s = (rng.standard_normal((2, 128)) * 0.3).astype(np.float32)
    w = {r: small_ckpt.get(f"{ref_mod}.{n}") for r, n in
         (("norm_w", "norm.weight"), ("norm_b", "norm.bias"), ("fc_w", "fc.weight"), ("fc_b", "fc.bias"))}
    ref = m(cm(x), torch.from_numpy(s))
    if act == "leaky_relu":
        ref = F.leaky_relu(ref, 0.2)
    elif act == "snake":
        a = torch.from_numpy(np.array(small_ckpt.get("decoder.generator.resblocks.1.alpha1.2")))
        w["alpha"] = a.numpy()
        ref = ref + (1 / a) * (torch.sin(a * ref) ** 2)          # upstream Snake1D, verbatim
    got = run_one("adain", x, w, {"act": act, "slope": 0.2}, extra_inputs={"style": s}, t_max=150)
    _close(got, tm(ref))


def test_adain_snake_f32_polynomial_and_large_arguments():
    """Snake's f32 sin^2 polynomial against float64 over alpha*y up to 2e4: the range reduction
    holds to 8192, beyond it the row falls back to libm (both paths hit here). Identity norm
    (norm_w 1, norm_b 0, fc 0): Snake is checked on the kernel's own normalised x (act none),
    which itself is checked against float64."""
    c, t = 16, 64
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, t, c)).astype(np.float32)
    alpha = np.geomspace(0.05, 4000.0, c).astype(np.float32)          # |alpha*y| up to ~2e4
    w = {"norm_w": np.ones(c, np.float32), "norm_b": np.zeros(c, np.float32),
         "fc_w": np.zeros((2 * c, 128), np.float32), "fc_b": np.zeros(2 * c, np.float32), "alpha": alpha}
    style = {"style": np.zeros((2, 128), np.float32)}
    got = run_one("adain", x, w, {"act": "snake"}, extra_inputs=style)
    plain = {k: v for k, v in w.items() if k != "alpha"}
    y32 = run_one("adain", x, plain, {"act": "none"}, extra_inputs=style)   # the same normalised x, no Snake
    xd = x.astype(np.float64)
    y = (xd - xd.mean(1, keepdims=True)) / np.sqrt(xd.var(1, keepdims=True) + 1e-5)
    assert np.abs(y32 - y).max() <= 4 * np.finfo(np.float32).eps * np.abs(y).max()   # the norm: a few ulps
    z = (alpha * y32).astype(np.float64)                              # alpha*y rounded to f32, as torch does
    assert np.abs(z).max() > 8192                                     # the libm fallback ran too
    want = y32 + np.sin(z) ** 2 / alpha.astype(np.float64)
    err = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    assert err.max() <= 4e-7, f"relative error {err.max():.2e}"        # a few f32 ulps


def test_adain_snake_needs_alpha(small_ckpt):
    ref_mod = "decoder.encode.norm1"
    w = {r: small_ckpt.get(f"{ref_mod}.{n}") for r, n in
         (("norm_w", "norm.weight"), ("norm_b", "norm.bias"), ("fc_w", "fc.weight"), ("fc_b", "fc.bias"))}
    x = np.zeros((1, 4, w["norm_w"].shape[0]), np.float32)
    with pytest.raises(LoweringError, match="snake"):
        run_one("adain", x, w, {"act": "snake"}, extra_inputs={"style": np.zeros((1, 128), np.float32)})


def test_adain_and_its_fused_conv_are_identical_serial_and_threaded():
    """Statistics come from 8 fixed parts of time and rows from fixed chunks: a serial build and
    1, 2, 3 threads give the same bits, standalone and fused into the conv (adain_conv1d)."""
    from kcc.compiler.build import BuildOptions
    c, t = 32, 301
    rng = np.random.default_rng(5)
    w = {"norm_w": rng.standard_normal(c).astype(np.float32), "norm_b": rng.standard_normal(c).astype(np.float32),
         "fc_w": (0.1 * rng.standard_normal((2 * c, 8))).astype(np.float32), "fc_b": np.zeros(2 * c, np.float32),
         "alpha": (0.5 + rng.random(c)).astype(np.float32)}
    feed = {"x": (rng.standard_normal((2, t, c)) * 2 + 1).astype(np.float32),
            "style": rng.standard_normal((2, 8)).astype(np.float32)}
    adain = {"op": "adain", "in": {"x": "x", "style": "style"}, "w": {r: r for r in w}, "attrs": {"act": "snake"},
             "out": "h"}
    conv = {"op": "conv1d", "in": {"x": "h"}, "w": {"weight": "cw", "bias": "cb"}, "attrs": {"padding": 3, "dilation": 3},
            "out": "y"}
    cw = {"cw": (rng.standard_normal((c, c, 3)) / np.sqrt(3 * c)).astype(np.float32),
          "cb": np.zeros(c, np.float32)}
    doc = _circuit([adain, conv], {"x": ["B", "T", c], "style": ["B", 8]},
                   {r: {"ref": f"t.{r}"} for r in {**w, **cw}}, "y", t_max=t)
    ck = _mem_ckpt({f"t.{r}": v for r, v in {**w, **cw}.items()})
    for passes in ([], None):                               # op by op; default passes fuse into adain_conv1d
        serial = compile_circuit(doc, ck, passes=passes).run(feed).outputs["y"]
        threaded = compile_circuit(doc, ck, options=BuildOptions(openmp=True), passes=passes)
        assert passes is not None or [o.type for o in threaded.graph.ops] == ["adain_conv1d"]
        for n in (1, 2, 3):
            threaded.set_threads(n)
            assert np.array_equal(threaded.run(feed).outputs["y"], serial), (passes, n)




@pytest.mark.parametrize("rows", [66, 7, 130])
def test_gemm_row_blocks_split_evenly_and_keep_bits(rows):
    """Row blocks are cut evenly for the threads (66 rows: 33 + 33, not 64 + 2) and the linear's
    panels are its outer parallel loop: an OpenMP build at 1, 2, 3 threads gives the serial
    build's bits for a conv1d, a strided ConvTranspose1d (polyphase) and a linear."""
    from kcc.compiler.build import BuildOptions
    rng = np.random.default_rng(rows)
    c = 48
    ws = {"cw": (rng.standard_normal((c, c, 5)) / np.sqrt(5 * c)).astype(np.float32), "cb": np.zeros(c, np.float32),
          "tw": (rng.standard_normal((c, c, 4)) / np.sqrt(4 * c)).astype(np.float32), "tb": np.zeros(c, np.float32),
          "lw": (rng.standard_normal((80, c)) / np.sqrt(c)).astype(np.float32), "lb": np.zeros(80, np.float32)}
    ops = [{"op": "conv1d", "in": {"x": "x"}, "w": {"weight": "cw", "bias": "cb"}, "attrs": {"padding": 2}, "out": "h"},
           {"op": "conv_transpose1d", "in": {"x": "h"}, "w": {"weight": "tw", "bias": "tb"},
            "attrs": {"stride": 2, "padding": 1}, "out": "u"},
           {"op": "linear", "in": {"x": "u"}, "w": {"weight": "lw", "bias": "lb"}, "attrs": {"act": "gelu_new"}, "out": "y"}]
    doc = _circuit(ops, {"x": ["B", "T", c]}, {r: {"ref": f"t.{r}"} for r in ws}, "y", t_max=256)
    ck = _mem_ckpt({f"t.{r}": v for r, v in ws.items()})
    feed = {"x": rng.standard_normal((1, rows, c)).astype(np.float32)}
    serial = compile_circuit(doc, ck).run(feed).outputs["y"]
    threaded = compile_circuit(doc, ck, options=BuildOptions(openmp=True))
    for n in (1, 2, 3):
        threaded.set_threads(n)
        assert np.array_equal(threaded.run(feed).outputs["y"], serial), n

def _adain_weights(rng, c):
    return {"norm_w": rng.standard_normal(c).astype(np.float32), "norm_b": rng.standard_normal(c).astype(np.float32),
            "fc_w": (0.1 * rng.standard_normal((2 * c, 8))).astype(np.float32), "fc_b": np.zeros(2 * c, np.float32)}


def test_wide_adain_conv_blocks_match_unfused():
    """1024 channels: the fused conv's tile grows past its L2 size to hold 64-row blocks (each
    block streams the whole weight); still bit-identical to adain -> conv1d, at 1 and 2 threads."""
    from kcc.compiler.build import BuildOptions
    c, t = 1024, 150
    rng = np.random.default_rng(8)
    w = _adain_weights(rng, c)
    cw = {"cw": (rng.standard_normal((64, c, 3)) / np.sqrt(3 * c)).astype(np.float32), "cb": np.zeros(64, np.float32)}
    feed = {"x": rng.standard_normal((1, t, c)).astype(np.float32), "style": rng.standard_normal((1, 8)).astype(np.float32)}
    ops = [{"op": "adain", "in": {"x": "x", "style": "style"}, "w": {r: r for r in w}, "attrs": {"act": "leaky_relu", "slope": 0.2},
            "out": "h"},
           {"op": "conv1d", "in": {"x": "h"}, "w": {"weight": "cw", "bias": "cb"}, "attrs": {"padding": 1}, "out": "y"}]
    doc = _circuit(ops, {"x": ["B", "T", c], "style": ["B", 8]}, {r: {"ref": f"t.{r}"} for r in {**w, **cw}}, "y", t_max=t)
    ck = _mem_ckpt({f"t.{r}": v for r, v in {**w, **cw}.items()})
    unfused = compile_circuit(doc, ck, passes=[]).run(feed).outputs["y"]
    fused = compile_circuit(doc, ck, options=BuildOptions(openmp=True))
    assert [o.type for o in fused.graph.ops] == ["adain_conv1d"]
    for n in (1, 2):
        fused.set_threads(n)
        assert np.array_equal(fused.run(feed).outputs["y"], unfused), n


def test_adain_conv_rejects_a_tap_span_its_tile_cannot_hold():
    """1024 channels x (span 72 + 8 rows) exceed the 73728-float tile: rejected at lowering."""
    c = 1024
    w = {**_adain_weights(np.random.default_rng(9), c), "weight": np.zeros((16, c, 9), np.float32),
         "bias": np.zeros(16, np.float32)}
    with pytest.raises(LoweringError, match="Cin 1024 with tap span 72 does not fit the kernel's tile"):
        run_one("adain_conv1d", np.zeros((1, 80, c), np.float32), w, {"dilation": 9},
                extra_inputs={"style": np.zeros((1, 8), np.float32)}, t_max=128)

def test_adain_rejects_more_channels_than_its_statistics_hold():
    c = 2049                                                          # KCC_IN_MAX_C + 1
    w = {"norm_w": np.ones(c, np.float32), "norm_b": np.zeros(c, np.float32),
         "fc_w": np.zeros((2 * c, 8), np.float32), "fc_b": np.zeros(2 * c, np.float32)}
    with pytest.raises(LoweringError, match="2049 channels exceed the kernel's 2048"):
        run_one("adain", np.zeros((1, 4, c), np.float32), w, {}, extra_inputs={"style": np.zeros((1, 8), np.float32)})


# -- elementwise -----------------------------------------------------------------------------

def test_reflection_pad_rejects_single_frame():
    with pytest.raises(KccRunError, match="rejected its input"):
        run_one("reflection_pad", np.zeros((1, 1, 4), np.float32), {}, {"left": 1})


def test_same_extent():
    assert same_extent("F", "(((2*F)-1)/2+1)")
    assert not same_extent("F", "((F-1)/2+1)")
    assert same_extent(12, "(2*6)")
