"""The op harness: every registered op x its cases x {1, 2 threads} x {portable, native} builds,
against the op's numpy reference at the bound kernel's Contract.tolerance.

An op's definition (kcc/ops/<family>.py) carries its reference and its seeded cases; the cases
of one op compile as one circuit (kcc.compiler.one_op), once per build variant. The gate is
max |got - ref| <= tolerance * max(1, max |ref|): the contracts state their budget at unit-scale
values, so an output of larger magnitude (a conv over Hz, an iSTFT envelope) is held to the same
relative error. Both thread counts must give the same bits (every kernel's contract says so).
The last test prints the coverage list and fails for an op without a reference or cases.
"""
from __future__ import annotations

import numpy as np
import pytest

from kcc.compiler.build import BuildOptions
from kcc.compiler.costs import bind_op
from kcc.compiler.one_op import DIM_MAX, OneOpError, compile_op, op_circuit, run_cases
from kcc.kernels.registry import get_kernel
from kcc.ops import OPS, Case
from kcc.ops.core import with_defaults
from kcc.ops.signal import _phase_cut

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

VARIANTS = {"portable": BuildOptions(), "native": BuildOptions(native=True)}
THREADS = (1, 2)
COVERED: dict[str, dict] = {}          # op -> {"cases": [...], "variants": [...]}, filled as the runs pass


def max_error(got: np.ndarray, ref: np.ndarray) -> float:
    if got.dtype.kind == "i" or ref.dtype.kind == "i":
        return float(np.abs(got.astype(np.int64) - ref.astype(np.int64)).max(initial=0))
    return float(np.abs(got.astype(np.float64) - ref.astype(np.float64)).max(initial=0.0))


def gate(tolerance: float, ref: np.ndarray) -> float:
    return tolerance * max(1.0, float(np.abs(ref.astype(np.float64)).max(initial=0.0)))


def ops_with_cases() -> list[str]:
    return sorted(n for n, d in OPS.items() if d.cases is not None and d.reference is not None)


@pytest.mark.parametrize("variant", list(VARIANTS))
@pytest.mark.parametrize("op", ops_with_cases())
def test_op_matches_its_reference(op, variant):
    defn = OPS[op]
    cases = defn.cases()
    assert cases, f"{op}: cases() returned none"
    cc = compile_op(op, cases, VARIANTS[variant])
    kernels = {bind_op(cc.graph, o)[0] for o in cc.graph.ops}
    tolerance = max(get_kernel(k).contract.tolerance for k in kernels)
    canon = defn.compare_as or (lambda a: a)
    refs = [canon(defn.reference(c.inputs, c.weights, with_defaults(defn, c.attrs))) for c in cases]
    first = None
    for threads in THREADS:
        cc.set_threads(threads)
        outs = run_cases(cc, cases)
        for case, got, ref in zip(cases, outs, refs):
            got = canon(got)
            assert got.shape == ref.shape, f"{op}/{case.name}: shape {got.shape}, reference {ref.shape}"
            err, limit = max_error(got, ref), gate(tolerance, ref)
            assert err <= limit, f"{op}/{case.name} ({variant}, {threads} threads): max-abs {err:.3e} > {limit:.3e}"
        if first is None:
            first = outs
        for case, a, b in zip(cases, first, outs):
            assert np.array_equal(a, b), f"{op}/{case.name} ({variant}): {threads} threads differ from 1"
    entry = COVERED.setdefault(op, {"cases": [c.name for c in cases], "variants": []})
    entry["variants"] += [f"{variant}x{t}" for t in THREADS]


