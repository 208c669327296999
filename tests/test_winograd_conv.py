"""winograd_conv1d (K = 3 convs as Winograd F(m, 3), kcc/ops/winograd_conv.py) beyond the op
harness (tests/test_ops.py runs its cases against the reference, 1 and 2 threads): the error
against float64 as a multiple of the direct conv's own f32 error at Kokoro's geometries (every
dilation, the fused AdaIN + Snake, residual and leaky epilogues), the transforms and the slot
pack, the fused norm bit for bit against the materialised adain, thread counts 1 / 2 / 3, the
rejection paths; and where kcc.compiler.passes.winograd_convs fires (fp32 builds only).
"""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

torch = pytest.importorskip("torch")
F = torch.nn.functional

from kcc.compiler.build import BuildOptions  # noqa: E402
from kcc.ir import Graph, Op, Tensor, WeightRef  # noqa: E402
from kcc.compiler.one_op import compile_op, run_cases, run_op  # noqa: E402
from kcc.compiler.passes import DEFAULT_PASSES, FP32_ONLY, for_precision, winograd_convs  # noqa: E402
from kcc.ops import Case, LoweringError  # noqa: E402
from kcc.ops.adain import adain_reference, adain_weights  # noqa: E402
from kcc.ops.winograd_conv import POINTS, choose, tiles_per_block, transforms, winograd_pack  # noqa: E402
from tests.test_conv_ops import cm, tm  # noqa: E402

TOL = 2e-5
NORM_ROLES = ("norm_w", "norm_b", "fc_w", "fc_b", "alpha")
# The error bound, as a multiple of the direct conv's own f32 error against float64 (+ 1e-7 for
# errors near zero). m = 2 measured 0.9-1.4x here and 0.9-1.4x at the generator's geometries
# (bench/bench_winograd.py); m = 3 2.1-4.2x (its integer points 2 and 4 scale the rounding up).
BOUND = {2: 2.0, 3: 6.0}


def _weights(rng, c_in, c_out):
    w = (rng.standard_normal((c_out, c_in, 3)) / np.sqrt(c_in * 3)).astype(np.float32)
    return w, (0.1 * rng.standard_normal(c_out)).astype(np.float32)


def _compile(op: str, ws: dict, pad: int, dil: int, c_in: int, norm: bool, res: bool = False, t_max: int = 2048,
             options: BuildOptions = BuildOptions(), **attrs):
    """One conv-shaped op over x [B, T, Cin] (runtime B, T), with the style input when norm."""
    ins = {"x": np.zeros((1, 1, c_in), np.float32)}
    shapes = {"x": ["B", "T", c_in]}
    if norm:
        ins["style"] = np.zeros((1, 16), np.float32)
        shapes["style"] = ["B", 16]
    if res:
        ins["res"] = np.zeros((1, 1, ws["bias"].shape[0]), np.float32)
        shapes["res"] = ["B", f"(T+{2 * pad - 2 * dil})" if 2 * pad != 2 * dil else "T", ws["bias"].shape[0]]
    template = Case("template", ins, ws, {"padding": pad, "dilation": dil, **attrs})
    return compile_op(op, [template], options, shapes=shapes, dim_max={"B": 2, "T": t_max})


def _run(cc, ins):
    return run_cases(cc, [Case("run", ins)])[0]


def _problem(seed, c_in, c_out, t, b, norm):
    rng = np.random.default_rng(seed)
    w, bias = _weights(rng, c_in, c_out)
    ws = {"weight": w, "bias": bias, **(adain_weights(rng, c_in, 16, True) if norm else {})}
    ins = {"x": rng.standard_normal((b, t, c_in)).astype(np.float32)}
    if norm:
        ins["style"] = rng.standard_normal((b, 16)).astype(np.float32)
    return rng, ws, ins


def _truth(ins, ws, pad, dil, act="none", slope=0.01, res=None):
    """float64: adain (+ Snake) when styled, then torch's conv1d, the epilogue, + res."""
    x = adain_reference(ins["x"], ins["style"], ws, 1e-5, "snake", 0.01) if "style" in ins else ins["x"]
    y = F.conv1d(cm(np.asarray(x, np.float64)), torch.from_numpy(ws["weight"]).double(),
                 torch.from_numpy(ws["bias"]).double(), 1, pad, dil)
    y = F.leaky_relu(y, slope) if act == "leaky_relu" else y
    out = tm(y)
    return out + res.astype(np.float64) if res is not None else out


