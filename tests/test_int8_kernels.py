"""The int8 precision's kernels (gemm_tile_s8.c, conv1d_s8.c, norm_conv1d_s8.c) at every dispatch path
this CPU runs: the vpdpbusd zmm tiles (AVX512_VNNI at the AVX-512 level), the vpdpbusd ymm tiles
(AVX-VNNI; where the CPU lacks it, their code with an exact AVX2 stand-in for the instruction), the
AVX2 vpmaddwd tiles, and the ISO C emulation (a build forced to baseline takes it); the pass that
makes the int8 ops; the loader's choice.

The GEMM is integer arithmetic, so it is asserted exactly against numpy's int64 product. The convs
are checked against a float64 reference over the same quantised operands (the kernel's
quantisation re-done in numpy: per-row activation scale, per-channel weight scale), so the only
difference left is f32 summation; and against the f32 reference at int8's expected error.
"""
from __future__ import annotations

import ctypes
import sys
from pathlib import Path

import numpy as np
import pytest
from reduced_precision import assert_reduced_precision

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

from kcc.compiler import precision  # noqa: E402
from kcc.compiler.build import BuildOptions, build_library  # noqa: E402
from kcc.compiler.driver import compile_circuit  # noqa: E402
from kcc.compiler.isa import runnable_levels  # noqa: E402
from kcc.compiler.passes import DEFAULT_PASSES  # noqa: E402
from kcc.kernels.registry import COMMON_HEADER, get_kernel, with_requires  # noqa: E402
from kcc.ops.conv_int8 import fits_int8, quantise_channels, s8_conv_pack, s8_panels  # noqa: E402
from kcc.weights.checkpoint import Checkpoint  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from test_bf16_kernels import _circuit, conv_ref  # noqa: E402

# None: the CPU dispatches; baseline: the ISO C emulation; avx2fma: the 256-bit tiles on a CPU
# whose own choice is the AVX-512 one
LEVELS = [None] + [lv for lv in ("baseline", "avx2fma") if lv in runnable_levels()]
# The AVX-VNNI tile's code with an exact AVX2 stand-in for vpdpbusd ymm (KCC_S8_AVXVNNI_STANDIN)
STANDIN = ["avx-vnni stand-in"] if "avx2fma" in runnable_levels() else []
PATHS = {0: "ISO C", 1: "avx2", 2: "avx-vnni", 3: "avx512-vnni"}


def _gemm_lib(isa):
    """A library with the GEMM entry point, a thread setter and the tile path it takes (static
    kernels wrapped); isa: a dispatch level, None, or the AVX-VNNI stand-in."""
    standin = isa in STANDIN
    src = ["#include <stddef.h>", "#include <stdint.h>", "#include <string.h>",
           '#pragma GCC diagnostic ignored "-Wunused-function"', COMMON_HEADER.read_text()]
    if standin:
        src.insert(0, "#define KCC_S8_AVXVNNI_STANDIN 1")
    src += [get_kernel(k).c_source() for k in with_requires(["kcc_gemm_u8s8_s32"])]
    src.append("""
int t_gemm(const int32_t *a, int64_t rows, int64_t kq, const float *b, int64_t n, int32_t *c, int threads)
{
#ifdef _OPENMP
    omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    return kcc_gemm_u8s8_s32(a, rows, kq, b, n, c);
}
int t_path(void) { return kcc_s8_path(); }
""")
    opts = BuildOptions(isa="avx2fma" if standin else isa)    # (a forced level: sanitizer builds take it too)
    lib = ctypes.CDLL(str(build_library("\n".join(src), opts, name="t_gemm_s8").library))
    lib.t_gemm.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                           ctypes.c_void_p, ctypes.c_int]
    return lib


# precision.int8_tiles' names for the paths kcc_s8_path numbers
TILE_PATH = {None: 0, "avx2": 1, "avx_vnni": 2, "avx512_vnni": 3}


def _expected_path(isa) -> int:
    """The path a library built at `isa` takes here: what the loader expects (precision.int8_tiles,
    tested against mocked CPUs below), but for the stand-in and unforced sanitizer builds."""
    if isa in STANDIN:
        return 2
    if isa is None and BuildOptions().sanitize:
        return 0             # sanitizer builds carry no clones: unforced, they run what -O2 targets
    return TILE_PATH[precision.int8_tiles(isa)]


