"""The wheel: `python -m build` makes a wheel and an sdist; the wheel carries the default build's
prebuilt stage libraries, and installed into a clean venv (no checkout on sys.path) it speaks on
a machine with no C compiler on PATH (scripts/wheel_check.py does the work; CI also runs it with
the dependencies installed from the index). Built here without build isolation and installed
with the running venv's dependencies (--deps shared), so it needs no network. Slow (a wheel
build compiles every stage for x86-64 and aarch64): `pytest -m wheel` runs it alone. The time to
the WAV is printed, not asserted (bench/results/wheel_first_say.md records it)."""
from __future__ import annotations

import hashlib
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
try:
    import aarch64_parity as ap
    import wheel_check as wc
finally:
    sys.path.pop(0)

pytestmark = [pytest.mark.wheel, pytest.mark.tools("gcc", "aarch64-linux-gnu-gcc")]

STAGES = {"kokoro_phoneme_encoder", "kokoro_text_encoder", "kokoro_duration", "kokoro_prosody",
          "kokoro_decoder", "kokoro_source_noise", "kokoro_generator"}


@pytest.fixture(scope="module")
def dist(tmp_path_factory):
    return wc.build(tmp_path_factory.mktemp("dist"), isolation=False)


@pytest.fixture(scope="module")
def venv(dist, tmp_path_factory):
    where = tmp_path_factory.mktemp("venv") / "v"
    wc.make_venv(where, dist.wheel, "shared")
    return where


def test_wheel_carries_a_prebuilt_library_per_stage_and_machine_and_is_tagged_by_them(dist):
    tables = wc.prebuilt_machines(dist.wheel)
    want = {"x86_64", "aarch64"}
    assert set(tables) == want
    assert dist.wheel.name == f"kcc-0.2.0-py3-none-{'.'.join(f'linux_{m}' for m in sorted(want))}.whl"
    with zipfile.ZipFile(dist.wheel) as z:
        for machine, table in tables.items():
            assert {e["stage"] for e in table["libraries"].values()} == STAGES
            assert table["flags"][:2] == ["-std=c11", "-O3"] and "-fopenmp" in table["flags"]
            for e in table["libraries"].values():
                lib = z.read(f"kcc/prebuilt/{machine}/{e['file']}")
                assert hashlib.sha256(lib).hexdigest() == e["sha256"]
                # an ELF shared object for that machine (e_machine: 62 x86-64, 183 aarch64)
                assert lib[:4] == b"\x7fELF" and int.from_bytes(lib[18:20], "little") == {"x86_64": 62, "aarch64": 183}[machine]


def test_sdist_holds_the_sources_and_no_prebuilt_library(dist):
    with tarfile.open(dist.sdist) as t:
        names = [n.split("/", 1)[1] for n in t.getnames() if "/" in n]
    assert {"setup.py", "pyproject.toml", "kcc/compiler/prebuilt.py", "kcc/data/kokoro_int8.json"} <= set(names)
    assert not [n for n in names if n.startswith("kcc/prebuilt/") or n.endswith(".so")]


@pytest.fixture(scope="module")
def spoken(venv, tmp_path_factory):
    """The first `kcc say` of a fresh cache holding only the fetched weights, no compiler on PATH;
    and the artifact it left."""
    work = tmp_path_factory.mktemp("speak")
    said = wc.speak(venv, wc.warm_real_weights(), work, compiler=False)
    print(f"\nfirst kcc say from the wheel, no C compiler: {said.seconds:.1f} s to the WAV")
    return said, next(p for p in (work / "cache-nocc" / "models").iterdir() if p.is_dir() and not p.name.startswith("."))


