"""dft_conv1d with the style instance norm fused in (its `style` input, kcc/ops/dft_conv.py) and
the pass that makes it (kcc.compiler.passes.fuse_adain_dft): bit for bit the materialised adain
followed by the unstyled dft_conv1d at every dilation, odd lengths, lane tails, the residual
epilogue and the direct path below min_rows; thread counts 1 / 2 / 3; the rejection paths; fp32
builds only. tests/test_ops.py runs the op's fused cases against its float reference.
"""
from __future__ import annotations

import numpy as np
import pytest

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

from kcc.compiler.build import BuildOptions  # noqa: E402
from kcc.compiler.ir import Graph, Op, Tensor, WeightRef  # noqa: E402
from kcc.compiler.one_op import compile_op, run_cases, run_op  # noqa: E402
from kcc.compiler.passes import DEFAULT_PASSES, FP32_ONLY, for_precision, fuse_adain_dft, spectral_convs  # noqa: E402
from kcc.ops import Case, LoweringError  # noqa: E402
from kcc.ops.adain import adain_weights  # noqa: E402

NORM_ROLES = ("norm_w", "norm_b", "fc_w", "fc_b", "alpha")


def _compile(op: str, ws: dict, pad: int, dil: int, c_in: int, c_out: int, k: int, n: int, norm: bool,
             res: bool = False, t_max: int = 2048, options: BuildOptions = BuildOptions(), **attrs):
    """One dft_conv1d (op) over x [B, T, Cin] (runtime B, T), styled when norm."""
    ins, shapes = {"x": np.zeros((1, 1, c_in), np.float32)}, {"x": ["B", "T", c_in]}
    if norm:
        ins["style"] = np.zeros((1, 16), np.float32)
        shapes["style"] = ["B", 16]
    if res:
        span = 2 * pad - dil * (k - 1)
        ins["res"] = np.zeros((1, 1, c_out), np.float32)
        shapes["res"] = ["B", f"(T+{span})" if span > 0 else f"(T-{-span})" if span < 0 else "T", c_out]
    ws = {**ws, "spectrum": ws["weight"]}
    template = Case("template", ins, ws, {"padding": pad, "dilation": dil, "n": n, "k_size": k, "c_out": c_out,
                                          **attrs})
    return compile_op(op, [template], options, shapes=shapes, dim_max={"B": 2, "T": t_max})


def _problem(seed, c_in, c_out, k, t, b, t_out=None, snake=True):
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((c_out, c_in, k)) / np.sqrt(c_in * k)).astype(np.float32)
    ws = {"weight": w, "bias": (0.1 * rng.standard_normal(c_out)).astype(np.float32),
          **adain_weights(rng, c_in, 16, snake)}
    ins = {"x": (2.0 * rng.standard_normal((b, t, c_in)) + 0.5).astype(np.float32),
           "style": rng.standard_normal((b, 16)).astype(np.float32)}
    if t_out is not None:
        ins["res"] = rng.standard_normal((b, t_out, c_out)).astype(np.float32)
    return ws, ins


def _run(cc, ins):
    return run_cases(cc, [Case("run", ins)])[0]


