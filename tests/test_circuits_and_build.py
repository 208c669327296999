"""Circuit validation rejects each malformed document by name; the build cache is honest."""
from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from kcc.compiler.build import BuildError, BuildOptions, build_library
from kcc.circuits import CircuitError, load_circuit, shipped_circuits, validate_circuit
from kcc.ops import OPS


@pytest.fixture()
def doc():
    return copy.deepcopy(load_circuit("kokoro_embedding"))


def _rejects(doc, match):
    with pytest.raises(CircuitError, match=match):
        validate_circuit(doc, known_ops=set(OPS), source="c")


def test_every_shipped_circuit_validates():
    assert "kokoro_embedding" in shipped_circuits()
    for name in shipped_circuits():
        load_circuit(name)


def test_wrong_schema_version(doc):
    doc["schema"] = "kcc.circuit/0"
    _rejects(doc, r"c.schema: expected 'kcc.circuit/1'")


def test_unknown_op(doc):
    doc["blocks"][0]["ops"][0]["op"] = "embedding_four_tables"
    _rejects(doc, r"c.blocks\[0\].ops\[0\].op: unknown op 'embedding_four_tables'")


def test_dangling_tensor_reference(doc):
    doc["blocks"][0]["ops"][0]["in"]["ids"] = "phoneme_ids"
    _rejects(doc, r"in.ids: tensor 'phoneme_ids' is used before it is defined")


def test_undeclared_weight(doc):
    doc["blocks"][0]["ops"][0]["w"]["word"] = "vocab_table"
    _rejects(doc, r"w.word: weight 'vocab_table' is not declared")


def test_tensor_defined_twice(doc):
    doc["blocks"][0]["ops"].append(copy.deepcopy(doc["blocks"][0]["ops"][0]))
    _rejects(doc, r"ops\[1\].out: tensor 'emb' is defined twice")


def test_bad_dims_and_extents(doc):
    d = copy.deepcopy(doc)
    d["dims"]["T"] = {"min": 5, "max": 2}
    _rejects(d, r"c.dims.T: need 1 <= min <= max")
    d = copy.deepcopy(doc)
    d["inputs"][0]["shape"] = ["B", "L"]
    _rejects(d, r"inputs\[0\].shape\[1\]: extent 'L' is neither")


def test_unknown_keys_and_missing_keys(doc):
    d = copy.deepcopy(doc)
    d["blocks"][0]["ops"][0]["weights"] = {}
    _rejects(d, r"unknown key\(s\) weights")
    d = copy.deepcopy(doc)
    del d["outputs"]
    _rejects(d, r"missing key\(s\) outputs")


def test_output_not_produced(doc):
    doc["outputs"] = ["nothing"]
    _rejects(doc, r"c.outputs\[0\]: 'nothing' is not produced")


def test_checkpoint_problems(doc):
    d = copy.deepcopy(doc)
    d["blocks"][0]["checkpoints"][0]["tensor"] = "input_ids"
    _rejects(d, r"checkpoints\[0\].tensor: 'input_ids' is not produced in this block")
    d = copy.deepcopy(doc)
    d["blocks"][0]["checkpoints"][0]["gate"] = {"max_abs": 1e-3, "why": "x"}
    _rejects(d, r"a loosened gate must say why")


def test_repeat_block_needs_a_carry(doc):
    doc["blocks"][0]["repeat"] = 3
    _rejects(doc, r"a repeated block carries exactly one tensor")


def test_malformed_json_file(tmp_path):
    bad = tmp_path / "broken.json"
    bad.write_text('{"schema": "kcc.circuit/1", ')
    with pytest.raises(CircuitError, match="not valid JSON"):
        load_circuit(bad)
    with pytest.raises(CircuitError, match="no such circuit"):
        load_circuit("no_such_circuit_anywhere")


def test_unknown_op_is_never_compiled(tmp_path, doc):
    from kcc.compiler.driver import compile_circuit
    doc["blocks"][0]["ops"][0]["op"] = "mystery"
    with pytest.raises(CircuitError, match="unknown op 'mystery'"):
        compile_circuit(doc, tmp_path / "unused.pth")


# -- build -------------------------------------------------------------------------------

_SRC = "int kcc_probe(void);\nint kcc_probe(void) { return 42; }\n"


def test_build_is_cached_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path))
    first = build_library(_SRC, name="probe")
    again = build_library(_SRC, name="probe")
    assert not first.cached and again.cached and first.library == again.library
    other = build_library(_SRC + "/* changed */\n", name="probe")
    assert other.key != first.key
    native = build_library(_SRC, BuildOptions(opt="-O3"), name="probe")
    assert native.key != first.key


def test_corrupt_cache_entry_is_rebuilt_not_loaded(tmp_path, monkeypatch):
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path))
    first = build_library(_SRC, name="probe")
    first.library.write_bytes(b"not an ELF file")
    again = build_library(_SRC, name="probe")
    assert not again.cached and again.sha256 == first.sha256
    import ctypes
    assert ctypes.CDLL(str(again.library)).kcc_probe() == 42