@pytest.mark.parametrize("isa", LEVELS + STANDIN + [lv for lv in ("avx2", "avx512") if lv in runnable_levels()])
def test_each_dispatch_level_takes_its_int8_tiles(isa):
    """What kcc_s8_path picks is what the loader (precision.int8_tiles) expects of it."""
    assert PATHS[_gemm_lib(isa).t_path()] == PATHS[_expected_path(isa)]


def _panels(w: np.ndarray) -> np.ndarray:
    """B [K, n] int8 -> the s8 panel layout (columns zero-padded to panels of 16), as bytes."""
    k, n = w.shape
    panels = -(-n // 16)
    full = np.zeros((k, panels * 16), np.int8)
    full[:, :n] = w
    return np.ascontiguousarray(s8_panels(full.reshape(k, panels, 16).transpose(1, 0, 2)))


@pytest.mark.parametrize("isa", LEVELS + STANDIN)
@pytest.mark.parametrize("rows,k,n", [(1, 4, 16), (7, 3, 5), (8, 64, 32), (9, 131, 17), (23, 258, 70),
                                      (17, 1024, 40), (6, 2052, 24)])
def test_gemm_u8s8_is_the_exact_integer_product(isa, rows, k, n):
    """Extreme values included (0 and 255 against -128 and 127): every sum exact, any threads; K
    past the AVX2 tiles' widening chunk (512) and not a multiple of it."""
    lib = _gemm_lib(isa)
    rng = np.random.default_rng(rows * 1000 + k)
    kq = -(-k // 4)
    a = rng.integers(0, 256, (rows, 4 * kq), dtype=np.uint8)
    a[0, :k] = 255
    w = rng.integers(-128, 128, (k, n), dtype=np.int8)
    w[:, 0] = -128
    want = a[:, :k].astype(np.int64) @ w.astype(np.int64)       # bytes past k meet zero weights
    b = _panels(w)
    outs = []
    for threads in (1, 2, 3):
        c = np.full((rows, n), -7, np.int32)
        assert lib.t_gemm(a.ctypes.data, rows, kq, b.ctypes.data, n, c.ctypes.data, threads) == 0
        outs.append(c)
    assert np.array_equal(outs[0].astype(np.int64), want)
    assert all(np.array_equal(outs[0], o) for o in outs[1:])


def test_panel_layout_puts_four_k_rows_of_a_column_in_one_word():
    q = np.arange(5 * 16, dtype=np.int8).reshape(5, 16)           # K 5: one full quad, one padded
    p = s8_panels(q)
    assert p.shape == (2, 16, 4)
    assert list(p[0, 3]) == [q[0, 3], q[1, 3], q[2, 3], q[3, 3]]
    assert list(p[1, 3]) == [q[4, 3], 0, 0, 0]


def test_weight_quantisation_is_symmetric_per_channel():
    w = np.array([[[1.0, -2.0]], [[0.0, 0.0]], [[0.5, 0.25]]], np.float32)   # [Cout 3, Cin 1, K 2]
    q, s = quantise_channels(w, axis=(1, 2))
    assert s.ravel().tolist() == pytest.approx([2 / 127, 0.0, 0.5 / 127])
    assert q[0].ravel().tolist() == [64, -127] and q[1].ravel().tolist() == [0, 0]
    assert q[2].ravel().tolist() == [127, 64]                       # 63.5 rounds to even


def _quantised(x, w):
    """x rows and W output channels quantised as the kernel does, back in float64 (x^, w^)."""
    m = np.abs(x).max(axis=2, keepdims=True).astype(np.float32)
    inv = np.where(m > 0, np.float32(127) / np.where(m > 0, m, 1), 0).astype(np.float32)
    qx = np.clip(np.rint((x * inv).astype(np.float32)), -127, 127)
    sa = (m / np.float32(127)).astype(np.float64)
    qw, sw = quantise_channels(w, axis=(1, 2))
    return qx * sa, qw.astype(np.float64) * sw.astype(np.float64)


def _quantised_ref(x, w, b, pad, dil, stride, slope, res):
    """The kernel's arithmetic in float64: x rows and W channels quantised as the kernel does."""
    y = conv_ref(*_quantised(x, w), np.zeros(w.shape[0]), pad, dil, stride)
    y = y + b
    y = np.where(y >= 0, y, y * slope)
    return y if res is None else y + res


def _compile(op, inputs, weights: dict, t_max, isa, prec="int8", passes=()):
    ckpt = Checkpoint(Path("<memory>"), {f"t.{r}": np.ascontiguousarray(v, np.float32) for r, v in weights.items()})
    return compile_circuit(_circuit(op, inputs, list(weights), t_max), ckpt, BuildOptions(isa=isa, precision=prec),
                           passes=list(passes))


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("cin,cout,k,stride,pad,dil,t", [
    (128, 128, 3, 1, 1, 1, 70),        # the resblock shape: two full panels, a partial 8-row tile
    (256, 40, 7, 1, 9, 3, 33),         # K 7 dilated (a resblock conv that was a DFT), a partial panel pair
    (33, 5, 1, 1, 0, 1, 9),            # Cin not a multiple of 4, Cout < one panel, conv1x1
    (22, 48, 12, 6, 3, 1, 61),         # stride 6 (noise_convs), three panels
    (512, 20, 11, 1, 25, 5, 300),      # K 11 dilation 5: several row blocks, each quantising its halo
])
def test_conv1d_int8_matches_the_quantised_reference(isa, cin, cout, k, stride, pad, dil, t):
    rng = np.random.default_rng(cin * 7 + k)
    x = rng.standard_normal((2, t, cin)).astype(np.float32)
    x[1, 3] = 0.0                                                   # a zero row: scale 0
    w = (rng.standard_normal((cout, cin, k)) / np.sqrt(cin * k)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    t_out = (t + 2 * pad - dil * (k - 1) - 1) // stride + 1
    res = rng.standard_normal((2, t_out, cout)).astype(np.float32)
    op = {"op": "conv1d", "in": {"x": "x", "res": "res"}, "w": {"weight": "weight", "bias": "bias"},
          "attrs": {"stride": stride, "padding": pad, "dilation": dil, "act": "leaky_relu", "slope": 0.1},
          "out": "y"}
    cc = _compile(op, {"x": ["B", t, cin], "res": ["B", t_out, cout]}, {"weight": w, "bias": b}, t, isa)
    assert [o.type for o in cc.graph.ops] == ["conv1d_int8"]
    assert_reduced_precision(cc, {"x": x, "res": res},
                             lambda xs, ws, bias, slope, r: conv_ref(xs, ws, bias, pad, dil, stride, slope, r),
                             x, w, *_quantised(x, w), b, res, taps=cin * k)


def test_every_dispatch_path_gives_the_same_bits():
    if len({_expected_path(isa) for isa in LEVELS}) < 2:
        pytest.skip("this CPU runs one dispatch path")
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1, 50, 70)).astype(np.float32)
    w = (rng.standard_normal((36, 70, 5)) / 20).astype(np.float32)
    op = {"op": "conv1d", "in": {"x": "x"}, "w": {"weight": "weight"}, "attrs": {"padding": 2}, "out": "y"}
    ys = [_compile(op, {"x": ["B", 50, 70]}, {"weight": w}, 50, isa).run({"x": x}).outputs["y"] for isa in LEVELS]
    assert all(np.array_equal(ys[0], y) for y in ys[1:])


def test_a_non_finite_input_row_gives_nan_outputs_only_where_it_is_read():
    x = np.ones((1, 8, 16), np.float32)
    x[0, 2, 5] = np.nan
    x[0, 6, 1] = np.inf
    w = np.full((16, 16, 1), 0.5, np.float32)
    op = {"op": "conv1d", "in": {"x": "x"}, "w": {"weight": "weight"}, "attrs": {}, "out": "y"}
    y = _compile(op, {"x": ["B", 8, 16]}, {"weight": w}, 8, None).run({"x": x}).outputs["y"]
    assert np.isnan(y[0, 2]).all() and np.isnan(y[0, 6]).all()
    finite = [0, 1, 3, 4, 5, 7]
    assert np.array_equal(y[0, finite], np.full((6, 16), 8.0, np.float32))


def _adain_weights(rng, c, n_style):
    return {"norm_w": np.ones(c, np.float32), "norm_b": np.zeros(c, np.float32),
            "fc_w": (rng.standard_normal((2 * c, n_style)) * 0.1).astype(np.float32),
            "fc_b": np.zeros(2 * c, np.float32), "alpha": np.ones(c, np.float32)}


@pytest.mark.parametrize("isa", LEVELS)
def test_adain_conv1d_int8_equals_adain_then_conv1d_int8(isa):
    """The fused kernel quantises the normalised rows it makes: the same rows, the same quanta,
    so the same bits as the unfused pair, at any thread count."""
    rng = np.random.default_rng(3)
    c, t, k = 128, 150, 7
    x = rng.standard_normal((1, t, c)).astype(np.float32)
    style = rng.standard_normal((1, 64)).astype(np.float32)
    weights = {**_adain_weights(rng, c, 64), "weight": (rng.standard_normal((c, c, k)) / np.sqrt(c * k)).astype(np.float32),
               "bias": rng.standard_normal(c).astype(np.float32)}
    norm = ("norm_w", "norm_b", "fc_w", "fc_b", "alpha")
    fused_op = {"op": "adain_conv1d", "in": {"x": "x", "style": "style"}, "w": {r: r for r in weights},
                "attrs": {"norm_act": "snake", "padding": 9, "dilation": 3, "act": "none"}, "out": "y"}
    inputs = {"x": ["B", "T", c], "style": ["B", 64]}
    fused = _compile(fused_op, inputs, weights, t, isa)
    assert [o.type for o in fused.graph.ops] == ["adain_conv1d_int8"]
    got = fused.run({"x": x, "style": style}).outputs["y"]
    circuit = _circuit({"op": "adain", "in": {"x": "x", "style": "style"}, "w": {r: r for r in norm},
                        "attrs": {"act": "snake"}, "out": "h"}, inputs, list(weights), t)
    circuit["blocks"][0]["ops"].append({"op": "conv1d", "in": {"x": "h"}, "w": {"weight": "weight", "bias": "bias"},
                                        "attrs": {"padding": 9, "dilation": 3}, "out": "y"})
    circuit["outputs"] = ["y", "h"]                                 # h an output: not fused away
    ckpt = Checkpoint(Path("<memory>"), {f"t.{r}": v for r, v in weights.items()})
    pair = compile_circuit(circuit, ckpt, BuildOptions(isa=isa, precision="int8"), passes=[])
    assert [o.type for o in pair.graph.ops] == ["adain", "conv1d_int8"]
    assert np.array_equal(got, pair.run({"x": x, "style": style}).outputs["y"])
    fused.set_threads(1)
    one = fused.run({"x": x, "style": style}).outputs["y"]
    fused.set_threads(3)
    assert np.array_equal(one, fused.run({"x": x, "style": style}).outputs["y"])


def test_the_int8_pass_turns_a_dft_conv_into_a_direct_int8_conv_and_packs_no_spectrum():
    """A K 11 conv the default passes make a block DFT (fp32): at int8 it is conv1d_int8 and the
    blob holds its int8 pack only (about a quarter of the f32 weight, no spectrum)."""
    rng = np.random.default_rng(11)
    c, t, k = 128, 400, 11
    weights = {"weight": (rng.standard_normal((c, c, k)) / np.sqrt(c * k)).astype(np.float32),
               "bias": rng.standard_normal(c).astype(np.float32)}
    op = {"op": "conv1d", "in": {"x": "x"}, "w": {"weight": "weight", "bias": "bias"},
          "attrs": {"padding": 5}, "out": "y"}
    fp32 = _compile(op, {"x": ["B", "T", c]}, weights, t, None, "fp32", DEFAULT_PASSES)
    assert [o.type for o in fp32.graph.ops] == ["dft_conv1d"]
    int8 = _compile(op, {"x": ["B", "T", c]}, weights, t, None, "int8", DEFAULT_PASSES)
    assert [o.type for o in int8.graph.ops] == ["conv1d_int8"]
    assert {w.pack for w in int8.graph.weights.values()} == {"s8_pack", ""}    # the int8 pack and the bias
    s8_words = sum(np.prod(w.shape) for w in int8.graph.weights.values() if w.pack == "s8_pack")
    assert s8_words * 4 < 0.3 * weights["weight"].nbytes
    x = rng.standard_normal((1, t, c)).astype(np.float32)
    a, b = fp32.run({"x": x}).outputs["y"], int8.run({"x": x}).outputs["y"]
    assert 1e-4 < np.abs(a - b).max() / np.abs(a).max() < 2e-2


def test_convs_the_int8_block_cannot_hold_stay_fp32():
    assert fits_int8(1090, 2) and not fits_int8(20000, 10)
    rng = np.random.default_rng(2)
    w = rng.standard_normal((8, 40000, 7)).astype(np.float32) * 0.01   # 7 rows of 40000 > 160 KiB
    op = {"op": "conv1d", "in": {"x": "x"}, "w": {"weight": "weight"}, "attrs": {"padding": 3}, "out": "y"}
    cc = _compile(op, {"x": ["B", 4, 40000]}, {"weight": w}, 4, None, "int8", DEFAULT_PASSES)
    assert [o.type for o in cc.graph.ops] == ["conv1d"]


def test_the_pack_holds_scales_shift_sums_and_quads_per_tap_and_panel():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((20, 6, 3)).astype(np.float32)          # Cout 20: two panels; Cin 6: two quads
    p = s8_conv_pack(w, {"groups": 1})
    assert p.shape == (3, 2, 2 + 2, 16) and p.dtype == np.float32
    q, s = quantise_channels(w, axis=(1, 2))
    assert np.array_equal(p[0, 0, 0], s.ravel()[:16]) and np.array_equal(p[2, 1, 0, :4], s.ravel()[16:])
    comp = p[1, 0, 1].view(np.int32)
    assert np.array_equal(comp, 128 * q[:16, :, 1].astype(np.int32).sum(axis=1))
    body = p[1, 1, 2:].view(np.int8).reshape(2, 16, 4)              # tap 1, panel 1 (channels 16..19)
    assert list(body[1, 2]) == [q[18, 4, 1], q[18, 5, 1], 0, 0]


@pytest.mark.parametrize("flags,level,tiles", [
    ({"avx512_vnni", "avx_vnni"}, None, "avx512_vnni"),
    ({"avx512_vnni"}, "avx2fma", "avx2"),          # a Zen 4 forced below AVX-512: no AVX-VNNI there
    ({"avx512_vnni", "avx_vnni"}, "avx2", "avx_vnni"),
    ({"avx_vnni"}, None, "avx_vnni"),              # Alder Lake: AVX-VNNI without AVX-512
    (set(), None, "avx2"),
    (set(), "baseline", None),
])
def test_int8_tiles_follow_the_level_and_the_cpu(monkeypatch, flags, level, tiles):
    have = ["baseline", "avx2", "avx2fma"] + (["avx512"] if "avx512_vnni" in flags and level != "avx2" else [])
    monkeypatch.setattr("kcc.compiler.isa.runnable_levels", lambda: have)
    monkeypatch.setattr("kcc.compiler.isa.is_x86_64", lambda: True)
    monkeypatch.setattr(precision, "_cpu_flags", lambda: flags)
    assert precision.int8_tiles(level) == tiles


def test_load_keeps_int8_on_vector_tiles_and_says_what_plain_avx2_costs(monkeypatch):
    import io
    for tiles, kept, said in [("avx512_vnni", "int8", ""), ("avx_vnni", "int8", ""),
                              ("avx2", "int8", "about twice fp32's time"), (None, "fp32", "runs fp32 here")]:
        monkeypatch.setattr(precision, "int8_tiles", lambda level, t=tiles: t)
        log = io.StringIO()
        assert precision.for_this_cpu(BuildOptions(precision="int8"), log).precision == kept
        assert log.getvalue().count("\n") == (1 if said else 0) and said in log.getvalue()


def test_an_adain_before_a_dft_conv_fuses_into_the_int8_conv():
    """fp32 runs a K 11 block-DFT conv on a materialised adain; at int8 the conv is direct and takes
    the adain in (with the residual the default passes gave it), the same bits as unfused."""
    rng = np.random.default_rng(12)
    c, t, k = 128, 300, 11
    weights = {**_adain_weights(rng, c, 64), "weight": (rng.standard_normal((c, c, k)) / np.sqrt(c * k)).astype(np.float32),
               "bias": rng.standard_normal(c).astype(np.float32)}
    norm = ("norm_w", "norm_b", "fc_w", "fc_b", "alpha")
    inputs = {"x": ["B", "T", c], "style": ["B", 64]}
    circuit = _circuit({"op": "adain", "in": {"x": "x", "style": "style"}, "w": {r: r for r in norm},
                        "attrs": {"act": "snake"}, "out": "h"}, inputs, list(weights), t)
    circuit["blocks"][0]["ops"] += [
        {"op": "conv1d", "in": {"x": "h"}, "w": {"weight": "weight", "bias": "bias"},
         "attrs": {"padding": 25, "dilation": 5}, "out": "c"},
        {"op": "add", "in": {"a": "c", "b": "x"}, "out": "y"}]
    circuit["outputs"] = ["y"]
    ckpt = Checkpoint(Path("<memory>"), {f"t.{r}": v for r, v in weights.items()})
    fp32 = compile_circuit(circuit, ckpt, BuildOptions(precision="fp32"), passes=DEFAULT_PASSES)
    assert [o.type for o in fp32.graph.ops] == ["adain", "dft_conv1d"]
    int8 = compile_circuit(circuit, ckpt, BuildOptions(precision="int8"), passes=DEFAULT_PASSES)
    assert [o.type for o in int8.graph.ops] == ["adain_conv1d_int8"] and "res" in int8.graph.ops[0].inputs
    unfused = compile_circuit({**circuit, "outputs": ["y", "h"]}, ckpt, BuildOptions(precision="int8"), passes=[])
    assert [o.type for o in unfused.graph.ops] == ["adain", "conv1d_int8", "add"]
    x = rng.standard_normal((1, t, c)).astype(np.float32)
    style = rng.standard_normal((1, 64)).astype(np.float32)
    got = int8.run({"x": x, "style": style}).outputs["y"]
    assert np.array_equal(got, unfused.run({"x": x, "style": style}).outputs["y"])
    ref = fp32.run({"x": x, "style": style}).outputs["y"]
    assert 1e-4 < np.abs(got - ref).max() / np.abs(ref).max() < 2e-2


@pytest.mark.parametrize("isa", LEVELS)
@pytest.mark.parametrize("cin,cout,k,stride,pad,outpad,t", [
    (512, 256, 20, 10, 5, 0, 23),      # the generator's ups.0: 16 panels, one row back per phase
    (256, 128, 12, 6, 3, 0, 70),       # ups.1, several q blocks
    (33, 19, 5, 2, 1, 1, 9),           # Cin not a multiple of 4, a partial panel, output padding
])
def test_conv_transpose1d_int8_matches_the_quantised_reference(isa, cin, cout, k, stride, pad, outpad, t):
    from kcc.ops.conv import conv_reference
    rng = np.random.default_rng(cin + k)
    x = rng.standard_normal((1, t, cin)).astype(np.float32)
    w = (rng.standard_normal((cin, cout, k)) / np.sqrt(cin * k / stride)).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    attrs = {"stride": stride, "padding": pad, "output_padding": outpad, "dilation": 1, "act": "leaky_relu",
             "slope": 0.1}
    op = {"op": "conv_transpose1d", "in": {"x": "x"}, "w": {"weight": "weight", "bias": "bias"}, "attrs": attrs,
          "out": "y"}
    cc = _compile(op, {"x": ["B", t, cin]}, {"weight": w, "bias": b}, t, isa)
    assert [o.type for o in cc.graph.ops] == ["conv_transpose1d_int8"]
    m = np.abs(x).max(axis=2, keepdims=True)
    qx = np.clip(np.rint((x * (np.float32(127) / m)).astype(np.float32)), -127, 127) * (m / np.float32(127))
    qw, sw = quantise_channels(w, axis=(0, 2))                      # per output channel: axis 1 of [Cin, Cout, K]
    assert_reduced_precision(
        cc, {"x": x}, lambda xs, ws, bias, slope, r: conv_reference(xs, ws, bias, {**attrs, "slope": slope}, transposed=True),
        x, w, qx.astype(np.float64), qw * sw.astype(np.float64), b, None, taps=cin * k)


@pytest.mark.parametrize("op_type, w_shape, attrs, x_c, match", [
    ("conv1d_int8", (8, 2, 3), {"groups": 4, "padding": 1}, 8, "not a GEMM-variant conv"),
    ("conv1d_int8", (8, 1, 3), {"groups": 8, "padding": 1}, 8, "not a GEMM-variant conv"),
    ("conv1d_int8", (4, 40000, 7), {"padding": 3}, 40000, "does not fit the int8 rows' block"),
    ("conv_transpose1d_int8", (8, 2, 4), {"groups": 4, "stride": 2, "padding": 1}, 8, "not a polyphase-variant"),
    ("conv_transpose1d_int8", (8, 8, 3), {"dilation": 2, "padding": 1}, 8, "not a polyphase-variant"),
])
def test_int8_ops_refuse_shapes_without_an_int8_kernel_by_name(op_type, w_shape, attrs, x_c, match):
    """Written into a circuit directly (the pass never makes these), each is a named lowering error."""
    from kcc.ops.core import LoweringError
    w = np.zeros(w_shape, np.float32)
    op = {"op": op_type, "in": {"x": "x"}, "w": {"weight": "weight"}, "attrs": attrs, "out": "y"}
    with pytest.raises(LoweringError, match=match):
        _compile(op, {"x": ["B", 16, x_c]}, {"weight": w}, 16, None)