@pytest.mark.parametrize("c_in,c_out,k,n,pad,dil,t,b,res,min_rows,norm_act", [
    (128, 128, 7, 16, 9, 3, 1201, 1, False, 0, "snake"),    # the generator's K 7 resblock conv, dilation 3
    (128, 128, 11, 32, 25, 5, 997, 1, True, 0, "snake"),    # K 11, dilation 5, the residual epilogue
    (64, 64, 11, 32, 5, 1, 301, 2, False, 0, "snake"),      # dilation 1, batch 2
    (40, 21, 7, 16, 3, 1, 77, 1, True, 0, "leaky_relu"),    # channels off the 16-lane blocks, odd T
    (24, 24, 7, 16, 0, 1, 9, 1, False, 0, "none"),          # 'valid', T shorter than a tile
    (32, 32, 7, 16, 15, 5, 40, 2, True, 10_000, "snake"),   # below min_rows: the fused direct conv
])
def test_fused_norm_is_the_materialised_adain_bit_for_bit(c_in, c_out, k, n, pad, dil, t, b, res, min_rows,
                                                         norm_act):
    t_out = t + 2 * pad - dil * (k - 1)
    ws, ins = _problem(c_in + k + dil, c_in, c_out, k, t, b, t_out if res else None, norm_act == "snake")
    conv_ws = {"weight": ws["weight"], "bias": ws["bias"]}
    fused = _run(_compile("dft_conv1d", ws, pad, dil, c_in, c_out, k, n, True, res, min_rows=min_rows,
                          norm_act=norm_act, norm_slope=0.2), ins)
    xn = run_op("adain", {"x": ins["x"], "style": ins["style"]}, {r: ws[r] for r in NORM_ROLES if r in ws},
                {"act": norm_act, "slope": 0.2}, shapes={"x": ["B", "T", c_in], "style": ["B", 16]},
                dim_max={"B": 2, "T": 2048})
    plain_ins = {"x": xn, **({"res": ins["res"]} if res else {})}
    plain = _run(_compile("dft_conv1d", conv_ws, pad, dil, c_in, c_out, k, n, False, res, min_rows=min_rows),
                 plain_ins)
    assert fused.shape == (b, t_out, c_out) and float(np.abs(fused).max()) > 0.1
    assert np.array_equal(fused, plain)


def test_identical_for_one_two_and_three_threads():
    """The ring is per block and every row is normalised the same way: the cut into blocks and
    threads never changes a result (T 3001 at 128 channels, K 11, dilation 5: many blocks)."""
    ws, ins = _problem(8, 128, 128, 11, 3001, 1)
    cc = _compile("dft_conv1d", ws, 25, 5, 128, 128, 11, 32, True, t_max=4096,
                  options=BuildOptions(openmp=True), norm_act="snake")
    outs = []
    for threads in (1, 2, 3):
        cc.set_threads(threads)
        outs.append(_run(cc, ins))
    assert np.array_equal(outs[0], outs[1]) and np.array_equal(outs[0], outs[2])


def _bad(op="dft_conv1d", norm=True, norm_weights=True, c_in=16, dil=1, k=7, **attrs):
    rng = np.random.default_rng(1)
    ws = {"weight": (rng.standard_normal((16, c_in, k)) / 7).astype(np.float32), "bias": np.zeros(16, np.float32)}
    if norm_weights:
        ws.update(adain_weights(rng, c_in, 16, False))
    return _compile(op, ws, 0, dil, c_in, 16, k, 16 if k <= 7 else 32, norm, **attrs)


@pytest.mark.parametrize("kwargs,match", [
    ({"norm": False}, r"norm weights \['norm_w', 'norm_b', 'fc_w', 'fc_b'\] need the input 'style'"),
    ({"norm_weights": False}, r"the input 'style' needs norm weights \['norm_w', 'norm_b', 'fc_w', 'fc_b'\]"),
    ({"c_in": 1400, "dil": 5, "k": 11}, r"Cin 1400 with a span of 50 rows exceeds the fused direct conv's tile"),
    ({"c_in": 700, "dil": 5, "k": 11}, r"Cin 700 and Cout 16 at n = 32 exceed the kernel's work area"),  # its ring
    ({"op": "dft_conv1d_bf16"}, "style"),                                       # bf16 has no fused norm
])
def test_rejects_what_the_fused_kernel_cannot_run(kwargs, match):
    with pytest.raises(LoweringError, match=match):
        _bad(**kwargs)


