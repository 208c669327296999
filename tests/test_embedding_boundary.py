"""The first generated-C boundary: ALBERT embeddings, compiled, run, and X-Rayed.

Covers the foundation's contract: parity on the pinned 36-token ids (small and full config),
boring failure (bad id, short or misaligned arena -> nonzero status, canary untouched),
sequential arena reuse, read-only weights, and provenance of the loaded library.
"""
from __future__ import annotations

import copy
import hashlib
import shutil
import subprocess

import numpy as np
import pytest

from kcc.compiler.build import STRICT_FLAGS

from kcc.files import file_sha256
from kcc.weights.checkpoint import checkpoint_digest
from kcc.compiler.runtime import KccRunError, aligned_empty
from kcc.compiler.driver import compile_circuit
from kcc.compiler.xray import FP32_GATE, PinnedCaptureError, find_capture, load_pinned, render, xray_compiled

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

CANARY = -777.0


@pytest.fixture(scope="module")
def emb_small(small_ckpt):
    return compile_circuit("kokoro_embedding", small_ckpt)


@pytest.fixture(scope="module")
def pinned_small():
    return load_pinned("embedding", "small")


def _io(compiled, ids):
    ids = np.ascontiguousarray(ids, dtype=np.int32)
    out = np.full((*ids.shape, 128), CANARY, dtype=np.float32)
    return [ids, np.zeros_like(ids)], list(ids.shape), [out]


@pytest.mark.parametrize("ckpt", ["small", pytest.param("full", marks=pytest.mark.full)], indirect=True)
def test_parity_with_pinned_capture(ckpt):
    config = find_capture("embedding", checkpoint_digest(ckpt))
    pinned = load_pinned("embedding", config)
    assert pinned.inputs["input_ids"].shape == (1, 36)
    report = xray_compiled(compile_circuit("kokoro_embedding", ckpt), pinned)
    r = report.result("kokoro.phoneme_encoder.embeddings")
    assert r.status == "PASS", r.reason
    assert r.cosine >= FP32_GATE.min_cosine
    assert r.max_abs <= 2e-5 and r.rmse <= 2e-5 and r.rel_rmse <= 2e-5 and r.finite
    text = render(report)
    assert "PASS" in text and "complete_kokoro_encoder" in text
    assert "NOT_TESTED" in text  # every unevidenced stage says so
    print(text)


def test_one_checkpoint_circuit_compares_as_itself(emb_small, pinned_small):
    report = xray_compiled(emb_small, pinned_small)
    assert [r.name for r in report.results] == ["kokoro.phoneme_encoder.embeddings"]
    assert report.passed


def test_invalid_id_leaves_output_untouched(emb_small, pinned_small):
    ids = pinned_small.inputs["input_ids"].copy()
    ids[0, -1] = 178  # the vocabulary size: one past the last valid id
    ins, dims, outs = _io(emb_small, ids)
    status, msg = emb_small.call(ins, dims, outs, emb_small.new_arena())
    assert status != 0
    assert "rejected its input" in msg
    assert np.all(outs[0] == CANARY)
    with pytest.raises(KccRunError, match="status -1"):
        emb_small.run({"input_ids": ids, "token_type_ids": np.zeros_like(ids)})


def test_negative_id_and_bad_type_id_rejected(emb_small, pinned_small):
    for field, value in (("ids", -1), ("types", 2)):
        ids = pinned_small.inputs["input_ids"].copy()
        ins, dims, outs = _io(emb_small, ids)
        if field == "ids":
            ins[0][0, 3] = value
        else:
            ins[1][0, 3] = value
        status, _ = emb_small.call(ins, dims, outs, emb_small.new_arena())
        assert status == -1 and np.all(outs[0] == CANARY)


def test_arena_one_byte_short_returns_minus_2(emb_small, pinned_small):
    ins, dims, outs = _io(emb_small, pinned_small.inputs["input_ids"])
    arena = emb_small.new_arena()
    status, msg = emb_small.call(ins, dims, outs, arena, arena_bytes=emb_small.plan.arena_bytes - 1)
    assert status == -2 and "smaller than the planned" in msg
    assert np.all(outs[0] == CANARY)


def test_arena_one_byte_misaligned_returns_minus_2(emb_small, pinned_small):
    ins, dims, outs = _io(emb_small, pinned_small.inputs["input_ids"])
    arena = aligned_empty(emb_small.plan.arena_bytes, emb_small.plan.alignment, offset=1)
    assert arena.ctypes.data % 64 == 1
    status, msg = emb_small.call(ins, dims, outs, arena)
    assert status == -2 and "aligned" in msg
    assert np.all(outs[0] == CANARY)