def _torch_equivalents(torch):
    """op -> (inputs, weights, attrs) -> torch's output (time-major numpy), for the ops torch has."""
    F = torch.nn.functional
    T = lambda a: torch.from_numpy(np.ascontiguousarray(a))  # noqa: E731
    cm = lambda a: T(a)[:, None, :] if a.ndim == 2 else T(a).transpose(1, 2)  # noqa: E731  channel-major

    def epilogue(y, a, i):
        y = F.leaky_relu(y, a["slope"]) if a["act"] == "leaky_relu" else y
        return y.transpose(1, 2).numpy() + (i["res"] if "res" in i else 0)

    def conv(i, w, a):
        y = F.conv1d(cm(i["x"]), T(w["weight"]), T(w["bias"]) if "bias" in w else None, a["stride"], a["padding"],
                     a["dilation"], a["groups"])
        return epilogue(y, a, i)

    def conv_t(i, w, a):
        y = F.conv_transpose1d(cm(i["x"]), T(w["weight"]), T(w["bias"]) if "bias" in w else None, a["stride"],
                               a["padding"], a["output_padding"], a["groups"], a["dilation"])
        return epilogue(y, a, i)

    def linear(i, w, a):
        y = F.linear(T(i["x"]), T(w["weight"]), T(w["bias"]))
        acts = {"none": lambda z: z, "gelu_new": lambda z: F.gelu(z, approximate="tanh"), "tanh": torch.tanh,
                "sigmoid": torch.sigmoid, "relu": F.relu, "leaky_relu": lambda z: F.leaky_relu(z, a["slope"])}
        return acts[a["act"]](y).numpy()

    def adain(i, w, a):
        h = F.linear(T(i["style"]), T(w["fc_w"]), T(w["fc_b"]))
        c = i["x"].shape[2]
        y = (1 + h[:, :c, None]) * F.instance_norm(cm(i["x"]), weight=T(w["norm_w"]), bias=T(w["norm_b"]),
                                                   eps=a["eps"]) + h[:, c:, None]
        if a["act"] == "snake":
            al = T(w["alpha"])
            y = y + (1 / al) * torch.sin(al * y) ** 2
        return (F.leaky_relu(y, a["slope"]) if a["act"] == "leaky_relu" else y).transpose(1, 2).numpy()

    def attention(i, w, a):
        b, t, width = i["q"].shape
        h = a["heads"] if isinstance(a["heads"], int) else a["heads"][str(width)]
        split = lambda z: T(z).reshape(b, t, h, width // h).transpose(1, 2)  # noqa: E731
        mask = torch.arange(t)[None, :] < T(i["lengths"])[:, None]
        y = F.scaled_dot_product_attention(split(i["q"]), split(i["k"]), split(i["v"]), attn_mask=mask[:, None, None, :])
        return y.transpose(1, 2).reshape(b, t, width).numpy()

    def stft(i, w, a):
        z = torch.stft(T(i["x"]), a["n_fft"], a["hop"], window=torch.hann_window(a["n_fft"]), center=True,
                       pad_mode="reflect", return_complex=True).transpose(1, 2)
        return _phase_cut(torch.cat([z.abs(), z.angle()], dim=-1).numpy())

    def istft(i, w, a):
        n = a["n_fft"] // 2 + 1
        mag, ph = T(i["x"][..., :n]), T(i["x"][..., n:])
        if a["spec"] == "exp_sin":
            mag, ph = torch.exp(mag), torch.sin(ph)
        return torch.istft(torch.polar(mag, ph).transpose(1, 2), a["n_fft"], a["hop"],
                           window=torch.hann_window(a["n_fft"]), center=True).numpy()

    def add(i, w, a):
        y = T(i["a"]).clone()
        for r in ("b", "c", "d"):
            if r in i:
                y += T(i[r])
        y = y * a["scale"] / a["divisor"]
        return (F.leaky_relu(y, a["slope"]) if a["act"] == "leaky_relu" else y).numpy()

    return {"conv1d": conv, "conv_transpose1d": conv_t, "linear": linear, "adain": adain, "attention": attention,
            "stft": stft, "istft": istft, "add": add,
            "layer_norm": lambda i, w, a: F.layer_norm(T(i["x"] + i.get("res", 0)), (i["x"].shape[-1],),
                                                       T(w["gamma"]), T(w["beta"]), a["eps"]).numpy(),
            "leaky_relu": lambda i, w, a: F.leaky_relu(T(i["x"]), a["slope"]).numpy(),
            "upsample_nearest": lambda i, w, a: F.interpolate(cm(i["x"]), scale_factor=a["factor"]).transpose(1, 2)
            .numpy().reshape(i["x"].shape[0], -1, *i["x"].shape[2:]),
            "reflection_pad": lambda i, w, a: torch.nn.ReflectionPad1d((a["left"], a["right"]))(cm(i["x"]))
            .transpose(1, 2).numpy().reshape(i["x"].shape[0], -1, *i["x"].shape[2:])}


TORCH_OPS = ("conv1d", "conv_transpose1d", "linear", "adain", "attention", "stft", "istft", "add", "layer_norm",
             "leaky_relu", "upsample_nearest", "reflection_pad")


@pytest.mark.parametrize("op", TORCH_OPS)
def test_references_agree_with_torch(op):
    """The references are what the model means: on every harness case, within f32 rounding of
    torch's own op (bit for bit where the reference replays the f32 steps: add, leaky_relu, copies)."""
    torch = pytest.importorskip("torch")
    fn, defn = _torch_equivalents(torch)[op], OPS[op]
    exact = op in ("add", "leaky_relu", "upsample_nearest", "reflection_pad")
    for case in defn.cases():
        a = with_defaults(defn, case.attrs)
        ref, want = defn.reference(case.inputs, case.weights, a), fn(case.inputs, case.weights, a)
        ref = defn.compare_as(ref) if defn.compare_as else ref
        assert ref.shape == want.shape, (op, case.name)
        limit = 0.0 if exact else 1e-5 * max(1.0, float(np.abs(want).max()))
        assert max_error(ref, want) <= limit, (op, case.name, max_error(ref, want))


@pytest.mark.parametrize("cases, match", [
    ([Case("f64", {"a": np.zeros((1, 2)), "b": np.zeros((1, 2), np.float32)})], r"dtype float64 is none of \['float32', 'int32'\]"),
    ([Case("typo", {"a": np.zeros((1, 2), np.float32), "b": np.zeros((1, 2), np.float32)}, attrs={"scal": 2.0})],
     r"unknown attr\(s\) \['scal'\]"),
    ([Case(n, {"a": np.zeros((1, 2), np.float32), "b": np.zeros((1, 2), np.float32)}, dims={"F": f})
      for n, f in (("one", 3), ("two", 4))], "dim F = 4, another case has 3"),
])
def test_one_op_circuit_refuses_cases_it_cannot_run(cases, match):
    with pytest.raises(OneOpError, match=match):
        op_circuit("add", cases)


def test_one_op_circuit_declares_a_case_dim_past_the_default_max_that_an_input_names_first():
    a = np.zeros((1, DIM_MAX + 44), np.float32)
    doc, _ = op_circuit("add", [Case("wide", {"a": a, "b": a}, dims={"T": DIM_MAX + 44})],
                        shapes={"a": [1, "T"], "b": [1, "T"]})
    assert doc["dims"] == {"T": {"min": 1, "max": DIM_MAX + 44}}


def test_one_op_circuit_runs_every_case_in_one_library():
    rng = np.random.default_rng(1)
    cases = [Case(f"c{k}", {"a": rng.standard_normal((1, 3 + k)).astype(np.float32),
                            "b": rng.standard_normal((1, 3 + k)).astype(np.float32)}, attrs={"divisor": 2.0 + k})
             for k in range(3)]
    doc, _ = op_circuit("add", cases)
    assert [o["out"] for o in doc["blocks"][0]["ops"]] == doc["outputs"] == ["c0_out", "c1_out", "c2_out"]
    outs = run_cases(compile_op("add", cases), cases)
    for k, (case, got) in enumerate(zip(cases, outs)):
        assert np.array_equal(got, (case.inputs["a"] + case.inputs["b"]) / np.float32(2.0 + k))


def test_kernels_constants_come_from_the_c():
    """Every Python mirror of a C bound is the C's #define (kcc.kernels.registry.c_constant)."""
    from kcc.kernels.registry import c_constant, c_defines
    from kcc.ops import adain, attention, conv, dense, dft_conv, fused, recurrence, signal
    assert (conv.GEMM_NR, dense.PANEL, conv.NR) == (16, 16, 8) == (
        c_constant("gemm_tile_f32.c", "KCC_GEMM_NR"), c_constant("gemm_tile_f32.c", "KCC_GEMM_NR"),
        c_constant("conv1d_grouped_f32.c", "KCC_CONV_NR"))
    assert (dft_conv.MAX_N, dft_conv.WORK, dft_conv.VW) == (64, 131072, 16)
    assert (fused.NC_TILE, fused.GEMM_MR, adain.MAX_CHANNELS) == (73728, 8, 2048)
    assert (attention.MAX_HEAD_DIM, recurrence.MAX_HIDDEN, signal.MAX_HARM, signal.MAX_FFT) == (256, 512, 64, 64)
    # The reader: a name defined differently under #if branches has no one value; a missing one is named.
    assert "KCC_X86_PORTABLE" not in c_defines("kcc_common.h") and c_defines("kcc_common.h")["KCC_EDIMS"] == -4
    with pytest.raises(KeyError, match="defines no integer constant KCC_NOPE"):
        c_constant("gemm_tile_f32.c", "KCC_NOPE")


def test_coverage_list_and_ops_without_cases_fail(capsys):
    missing = sorted(n for n, d in OPS.items() if d.cases is None or d.reference is None)
    lines = [f"{op:34s} {len(v['cases'])} cases  {' '.join(v['variants'])}" for op, v in sorted(COVERED.items())]
    lines += [f"{op:34s} NO CASES OR REFERENCE" for op in missing]
    with capsys.disabled():
        print("\nop harness coverage (op, cases, variants):\n  " + "\n  ".join(lines))
    assert missing == [], f"ops without a reference or cases: {missing}"