def test_compiler_diagnostics_surface(tmp_path, monkeypatch):
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path))
    # gcc's own words reach the user (the flags in the message hold "-Werror" whatever gcc said)
    with pytest.raises(BuildError, match=r"failed on generated circuit 'bad'(.|\n)*unused variable .unused."):
        build_library("int kcc_probe(void);\nint kcc_probe(void) { int unused; return 1; }\n", name="bad")


def test_concurrent_builds_share_one_entry(tmp_path):
    code = ("import sys; from kcc.compiler.build import build_library; "
            f"b = build_library({_SRC!r}, name='race'); print(b.sha256)")
    env = {"KCC_CACHE_DIR": str(tmp_path), "PATH": "/usr/bin:/bin"}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env,
                              cwd=str(__import__("pathlib").Path(__file__).resolve().parent.parent))
             for _ in range(4)]
    digests = {p.communicate()[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(digests) == 1
    assert len(list(tmp_path.glob("race-*.so"))) == 1


# -- cli ---------------------------------------------------------------------------------

def test_cli_xray_prints_pass_and_not_tested(small_ckpt_path, capsys):
    from kcc.cli import main
    assert main(["xray", "kokoro_embedding", "--checkpoint", str(small_ckpt_path)]) == 0
    out = capsys.readouterr().out
    assert "kokoro.phoneme_encoder.embeddings" in out and "PASS" in out and "NOT_TESTED" in out


def test_cli_compile_and_named_errors(small_ckpt_path, tmp_path, capsys):
    from kcc.cli import main
    assert main(["compile", "kokoro_embedding", "--checkpoint", str(small_ckpt_path)]) == 0
    assert "library:" in capsys.readouterr().out
    assert main(["compile", "kokoro_embedding", "--checkpoint", str(tmp_path / "missing.pth")]) == 2
    assert "does not exist" in capsys.readouterr().err
    report = tmp_path / "r.json"
    assert main(["xray", "kokoro_embedding", "--checkpoint", str(small_ckpt_path), "--json", str(report)]) == 0
    assert json.loads(report.read_text())["passed"] is True


def test_an_input_is_not_an_output(doc):
    doc["outputs"] = ["input_ids"]
    _rejects(doc, r"c.outputs\[0\]: 'input_ids' is not produced by any op")


def test_gate_thresholds_must_be_numbers(doc):
    doc["blocks"][0]["checkpoints"][0]["gate"] = {"max_abs": "loose", "why": "a long enough reason"}
    _rejects(doc, r"gate.max_abs: expected a number >= 0")


def test_replanned_dims_are_validated(small_ckpt_path, capsys):
    from kcc.cli import main
    assert main(["compile", "kokoro_embedding", "--checkpoint", str(small_ckpt_path), "--max", "Q=5"]) == 2
    assert "has no dim(s) ['Q'] to re-plan" in capsys.readouterr().err
    assert main(["compile", "kokoro_embedding", "--checkpoint", str(small_ckpt_path), "--max", "T=0"]) == 2
    assert "need 1 <= min <= max" in capsys.readouterr().err
    assert main(["compile", "kokoro_embedding", "--checkpoint", str(small_ckpt_path), "--max", "T"]) == 2
    assert "--max expects DIM=N" in capsys.readouterr().err


def test_cli_voice_and_speed_errors_are_named(small_ckpt_path, tmp_path, capsys):
    from kcc.cli import main
    assert main(["synth", "--ids", "50,83", "-o", str(tmp_path / "x.wav"), "--voice", str(tmp_path / "nosuch.pt"),
                 "--checkpoint", str(small_ckpt_path)]) == 2
    assert f"kcc: UnknownVoiceError: voice file '{tmp_path / 'nosuch.pt'}' does not exist" in capsys.readouterr().err
    assert main(["synth", "--ids", "50,83", "-o", str(tmp_path / "x.wav"), "--speed", "9",
                 "--checkpoint", str(small_ckpt_path)]) == 2
    assert "kcc: RequestError: speed must be between 0.25 and 4.0, got 9" in capsys.readouterr().err
    assert not (tmp_path / "x.wav").exists()


def test_compiled_stages_release_the_checkpoint_and_run(small_ckpt_path):
    """The weight blob is a copy: neither a compiled circuit nor the Synthesizer keeps the
    checkpoint's arrays alive (at the full config they are ~330 MB of the peak RSS)."""
    import gc
    import weakref

    import numpy as np

    from kcc.weights.checkpoint import load_checkpoint
    from kcc.model.pipeline import Synthesizer

    ck = load_checkpoint(small_ckpt_path)
    gone = [weakref.ref(ck), weakref.ref(ck.tensors["bert.embeddings.word_embeddings.weight"])]
    synth = Synthesizer(ck, stages=["kokoro_phoneme_encoder"])
    del ck
    gc.collect()
    assert [r() for r in gone] == [None, None]
    assert synth.checkpoint_path == small_ckpt_path
    tokens = np.array([[0, 50, 83, 0]], dtype=np.int32)
    env = {"input_ids": tokens, "token_type_ids": np.zeros_like(tokens), "lengths": np.array([4], np.int32)}
    synth.run(env)
    assert env["d_en"].shape == (1, 4, 512) and np.isfinite(env["d_en"]).all()   # run from the blob alone
