"""The wheel: `python -m build` makes a wheel and an sdist; the wheel carries the default build's
prebuilt stage libraries, and installed into a clean venv (no checkout on sys.path) it speaks on
a machine with no C compiler on PATH (scripts/wheel_check.py does the work; CI also runs it with
the dependencies installed from the index). Built here without build isolation and installed
with the running venv's dependencies (--deps shared), so it needs no network. Slow (a wheel
build compiles every stage for x86-64 and aarch64): `pytest -m wheel` runs it alone. The time to
the WAV is printed, not asserted (bench/results/wheel_first_say.md records it)."""
from __future__ import annotations

import hashlib
import shutil
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
try:
    import wheel_check as wc
finally:
    sys.path.pop(0)

pytestmark = pytest.mark.wheel

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
    want = {"x86_64"} | ({"aarch64"} if shutil.which("aarch64-linux-gnu-gcc") else set())
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


def test_the_wheel_speaks_with_no_c_compiler_on_path(venv, tmp_path):
    """A fresh cache holding only the fetched weights: the prebuilt libraries are found, only the
    weights are packed, and the WAV is speech."""
    spoken = wc.speak(venv, wc.warm_real_weights(), tmp_path, compiler=False)
    print(f"\nfirst kcc say from the wheel, no C compiler: {spoken.seconds:.1f} s to the WAV")
    assert "prebuilt stage libraries" in spoken.log and "compiling" not in spoken.log, spoken.log
    assert 1.0 < spoken.duration < 4.0 and spoken.rms > 0.02, spoken.log
    artifact = next((tmp_path / "cache-nocc" / "models").iterdir())
    assert sorted(p.name for p in artifact.glob("*.so")) == sorted(f"{s}.so" for s in STAGES)


def test_other_build_options_without_a_compiler_name_the_missing_compiler(venv, tmp_path):
    """bf16 / --native are not prebuilt: they compile, and without a compiler that is a BuildError
    naming it (exit code of a known error, no traceback)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "real").symlink_to(wc.warm_real_weights())
    env = wc.clean_env(venv, cache, compiler=False)
    import subprocess
    proc = subprocess.run([str(venv / "bin" / "kcc"), "say", "Hi.", "--native", "-o", str(tmp_path / "n.wav")],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert "not these options" in proc.stderr and "no usable C compiler 'cc'" in proc.stderr, proc.stderr
    assert not (tmp_path / "n.wav").exists()