def test_ring_takes_its_share_of_the_work_area():
    """The ring (d * n rows of Cin) is fixed: 700 channels at K 11, dilation 5 leave no tile with
    the norm, 3 without; at the generator's geometries it costs no 8-tile block."""
    from kcc.ops.dft_conv import tiles_per_block
    assert tiles_per_block(700, 16, 32, 5) == 0 and tiles_per_block(700, 16, 32) == 3
    assert tiles_per_block(128, 128, 32, 5) == tiles_per_block(128, 128, 32) == 16
    assert tiles_per_block(128, 128, 16, 5) == tiles_per_block(128, 128, 16) == 32


# -- the pass ---------------------------------------------------------------------------------------

def _graph(c_in=128, c_out=128, k=7, dilation=3, pinned=False) -> Graph:
    """x -> adain (Snake) -> conv1d (GEMM pack, bias) -> y; pinned: the adain output is a graph output."""
    g = Graph(name="g", dims={"B": (1, 1), "T": (1, 4096)}, inputs=["x", "s"], outputs=["y", "xn"] if pinned else ["y"])
    g.tensors["x"] = Tensor("x", "f32", ("B", "T", c_in), "input")
    g.tensors["s"] = Tensor("s", "f32", ("B", 16), "input")
    g.tensors["xn"] = Tensor("xn", "f32", ("B", "T", c_in), "activation")
    g.tensors["y"] = Tensor("y", "f32", ("B", "T", c_out), "activation")
    g.weights["w"] = WeightRef("w", "t.w", "none", (k, -(-c_out // 16), c_in, 16), pack="conv_pack")
    g.weights["b"] = WeightRef("b", "t.b", "none", (c_out,))
    norm_ws = {}
    for r, shape in (("norm_w", (c_in,)), ("norm_b", (c_in,)), ("fc_w", (2 * c_in, 16)), ("fc_b", (2 * c_in,)),
                     ("alpha", (1, c_in, 1))):
        g.weights[r] = WeightRef(r, f"t.{r}", "none", shape)
        norm_ws[r] = r
    g.ops = [Op("n", "adain", {"x": "x", "style": "s"}, norm_ws, {"eps": 1e-5, "act": "snake", "slope": 0.01}, "xn"),
             Op("c", "conv1d", {"x": "xn"}, {"weight": "w", "bias": "b"},
                {"stride": 1, "groups": 1, "padding": dilation * (k - 1) // 2, "dilation": dilation, "act": "none",
                 "slope": 0.01}, "y")]
    return g


def test_pass_fuses_the_adain_into_the_dft_conv():
    g = fuse_adain_dft(spectral_convs(_graph()))
    conv, = g.ops
    assert conv.type == "dft_conv1d" and conv.inputs == {"x": "x", "style": "s"}
    assert (conv.attrs["n"], conv.attrs["k_size"], conv.attrs["c_out"], conv.attrs["dilation"]) == (16, 7, 128, 3)
    assert (conv.attrs["norm_act"], conv.attrs["eps"], conv.attrs["padding"]) == ("snake", 1e-5, 9)
    assert set(conv.weights) == {"weight", "spectrum", "bias", *NORM_ROLES}


def test_pass_keeps_a_pinned_adain_and_leaves_direct_convs():
    g = fuse_adain_dft(spectral_convs(_graph(pinned=True)))
    assert [op.type for op in g.ops] == ["adain", "dft_conv1d"] and "style" not in g.ops[1].inputs
    g = fuse_adain_dft(_graph())          # no spectral_convs: a conv1d, not this pass's
    assert [op.type for op in g.ops] == ["adain", "conv1d"]


def test_pass_runs_on_fp32_builds_only():
    assert fuse_adain_dft in DEFAULT_PASSES and fuse_adain_dft in FP32_ONLY
    assert DEFAULT_PASSES.index(spectral_convs) < DEFAULT_PASSES.index(fuse_adain_dft)
    for precision in ("bf16", "int8"):
        assert fuse_adain_dft not in for_precision(DEFAULT_PASSES, precision)