def test_wrong_weight_blob_refused(emb_small, pinned_small):
    ins, dims, outs = _io(emb_small, pinned_small.inputs["input_ids"])
    short = aligned_empty(emb_small.weights.nbytes - 64)
    status, msg = emb_small.call(ins, dims, outs, emb_small.new_arena(), weights=short)
    assert status == -3 and "weight blob" in msg and np.all(outs[0] == CANARY)


def test_dims_outside_plan_refused_in_c_and_python(emb_small, pinned_small):
    ins, _, outs = _io(emb_small, pinned_small.inputs["input_ids"])
    status, msg = emb_small.call(ins, [1, 513], outs, emb_small.new_arena())
    assert status == -4 and "dim T" in msg and np.all(outs[0] == CANARY)
    too_long = np.zeros((1, 513), dtype=np.int32)
    with pytest.raises(ValueError, match=r"dim T = 513 is outside the planned range \[1, 512\]"):
        emb_small.run({"input_ids": too_long, "token_type_ids": too_long})


def test_sequential_arena_reuse_gives_fresh_valid_outputs(emb_small, pinned_small):
    arena = emb_small.new_arena()
    ids = pinned_small.inputs["input_ids"]
    first = emb_small.run({"input_ids": ids, "token_type_ids": np.zeros_like(ids)}, arena=arena).outputs["emb"]
    zeros = np.zeros_like(ids)
    second = emb_small.run({"input_ids": zeros, "token_type_ids": zeros}, arena=arena).outputs["emb"]
    assert np.isfinite(second).all() and not np.allclose(first, second)
    fresh = emb_small.run({"input_ids": zeros, "token_type_ids": zeros}).outputs["emb"]
    np.testing.assert_array_equal(second, fresh)
    np.testing.assert_allclose(first, pinned_small.checkpoints["kokoro.phoneme_encoder.embeddings"], atol=2e-5)


def test_caller_owned_output_is_written_in_place(emb_small, pinned_small):
    ids = pinned_small.inputs["input_ids"]
    ins = {"input_ids": ids, "token_type_ids": np.zeros_like(ids)}
    buf = np.full((*ids.shape, 128), CANARY, dtype=np.float32)
    got = emb_small.run(ins, out={"emb": buf}).outputs["emb"]
    assert got is buf
    np.testing.assert_array_equal(buf, emb_small.run(ins).outputs["emb"])
    np.testing.assert_allclose(buf, pinned_small.checkpoints["kokoro.phoneme_encoder.embeddings"], atol=2e-5)


@pytest.mark.parametrize("bad, match", [
    (lambda ids: np.full((*ids.shape, 127), CANARY, np.float32), r"out 'emb': float32 \(1, 36, 127\), expected float32 \(1, 36, 128\)"),
    (lambda ids: np.full((*ids.shape, 128), CANARY, np.float64), "out 'emb': float64"),
    (lambda ids: np.full((*ids.shape, 256), CANARY, np.float32)[..., ::2], "C-contiguous and writeable"),
    (lambda ids: np.full((*ids.shape, 128), CANARY, np.float32).view(), "C-contiguous and writeable"),
])
def test_bad_caller_owned_output_is_refused_untouched(emb_small, pinned_small, bad, match):
    ids = pinned_small.inputs["input_ids"]
    buf = bad(ids)
    if buf.shape[-1] == 128 and buf.dtype == np.float32 and buf.flags.c_contiguous:
        buf.flags.writeable = False
    with pytest.raises(ValueError, match=match):
        emb_small.run({"input_ids": ids, "token_type_ids": np.zeros_like(ids)}, out={"emb": buf})
    assert np.all(buf == CANARY)


def test_caller_owned_output_must_be_an_output_and_not_alias_an_input(emb_small, pinned_small):
    ids = np.ascontiguousarray(pinned_small.inputs["input_ids"])
    with pytest.raises(ValueError, match=r"out \['nope'\]: not outputs of this circuit"):
        emb_small.run({"input_ids": ids, "token_type_ids": np.zeros_like(ids)}, out={"nope": np.zeros(1)})
    raw = np.zeros(ids.size * 128, np.float32)
    alias = raw.view(np.int32)[:ids.size].reshape(ids.shape)
    alias[:] = ids
    with pytest.raises(ValueError, match="out 'emb': shares memory with an input"):
        emb_small.run({"input_ids": alias, "token_type_ids": np.zeros_like(ids)}, out={"emb": raw.reshape(*ids.shape, 128)})
    np.testing.assert_array_equal(alias, ids)