def test_the_wheel_speaks_with_no_c_compiler_on_path(spoken, dist):
    """The prebuilt libraries are found (the real weights' C is the skeleton's), only the weights
    are packed, and the WAV is speech."""
    said, artifact = spoken
    assert "prebuilt stage libraries" in said.log and "compiling" not in said.log, said.log
    assert 1.0 < said.duration < 4.0 and said.rms > 0.02, said.log
    x86 = wc.prebuilt_machines(dist.wheel)["x86_64"]["libraries"]
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in artifact.glob("*.so")} == \
        {e["file"]: e["sha256"] for e in x86.values()}


@pytest.mark.tools("qemu-aarch64")
@pytest.mark.parametrize("stage", ["kokoro_phoneme_encoder", "kokoro_text_encoder", "kokoro_duration"])
def test_the_aarch64_prebuilt_library_computes_what_the_x86_one_does_under_qemu(spoken, dist, stage, tmp_path,
                                                                                monkeypatch):
    """The wheel's aarch64 library for a stage, linked into the qemu harness
    (scripts/aarch64_parity.py), run on the real weights and the inputs the x86 library got in a
    whole synthesis: the same outputs, to float rounding (the x86 build takes FMA twins)."""
    import numpy as np

    from kcc.compiler import artifact
    from kcc.compiler.abi import symbol_prefix
    from kcc.model.pipeline import BACK, Synthesizer
    _said, where = spoken
    # the artifact is signed with the key of the child's HOME (wc.clean_env: the cache's parent)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(Path(where).parents[2] / ".config"))
    circuits, manifest = artifact.load(where)
    synth = Synthesizer.from_circuits(circuits, manifest["max_frames"], manifest["model_id"])
    ids = [50, 83, 156, 43, 102, 16, 47, 61, 123, 56, 16, 46, 68, 102, 62]
    tokens = np.array([[0, *ids, 0]], dtype=np.int32)
    style = np.load(wc.warm_real_weights() / "voices_ja.npz")["jf_alpha"][len(ids)].reshape(1, 256)
    env = {"input_ids": tokens, "token_type_ids": np.zeros_like(tokens), "lengths": np.array([tokens.shape[1]], np.int32),
           "speed": np.array([1.0], np.float32), "style_dec": style[:, :128].copy(), "style_pred": style[:, 128:].copy()}
    synth.run(env, skip=tuple(BACK))
    x86 = circuits[stage]
    with zipfile.ZipFile(dist.wheel) as z:
        lib = tmp_path / f"{stage}.so"
        lib.write_bytes(z.read(f"kcc/prebuilt/aarch64/{stage}.so"))
    program = ap.link_library(lib, symbol_prefix(stage), tmp_path / f"{stage}.aarch64")
    got = ap.QemuCircuit(x86, tmp_path, program).run({i: env[i] for i in x86.graph.inputs}).outputs
    assert set(got) == set(x86.graph.outputs)
    for name in got:
        want = env[name]
        assert got[name].shape == want.shape and got[name].dtype == want.dtype
        if want.dtype.kind == "f":
            scale = float(np.max(np.abs(want))) or 1.0
            assert float(np.max(np.abs(got[name] - want))) <= 1e-4 * scale, name
        else:
            assert np.array_equal(got[name], want), name


def test_other_build_options_without_a_compiler_name_the_missing_compiler(venv, tmp_path):
    """bf16 / --native are not prebuilt: they compile, and without a compiler that is refused before
    any work (CompilerNeeded), naming the option, the compiler and the prebuilt options that work
    (the usage exit code, no traceback)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    wc.seed_cache(cache, wc.warm_real_weights())
    env = wc.clean_env(venv, cache, compiler=False)
    import subprocess
    proc = subprocess.run([str(venv / "bin" / "kcc"), "say", "Hi.", "--native", "-o", str(tmp_path / "n.wav")],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "CompilerNeeded: --native: that needs a C compiler and 'cc' does not run here" in proc.stderr, proc.stderr
    assert "prebuilt stage libraries: the default model at the default options (--precision fp32" in proc.stderr
    assert "compiling" not in proc.stderr
    assert not (tmp_path / "n.wav").exists()
