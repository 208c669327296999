"""kcc.compiler.costs formulas against hand-computed counts, and `kcc report` on real circuits (small config)."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from kcc.compiler.costs import graph_costs, op_cost
from kcc.compiler.lower import lower_circuit
from kcc.compiler.one_op import op_circuit
from kcc.ops import OPS, Case
from kcc.ops.dense import int8_exact
from kcc.compiler.report import ReportError, Roofline, build_report, measure_roofline, parse_dims, render

RF = Roofline(bandwidth=20e9, peak=50e9, threads=1, how="fixed for the test")


def _one_op(op: str, inputs: dict, weights: dict, attrs: dict):
    """One op lowered as written (no passes) over seeded weights; inputs maps each role to its
    shape, naming the runtime dims B (max 2) and T (max 64); `lengths` is i32, the rest f32."""
    rng = np.random.default_rng(0)
    case = Case("cost", {r: np.zeros([1 if isinstance(e, str) else e for e in shape],
                                     np.int32 if r == "lengths" else np.float32)
                         for r, shape in inputs.items()},
                {k: rng.standard_normal(s).astype(np.float32) for k, s in weights.items()}, attrs)
    doc, ckpt = op_circuit(op, [case], shapes=inputs, dim_max={"B": 2, "T": 64})
    return lower_circuit(doc, ckpt, [])


def test_linear_cost_matches_hand_formula():
    g, packed = _one_op("linear", {"x": ["B", "T", 96]}, {"weight": (40, 96), "bias": (40,)}, {})
    c = op_cost(g, g.ops[0], {"B": 2, "T": 36})
    m, k, n = 2 * 36, 96, 40
    assert c.flops == 2 * m * k * n + m * n                      # multiply-adds + bias
    assert c.bytes_in == m * k * 4 and c.bytes_out == m * n * 4
    assert c.bytes_w == sum(a.nbytes for a in packed.values())   # the packed panels, zero padding included
    assert c.bytes_w == (48 * 96 + 40) * 4                       # 40 columns padded to 3 panels of 16


def test_linear_activation_is_one_op_per_output():
    g, _ = _one_op("linear", {"x": ["B", "T", 8]}, {"weight": (8, 8), "bias": (8,)}, {"act": "leaky_relu"})
    c = op_cost(g, g.ops[0], {"B": 1, "T": 10})
    assert c.flops == 2 * 10 * 8 * 8 + 10 * 8 + 10 * 8 and c.fused == "leaky_relu"


@pytest.mark.parametrize("attrs,k,t_out,groups", [
    ({"padding": 2}, 5, 36, 1),                                   # 'same', GEMM path
    ({"padding": 1, "stride": 2}, 3, (36 + 2 - 3) // 2 + 1, 1),   # strided, general path
    ({"padding": 1, "groups": 64}, 3, 36, 64),                    # depthwise
])
def test_conv1d_cost_matches_hand_formula(attrs, k, t_out, groups):
    c_in, c_out = 64, 64 if groups > 1 else 96
    g, packed = _one_op("conv1d", {"x": ["B", "T", c_in]}, {"weight": (c_out, c_in // groups, k), "bias": (c_out,)}, attrs)
    c = op_cost(g, g.ops[0], {"B": 1, "T": 36})
    assert c.flops == 2 * t_out * c_out * (c_in // groups) * k + t_out * c_out
    assert c.bytes_out == t_out * c_out * 4 and c.bytes_in == 36 * c_in * 4
    assert c.bytes_w == sum(a.nbytes for a in packed.values())


def test_conv_transpose1d_cost_matches_hand_formula():
    g, _ = _one_op("conv_transpose1d", {"x": ["B", "T", 64]}, {"weight": (64, 32, 4), "bias": (32,)},
                   {"stride": 2, "padding": 1})
    c = op_cost(g, g.ops[0], {"B": 1, "T": 20})
    t_out = (20 - 1) * 2 - 2 + 4
    assert c.bytes_out == t_out * 32 * 4
    assert c.flops == 2 * 20 * 64 * 32 * 4 + t_out * 32       # each input row scatters to Cout*K outputs


def test_attention_cost_matches_hand_formula():
    g, _ = _one_op("attention", {r: ["B", "T", 64] for r in "qkv"} | {"lengths": ["B"]}, {}, {"heads": 4})
    b, t, w, h = 1, 36, 64, 4
    c = op_cost(g, g.ops[0], {"B": b, "T": t})
    assert c.flops == 4 * b * t * t * w + 5 * b * h * t * t + b * t * w    # QK^T + PV, softmax, 1/sum
    assert c.bytes_in == 3 * b * t * w * 4 + b * 4 and c.bytes_w == 0


def test_every_op_type_has_a_formula():
    assert sorted(name for name, d in OPS.items() if d.cost is None) == []


def test_parse_dims():
    assert parse_dims("T=36, F=200") == {"T": 36, "F": 200}
    assert parse_dims(None) == parse_dims("") == parse_dims(",") == {}


@pytest.mark.parametrize("dims, match", [
    ({"Q": 3}, r"circuit 'kokoro_embedding': no dim\(s\) \['Q'\]"),
    ({"T": 0}, "dim T = 0 is below its minimum 1"),
])
def test_build_report_refuses_dims_it_cannot_cost(small_ckpt_path, dims, match):
    with pytest.raises(ReportError, match=match):
        build_report("kokoro_embedding", small_ckpt_path, dims)


@pytest.mark.parametrize("spec", ["T36", "T=", "=3", "T=-1", "T=3.5", "T=x"])
def test_parse_dims_refuses_what_is_not_name_equals_integer(spec):
    with pytest.raises(ReportError, match=f"--dims: '{re.escape(spec)}' is not NAME=INTEGER"):
        parse_dims(spec)


@pytest.mark.parametrize("flags, match", [
    ([], "no checkpoint"),
    (["--bandwidth", "10"], "--bandwidth without --peak"),
    (["--peak", "100"], "--peak without --bandwidth"),
    (["--bandwidth", "0", "--peak", "100"], "must be positive, got 0.0 and 100.0"),
    (["--bandwidth", "10", "--peak", "nan"], "must be positive"),
])
def test_cli_report_refuses_arguments_by_name_before_measuring(small_ckpt_path, flags, match, monkeypatch,
                                                               capsys):
    from kcc.cli import main
    from kcc.compiler import report
    monkeypatch.delenv("KCC_CHECKPOINT", raising=False)
    monkeypatch.setattr(report, "measure_roofline", lambda *a: pytest.fail("measured before refusing"))
    ckpt = ["--checkpoint", str(small_ckpt_path)] if flags else []
    assert main(["report", "kokoro_embedding", *ckpt, *flags]) == 2
    err = capsys.readouterr().err
    assert "ReportError" in err and match in err


def test_report_embedding(small_ckpt_path):
    r = build_report("kokoro_embedding", small_ckpt_path, {"B": 1, "T": 36}, roofline=RF)
    (c,) = r.costs
    from kcc.weights.checkpoint import load_checkpoint
    ck = load_checkpoint(small_ckpt_path)
    chan = ck.get("bert.embeddings.word_embeddings.weight").shape[1]
    # ids + type ids; one row of each of the three tables per token; gamma, beta; the output
    assert c.bytes_in == 2 * 36 * 4 and c.bytes_out == 36 * chan * 4
    rows = [ck.get(f"bert.embeddings.{t}_embeddings.weight").shape[0] for t in ("word", "position", "token_type")]
    assert c.bytes_w == (sum(min(n, 36) for n in rows) + 2) * chan * 4
    assert c.flops == 10 * 36 * chan
    assert r.bound_s() == pytest.approx(max(c.bytes / RF.bandwidth, c.flops / RF.peak))
    assert r.arena_bytes_at < r.arena_bytes_max
    text = render(r)
    assert "embedding_three_table_layer_norm" in text and "bound" in text


def test_report_generator_fusion_keeps_flops_and_cuts_bytes(small_ckpt_path):
    from kcc.compiler.passes import FUSION_PASSES
    dims = {"B": 1, "N": 40}
    fused = build_report("kokoro_generator", small_ckpt_path, dims, passes=FUSION_PASSES, roofline=RF)
    plain = build_report("kokoro_generator", small_ckpt_path, dims, passes=[], roofline=RF)
    spectral = build_report("kokoro_generator", small_ckpt_path, dims, roofline=RF)   # DEFAULT_PASSES
    # block-DFT convolutions change the arithmetic: K 7 / 11 convs at under half the FLOPs
    assert spectral.flops < 0.6 * plain.flops
    assert "dft_conv1d" in {c.type for c in spectral.costs}
    assert not fused.notes and not plain.notes
    assert all(c.flops is not None for c in fused.costs)
    # fusion rewrites ops, never the arithmetic: the same FLOPs, fewer bytes through memory
    assert fused.flops == plain.flops
    assert fused.bytes < plain.bytes and len(fused.costs) < len(plain.costs)
    convs = sum(c.flops for c in plain.costs if c.type in ("conv1d", "conv_transpose1d"))
    assert convs / plain.flops > 0.95                     # the vocoder is its convolutions
    assert fused.bound_s() == pytest.approx(sum(max(c.bytes / RF.bandwidth, c.flops / RF.peak) for c in fused.costs))
    js = fused.to_json()
    assert js["flops"] == fused.flops and len(js["ops"]) == len(fused.costs)
    json.dumps(js)
    # costs scale with the runtime dim: twice the frames, about twice the work
    double = graph_costs(_generator_graph(small_ckpt_path), {"B": 1, "N": 80})
    assert 1.9 < sum(c.flops for c in double) / fused.flops < 2.1


def _generator_graph(ckpt):
    from kcc.weights.checkpoint import load_checkpoint
    from kcc.circuits import load_circuit
    from kcc.compiler.passes import FUSION_PASSES
    g, _ = lower_circuit(load_circuit("kokoro_generator"), load_checkpoint(ckpt), FUSION_PASSES)
    return g


def test_measured_roofline_is_plausible():
    rf = measure_roofline(threads=1, triad_floats=1 << 20, gemm_n=256, reps=2)
    assert 1e8 < rf.bandwidth < 1e13 and 1e8 < rf.peak < 1e13 and rf.threads == 1
    assert "triad 3 x 4 MiB" in rf.how and "kcc_linear_f32 256^3" in rf.how and "1 thread)" in rf.how
    # an op's bound is its slower side: 1 MB at the bandwidth vs 1 MFLOP at the peak
    op = type("C", (), {"bytes": 1e6, "flops": 1e6})()
    assert rf.bound(op) == max(1e6 / rf.bandwidth, 1e6 / rf.peak)


def test_cli_report(small_ckpt_path, tmp_path, capsys):
    from kcc.cli import main
    out = tmp_path / "r.json"
    assert main(["report", "kokoro_embedding", "--checkpoint", str(small_ckpt_path), "--dims", "B=1,T=16",
                 "--bandwidth", "10", "--peak", "100", "--json", str(out)]) == 0
    js = json.loads(out.read_text())
    assert js["dims"] == {"B": 1, "T": 16} and js["roofline"]["bandwidth_Bps"] == 10e9
    assert "FLOP/B" in capsys.readouterr().out
    assert main(["report", "kokoro_embedding", "--checkpoint", str(small_ckpt_path), "--dims", "Q=3",
                 "--no-roofline"]) == 2


def test_profile_build_times_every_op_and_plain_build_refuses(small_ckpt_path, tmp_path, capsys):
    """BuildOptions(profile=True): op_seconds has one positive time per op of the last run; a
    plain build has no timing table and says so; `kcc report --measure` prints the column."""
    from kcc.compiler.build import BuildOptions
    from kcc.cli import main
    from kcc.compiler.runtime import KccRunError
    from kcc.compiler.driver import compile_circuit
    ins = {"input_ids": np.arange(1, 17, dtype=np.int32)[None], "token_type_ids": np.zeros((1, 16), np.int32)}
    prof = compile_circuit("kokoro_embedding", small_ckpt_path, BuildOptions(profile=True))
    prof.run(ins)
    times = prof.op_seconds()
    assert list(times) == [op.name for op in prof.graph.ops] and all(t > 0 for t in times.values())
    plain = compile_circuit("kokoro_embedding", small_ckpt_path)
    plain.run(ins)
    with pytest.raises(KccRunError, match="not built with profile=True"):
        plain.op_seconds()
    out = tmp_path / "m.json"
    assert main(["report", "kokoro_embedding", "--checkpoint", str(small_ckpt_path), "--dims", "B=1,T=16",
                 "--bandwidth", "10", "--peak", "100", "--measure", "--json", str(out)]) == 0
    assert "meas ms" in capsys.readouterr().out
    assert all(op["measured_s"] > 0 for op in json.loads(out.read_text())["ops"])


@pytest.mark.parametrize("op", ["dft_conv1d", "dft_conv1d_bf16"])
def test_block_dft_convs_are_charged_the_one_weight_layout_they_read(op):
    """Both precisions hold the weight twice (direct layout, spectrum) and read the spectrum only
    from min_rows input rows on; the cost names the transform size among the fusions."""
    g, packed = lower_circuit(*op_circuit(op, OPS[op].cases()), [])
    layouts_seen = set()
    for o in g.ops:
        b, t, _ = g.tensors[o.inputs["x"]].shape
        layout = "spectrum" if b * t >= o.attrs["min_rows"] else "weight"
        layouts_seen.add(layout)
        c = op_cost(g, o, {})
        assert c.bytes_w == packed[o.weights[layout]].nbytes + packed[o.weights["bias"]].nbytes, o.name
        assert f"dft{o.attrs['n']}" in c.fused.split(","), (o.name, c.fused)
    assert layouts_seen == {"spectrum", "weight"}     # the cases cover both sides of min_rows


@pytest.mark.parametrize("op", ["embedding", "embedding_q8"])
def test_lookups_are_charged_the_table_rows_they_read(op):
    """A lookup of fewer ids than table rows reads one packed row per id (int8 rows with their
    scale for embedding_q8), not the table."""
    rows, chan = 40, 130
    table = int8_exact(np.random.default_rng(3), rows, chan)          # storable either way
    case = Case("three_ids", {"ids": np.array([[0, 7, rows - 1]], np.int32)}, {"table": table})
    g, packed = lower_circuit(*op_circuit(op, [case]), [])
    (table_w,) = packed.values()
    assert table_w.shape[0] == rows
    assert op_cost(g, g.ops[0], {}).bytes_w == 3 * table_w.nbytes // rows