def test_variable_length_without_recompiling(emb_small, pinned_small):
    ids = pinned_small.inputs["input_ids"]
    ref = pinned_small.checkpoints["kokoro.phoneme_encoder.embeddings"]
    for n in (1, 7, 36):
        out = emb_small.run({"input_ids": ids[:, :n], "token_type_ids": np.zeros_like(ids[:, :n])}).outputs["emb"]
        np.testing.assert_allclose(out, ref[:, :n], atol=2e-5)


def test_weights_hashed_before_and_after_are_unchanged(emb_small, small_ckpt, pinned_small):
    def digests():
        blob = emb_small.weights
        return {n: hashlib.sha256(blob[b.offset:b.offset + b.nbytes].tobytes()).hexdigest()
                for n, b in emb_small.plan.weights.items()}
    before = digests()
    src_before = {w.ref: small_ckpt.sha256(w.ref) for w in emb_small.graph.weights.values()}
    assert set(before) == {"word", "position", "token_type", "ln_gamma", "ln_beta"}
    ids = pinned_small.inputs["input_ids"]
    emb_small.run({"input_ids": ids, "token_type_ids": np.zeros_like(ids)})
    bad = ids.copy()
    bad[0, 0] = 999
    with pytest.raises(KccRunError):
        emb_small.run({"input_ids": bad, "token_type_ids": np.zeros_like(ids)})
    assert digests() == before
    assert {w.ref: small_ckpt.sha256(w.ref) for w in emb_small.graph.weights.values()} == src_before
    for w in emb_small.graph.weights.values():
        assert w.sha256 == small_ckpt.sha256(w.ref)


def test_provenance_records_the_loaded_library(emb_small, pinned_small):
    report = xray_compiled(emb_small, pinned_small)
    cand = report.candidate
    assert cand["backend"] == "kcc" and cand["source"] == "generated_native"
    assert cand["library_path"] == emb_small.library_path
    assert cand["library_sha256"] == file_sha256(emb_small.built.library)
    assert report.reference["backend"] == "pytorch" and report.reference["source"] == "pinned_capture"
    assert report.reference["versions"]["kokoro"] == "0.9.4"
    assert report.reference["versions"]["torch"].startswith("2.13.0")


def test_generated_c_compiles_with_the_strict_flags(emb_small, tmp_path):
    for flag in STRICT_FLAGS:
        assert flag in emb_small.built.flags
    src = tmp_path / "unit.c"
    src.write_text(emb_small.source)
    proc = subprocess.run(["cc", *STRICT_FLAGS, "-c", str(src), "-o", str(tmp_path / "unit.o")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_drifted_fixture_is_refused(tmp_path):
    from kcc.compiler.xray import FIXTURES
    for f in ("MANIFEST.json", "embedding.small.npz"):
        shutil.copy(FIXTURES / f, tmp_path / f)
    raw = bytearray((tmp_path / "embedding.small.npz").read_bytes())
    raw[-100] ^= 0x01
    (tmp_path / "embedding.small.npz").write_bytes(bytes(raw))
    with pytest.raises(PinnedCaptureError, match="drifted; refusing to compare"):
        load_pinned("embedding", "small", root=tmp_path)
    (tmp_path / "embedding.small.npz").unlink()
    with pytest.raises(PinnedCaptureError, match="missing"):
        load_pinned("embedding", "small", root=tmp_path)
    with pytest.raises(PinnedCaptureError, match="not recorded"):
        load_pinned("embedding", "nosuchconfig", root=tmp_path)


def test_xray_fails_a_wrong_candidate(pinned_small):
    from kcc.compiler.xray import compare
    ref = pinned_small.checkpoints
    name = "kokoro.phoneme_encoder.embeddings"
    off = copy.deepcopy(ref)
    off[name] = off[name].copy()
    off[name][0, 5, 7] += 1e-3
    report = compare("kokoro_embedding", ref, off, [name], {}, {})
    r = report.result(name)
    assert r.status == "FAIL" and r.worst_index == (0, 5, 7) and "max_abs" in r.reason
    nan = {name: np.full_like(ref[name], np.nan)}
    assert compare("x", ref, nan, [name], {}, {}).result(name).status == "FAIL"
    missing = compare("x", ref, {}, [name], {}, {})
    assert missing.result(name).reason == "not produced by the candidate"