@pytest.mark.parametrize("m,c_in,c_out,t,b,dil,norm,res,act", [
    (2, 128, 128, 601, 1, 1, True, False, "none"),       # a generator resblock's conv (stage 1), AdaIN + Snake fused
    (2, 128, 128, 601, 1, 3, True, False, "none"),       # its dilation-3 and -5 first convs
    (2, 128, 128, 601, 1, 5, True, True, "none"),
    (2, 256, 256, 257, 2, 1, True, True, "none"),        # stage 0's, with the residual epilogue, batch 2
    (2, 512, 256, 130, 1, 1, False, False, "none"),      # the prosody's plain 512 -> 256 conv
    (2, 40, 21, 77, 1, 1, False, False, "leaky_relu"),   # channel counts off the 16-lane blocks, leaky slope
    (3, 128, 128, 601, 1, 3, True, False, "none"),
    (3, 256, 256, 257, 1, 1, True, True, "leaky_relu"),
])
def test_error_vs_float64_is_a_bounded_multiple_of_the_direct_convs(m, c_in, c_out, t, b, dil, norm, res, act):
    _, ws, ins = _problem(c_in + t + dil + m, c_in, c_out, t, b, norm)
    attrs = {"act": act, "slope": 0.1} if act != "none" else {}
    if norm:
        attrs["norm_act"] = "snake"
    if res:
        ins["res"] = np.random.default_rng(t).standard_normal((b, t, c_out)).astype(np.float32)
    want = _truth(ins, ws, dil, dil, act, 0.1, ins.get("res"))
    got = _run(_compile("winograd_conv1d", ws, dil, dil, c_in, norm, res, m=m, c_out=c_out, **attrs), ins)
    direct = _run(_compile("adain_conv1d" if norm else "conv1d", ws, dil, dil, c_in, norm, res, **attrs), ins)
    assert got.shape == want.shape == direct.shape
    err, err_direct = float(np.abs(got - want).max()), float(np.abs(direct - want).max())
    assert err <= TOL, f"max-abs {err:.3e}"
    assert err <= BOUND[m] * err_direct + 1e-7, f"F({m}, 3) error {err:.2e} vs the direct conv's {err_direct:.2e}"


@pytest.mark.parametrize("m", sorted(POINTS))
def test_transforms_compute_the_correlation_exactly(m):
    """AT ((G w) * (BT x)) = sum_k w_k x_(i+k) for integer data (exact in f64), and every BT / AT
    entry is an integer (exact in f32: the kernel's written-out sums)."""
    at, g, bt = transforms(m)
    assert at.shape == (m, m + 2) and g.shape == (m + 2, 3) and bt.shape == (m + 2, m + 2)
    assert np.array_equal(bt, np.round(bt)) and np.array_equal(at, np.round(at))
    rng = np.random.default_rng(m)
    for _ in range(5):
        w, x = rng.integers(-9, 9, 3).astype(np.float64), rng.integers(-9, 9, m + 2).astype(np.float64)
        want = np.array([w @ x[i:i + 3] for i in range(m)])
        assert np.allclose(at @ ((g @ w) * (bt @ x)), want, rtol=0, atol=1e-9)


def test_slot_pack_is_g_times_the_weight_from_either_layout():
    from kcc.ops.conv import gemm_pack
    rng = np.random.default_rng(3)
    w = rng.standard_normal((20, 8, 3)).astype(np.float32)
    _, g, _ = transforms(2)
    u = winograd_pack(w, {"m": 2})
    assert u.shape == (4, 2, 8, 16) and u.dtype == np.float32
    want = np.einsum("sk,ock->sco", g, w.astype(np.float64))              # [slot, Cin, Cout]
    np.testing.assert_array_equal(u[:, 0, :, :16], want[:, :, :16].astype(np.float32))
    np.testing.assert_array_equal(u[:, 1, :, :4], want[:, :, 16:].astype(np.float32))
    assert not u[:, 1, :, 4:].any()                                        # zeros past c_out
    assert np.array_equal(winograd_pack(gemm_pack("t")(w, {}), {"m": 2}), u)   # from the GEMM pack (a pass's)


def test_fused_norm_is_the_materialised_adain_bit_for_bit():
    """The norm rows are kcc_in_style_row's: fused == adain op, then the unstyled Winograd op."""
    _, ws, ins = _problem(5, 64, 48, 333, 1, True)
    conv_ws = {"weight": ws["weight"], "bias": ws["bias"]}
    fused = _run(_compile("winograd_conv1d", ws, 3, 3, 64, True, m=2, c_out=48, norm_act="snake"), ins)
    xn = run_op("adain", ins, {r: ws[r] for r in NORM_ROLES}, {"act": "snake"})
    plain = _run(_compile("winograd_conv1d", conv_ws, 3, 3, 64, False, m=2, c_out=48), {"x": xn})
    assert np.array_equal(fused, plain)


