"""Forced x86-64 dispatch levels (kcc/compiler/isa.py, KCC_ISA / BuildOptions.isa): every path a CPU can
take from the portable build runs on this machine, and each gives the bits its design promises.

The clones keep every lane's summation order and contract no FMA, so the levels differ only in
the GEMM tiles' multiply-add: unfused (baseline, avx2) or fused (avx2fma, avx512). Within each
pair the whole synthesis is bit-identical; the default build takes the top level this CPU runs;
and every level holds the FP32 gate against upstream's pinned capture through the decoder.
"""
from __future__ import annotations

import numpy as np
import pytest

from kcc.compiler.build import BuildOptions
from kcc.compiler.isa import LEVELS, IsaError, dispatched_level, library_level, runnable_levels

RUNNABLE = runnable_levels()
pytestmark = pytest.mark.skipif(not RUNNABLE, reason="dispatch levels exist on x86-64 only")
GATED = ["kokoro.phoneme_encoder.bert_encoder", "kokoro.text_encoder.output", "kokoro.predictor.durations",
         "kokoro.predictor.expanded", "kokoro.predictor.n", "kokoro.decoder.generator_input"]


@pytest.fixture(scope="module")
def pinned():
    from kcc.compiler.xray import load_pinned
    return load_pinned("full_model", "small")


def _synthesise(ckpt, pinned, isa):
    from kcc.model.pipeline import NOISE, Synthesizer
    from oracle.captures.full_model import upstream_random_inputs
    synth = Synthesizer(ckpt, BuildOptions(isa=isa), max_frames=200)
    ref_s = pinned.inputs["ref_s"]
    env = {k: pinned.inputs[k] for k in ("input_ids", "token_type_ids", "lengths", "speed")}
    env.update(style_dec=ref_s[:, :128].copy(), style_pred=ref_s[:, 128:].copy())
    env.update(upstream_random_inputs(2 * int(pinned.checkpoints["kokoro.predictor.durations"].sum())))
    checkpoints, _ = synth.run(env, with_checkpoints=True, skip=(NOISE,))
    levels = {library_level(c.lib) for c in synth.circuits.values()}
    return {**checkpoints, "kokoro.waveform": env["waveform"]}, levels


@pytest.fixture(scope="module")
def runs(small_ckpt, pinned):
    return {isa: _synthesise(small_ckpt, pinned, isa) for isa in [None, *RUNNABLE]}


def test_each_library_runs_the_forced_level(runs):
    for isa in RUNNABLE:
        assert runs[isa][1] == {isa}
    assert runs[None][1] == {dispatched_level()}     # the load-time dispatch: v4, else v3, else default


@pytest.mark.parametrize("pair", [("baseline", "avx2"), ("avx2fma", "avx512"), (None, "top")])
def test_levels_that_share_the_multiply_add_give_identical_bits(runs, pair):
    a, b = (dispatched_level() if x == "top" else x for x in pair)
    if a not in runs or b not in runs:
        pytest.skip(f"this CPU cannot execute {a} and {b}")
    ra, rb = runs[a][0], runs[b][0]
    assert ra.keys() == rb.keys() and len(ra) > 60           # every stage checkpoint and the waveform
    for name in ra:
        np.testing.assert_array_equal(ra[name], rb[name], err_msg=f"{a} vs {b}: {name}")


@pytest.mark.parametrize("isa", LEVELS)
def test_every_level_holds_the_gate_to_the_decoder(runs, pinned, isa):
    from kcc.compiler.xray import compare, render
    if isa not in runs:
        pytest.skip(f"this CPU cannot execute {isa}")
    report = compare(f"kokoro_{isa}", pinned.checkpoints, runs[isa][0], GATED, {"backend": "kcc"}, pinned.meta)
    for name in GATED:
        assert report.result(name).status == "PASS", render(report)


def test_env_forces_portable_builds_only(monkeypatch):
    monkeypatch.setenv("KCC_ISA", "baseline")
    assert "-DKCC_ISA_LEVEL=0" in BuildOptions().flags()
    assert f"-DKCC_ISA_LEVEL={LEVELS.index(RUNNABLE[-1])}" in BuildOptions(isa=RUNNABLE[-1]).flags()   # explicit wins
    assert not any(f.startswith("-DKCC_ISA_LEVEL") for f in BuildOptions(native=True).flags())
    monkeypatch.setenv("KCC_ISA", "auto")
    assert not any(f.startswith("-DKCC_ISA_LEVEL") for f in BuildOptions().flags())


def _unknown(monkeypatch):
    return BuildOptions(isa="avx3")


def _unknown_env(monkeypatch):
    monkeypatch.setenv("KCC_ISA", "sse9")
    return BuildOptions()


def _cpu_lacks_it(monkeypatch):
    import kcc.compiler.isa
    monkeypatch.setattr(kcc.compiler.isa, "_cpu_flags", lambda: {"sse2", "avx2"})
    return BuildOptions(isa="avx512")


def _native_and_forced(monkeypatch):
    return BuildOptions(native=True, isa="baseline")


def _not_x86(monkeypatch):
    import kcc.compiler.isa
    monkeypatch.setattr(kcc.compiler.isa.platform, "machine", lambda: "aarch64")
    return BuildOptions(isa="baseline")


@pytest.mark.parametrize("make, why", [
    (_unknown, "unknown dispatch level 'avx3'"), (_unknown_env, "unknown dispatch level 'sse9'"),
    (_cpu_lacks_it, r"cannot execute dispatch level 'avx512' \(missing .*avx512f"),
    (_native_and_forced, "a native build has none"), (_not_x86, "is x86-64 only; this machine is aarch64")])
def test_a_level_that_cannot_apply_is_refused_before_the_compiler_runs(monkeypatch, make, why):
    with pytest.raises(IsaError, match=why):
        make(monkeypatch).flags()


def test_the_c_header_refuses_a_level_out_of_range(tmp_path):
    """A hand-made -DKCC_ISA_LEVEL outside 0..3 stops the compile (no silent baseline)."""
    import subprocess
    from kcc.compiler.build import compiler
    from kcc.compiler.emit import COMMON_HEADER
    src = tmp_path / "t.c"
    src.write_text(COMMON_HEADER.read_text() + "int main(void) { return kcc_isa_level_now(); }\n")
    proc = subprocess.run([compiler(), "-std=c11", "-DKCC_ISA_LEVEL=7", "-c", str(src), "-o", str(tmp_path / "t.o")],
                          capture_output=True, text=True)
    assert proc.returncode != 0 and "KCC_ISA_LEVEL is 0" in proc.stderr