def test_identical_for_one_two_and_three_threads():
    """Tiles are anchored at each residue's first output: the cut into blocks and threads never
    changes a result (many blocks: T 3001 at 128 channels, dilation 3, the norm fused)."""
    _, ws, ins = _problem(8, 128, 128, 3001, 1, True)
    cc = _compile("winograd_conv1d", ws, 3, 3, 128, True, t_max=4096, options=BuildOptions(openmp=True),
                  m=2, c_out=128, norm_act="snake")
    outs = []
    for n in (1, 2, 3):
        cc.set_threads(n)
        outs.append(_run(cc, ins))
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])


def _bad(change: dict, norm: bool = False, k: int = 3, **attrs):
    rng = np.random.default_rng(1)
    w = (rng.standard_normal((16, 16, k)) / 7).astype(np.float32)
    ws = {"weight": w, "bias": np.zeros(16, np.float32)}
    if change.get("norm_weights"):
        ws.update(adain_weights(rng, 16, 16, False))
    return _compile("winograd_conv1d", ws, 1, 1, 16, norm, **{"m": 2, "c_out": 16, **attrs})


@pytest.mark.parametrize("change,kwargs,match", [
    ({}, {"m": 4}, r"attr m 4 must be one of \[2, 3\]"),
    ({}, {"c_out": 8}, r"must be \[8, Cin, 3\]"),
    ({"k": 5}, {}, r"must be \[16, Cin, 3\]"),
    ({"norm_weights": True}, {}, r"norm weights \['norm_w', 'norm_b', 'fc_w', 'fc_b'\] need the input 'style'"),
    ({}, {"act": "relu"}, "act 'relu' is not 'none' or 'leaky_relu'"),
])
def test_rejects_bad_attrs_and_weights(change, kwargs, match):
    with pytest.raises(LoweringError, match=match):
        _bad(change, k=change.get("k", 3), **kwargs)


def test_rejects_channels_past_its_work_area():
    """alpha + 1 regions of a row as wide as the wider side: 27000 channels at m = 2 leave no
    tile of the 512 KiB area; 4000 fit."""
    assert tiles_per_block(2, 27000, 16, 1, False) == 0 and tiles_per_block(2, 4000, 16, 1, False) >= 1
    with pytest.raises(LoweringError, match="Cin 27000 and Cout 16 at m = 2 exceed the kernel's work area"):
        _compile("winograd_conv1d", {"weight": np.zeros((16, 27000, 3), np.float32),
                                     "bias": np.zeros(16, np.float32)}, 1, 1, 27000, False, m=2, c_out=16)


def test_kernel_refuses_input_shorter_than_its_taps():
    """No padding, dilation 5 needs T >= 11: at T = 6 the kernel returns KCC_EDIMS and the output
    keeps its canary."""
    _, ws, _ = _problem(4, 16, 16, 1, 1, False)
    cc = _compile("winograd_conv1d", ws, 0, 5, 16, False, m=2, c_out=16)
    out = np.full(16 * 2048, -777.0, np.float32)
    status, msg = cc.call([np.zeros((1, 6, 16), np.float32)], [1, 6], [out], cc.new_arena())
    assert status == -4 and "kcc_winograd_conv1d_f32" in msg
    assert (out == -777.0).all()


# -- the pass ---------------------------------------------------------------------------------------

def _graph(c_in, c_out, k=3, bias=True, norm=False, dilation=1) -> Graph:
    g = Graph(name="g", dims={"B": (1, 1), "T": (1, 4096)}, inputs=["x", "s"], outputs=["y"])
    g.tensors["x"] = Tensor("x", "f32", ("B", "T", c_in), "input")
    g.tensors["s"] = Tensor("s", "f32", ("B", 16), "input")
    g.tensors["y"] = Tensor("y", "f32", ("B", "T", c_out), "activation")
    g.weights["w"] = WeightRef("w", "t.w", "none", (k, -(-c_out // 16), c_in, 16), pack="conv_pack")
    ws = {"weight": "w"}
    if bias:
        g.weights["b"] = WeightRef("b", "t.b", "none", (c_out,))
        ws["bias"] = "b"
    conv = {"padding": dilation * (k - 1) // 2, "dilation": dilation, "act": "none", "slope": 0.01}
    if norm:
        for r, shape in (("norm_w", (c_in,)), ("norm_b", (c_in,)), ("fc_w", (2 * c_in, 16)), ("fc_b", (2 * c_in,)),
                         ("alpha", (1, c_in, 1))):
            g.weights[r] = WeightRef(r, f"t.{r}", "none", shape)
            ws[r] = r
        g.ops = [Op("c", "adain_conv1d", {"x": "x", "style": "s"}, ws,
                    {"eps": 1e-5, "norm_act": "snake", "norm_slope": 0.01, **conv}, "y")]
    else:
        g.ops = [Op("c", "conv1d", {"x": "x"}, ws, {"stride": 1, "groups": 1, **conv}, "y")]
    return g


@pytest.mark.parametrize("c_in,c_out,k,bias,norm,dilation,fires", [
    (128, 128, 3, True, True, 5, True),      # the generator's resblock convs: AdaIN + Snake fused in
    (256, 256, 3, True, True, 1, True),
    (512, 256, 3, True, False, 1, True),     # the prosody's plain conv
    (1090, 1024, 3, True, True, 1, True),    # the decoder's, at m = 2 (measured x1.16 at 1024 channels, T 127)
    (64, 64, 3, True, True, 1, False),       # modelled x1.06: the transforms eat the saving
    (128, 128, 5, True, False, 1, False),    # not K 3
    (128, 128, 3, False, False, 1, False),   # no bias
    (8, 8, 3, True, False, 1, False),        # too narrow to gain
])
def test_pass_fires_on_wide_k3_convs_with_a_bias(c_in, c_out, k, bias, norm, dilation, fires):
    g = winograd_convs(_graph(c_in, c_out, k, bias, norm, dilation))
    conv, = g.ops
    assert (conv.type == "winograd_conv1d") == fires
    if fires:
        assert conv.attrs["m"] == choose(c_in, c_out, dilation, norm).m == (2 if c_in > 1000 else 3)
        assert conv.attrs["dilation"] == dilation and conv.attrs["c_out"] == c_out
        assert ("style" in conv.inputs) == norm and (conv.attrs["norm_act"] == "snake") == norm


def test_pass_runs_on_fp32_builds_only():
    assert winograd_convs in DEFAULT_PASSES and FP32_ONLY == (winograd_convs,)
    assert for_precision(DEFAULT_PASSES, "fp32") == DEFAULT_PASSES
    for precision in ("bf16", "int8"):
        assert for_precision(DEFAULT_PASSES, precision) == [p for p in DEFAULT_PASSES if p is not winograd_convs]


@pytest.mark.parametrize("precision,conv", [("fp32", "winograd_conv1d"), ("bf16", "conv1d_bf16"),
                                            ("int8", "conv1d_int8")])
def test_reduced_precision_builds_keep_their_own_convs(precision, conv):
    """compile_circuit leaves winograd_convs out below fp32 (kcc.compiler.passes.for_precision):
    the bf16 / int8 passes then rewrite the direct conv into their op, as without this pass."""
    from pathlib import Path

    from kcc.compiler.driver import compile_circuit
    from kcc.weights.checkpoint import Checkpoint
    rng = np.random.default_rng(6)
    w, bias = _weights(rng, 128, 128)
    doc = {"schema": "kcc.circuit/1", "name": "one_k3_conv", "capture": "none",
           "dims": {"B": {"min": 1, "max": 1}, "T": {"min": 1, "max": 64}},
           "inputs": [{"name": "x", "dtype": "f32", "shape": ["B", "T", 128]}],
           "weights": {"w": {"ref": "t.w"}, "b": {"ref": "t.b"}},
           "blocks": [{"name": "b", "ops": [{"op": "conv1d", "in": {"x": "x"}, "w": {"weight": "w", "bias": "b"},
                                             "attrs": {"padding": 1}, "out": "y"}]}], "outputs": ["y"]}
    cc = compile_circuit(doc, Checkpoint(Path("<memory>"), {"t.w": w, "t.b": bias}), BuildOptions(precision=precision))
    assert [op.type for op in cc.graph.ops] == [conv]
    x = rng.standard_normal((1, 64, 128)).astype(np.float32)
    want = _truth({"x": x}, {"weight": w, "bias": bias}, 1, 1)
    assert float(np.abs(cc.run({"x": x}).outputs["y"] - want).max()) <= (TOL if precision == "fp32" else 0.1)


def test_rejects_a_style_input_without_norm_weights():
    with pytest.raises(LoweringError, match=r"the input 'style' needs norm weights \['norm_w', 'norm_b', 'fc_w', 'fc_b'\]"):
        _bad({}, norm=True)
