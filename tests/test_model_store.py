"""Compiled models as artifacts: same bits as the in-memory compile, loaded without recompiling,
and every damaged artifact refused (then rebuilt) rather than run."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from kcc.compiler import artifact
from kcc.model import model_store
from kcc.compiler.build import BuildOptions
from kcc.model.pipeline import Synthesizer

STAGES = ["kokoro_phoneme_encoder", "kokoro_text_encoder", "kokoro_duration"]
IDS = [50, 83, 54, 156, 57, 135, 16, 65, 156, 87]


@pytest.fixture()
def cache(own_cache):
    return own_cache


def _front(synth, style):
    tokens = np.array([[0, *IDS, 0]], np.int32)
    env = {"input_ids": tokens, "token_type_ids": np.zeros_like(tokens),
           "lengths": np.array([tokens.shape[1]], np.int32), "speed": np.array([1.0], np.float32),
           "style_dec": style[:, :128].copy(), "style_pred": style[:, 128:].copy()}
    synth.run(env)
    return env


def _style():
    return (0.1 * np.random.default_rng(5).standard_normal((1, 256))).astype(np.float32)


def test_artifact_gives_the_in_memory_compile_bit_for_bit(cache, small_ckpt_path):
    direct = Synthesizer(small_ckpt_path, max_frames=100, stages=STAGES)
    loaded = model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES, log=None)
    assert list(loaded.circuits) == STAGES
    assert isinstance(loaded.circuits[STAGES[0]].weights, np.memmap)   # mapped, not copied
    a, b = _front(direct, _style()), _front(loaded, _style())
    assert a.keys() == b.keys() and {"d_en", "durations", "t_en"} <= a.keys()
    for key in a:
        assert np.array_equal(a[key], b[key]), key
    for name in STAGES:
        assert loaded.circuits[name].weights_sha256 == direct.circuits[name].weights_sha256
        assert np.array_equal(np.asarray(loaded.circuits[name].weights), direct.circuits[name].weights)


def test_a_second_load_maps_the_artifact_without_compiling(cache, small_ckpt_path, monkeypatch):
    model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES, log=None)

    def no_compile(*a, **k):
        raise AssertionError("compiled again although the artifact exists")
    monkeypatch.setattr(Synthesizer, "__init__", no_compile)
    synth = model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES, log=None)
    assert synth.model_id.startswith("file-")
    # another frame plan or build option is another artifact
    dirs = {artifact.artifact_dir(synth.model_id, BuildOptions(), 100, STAGES),
            artifact.artifact_dir(synth.model_id, BuildOptions(), 200, STAGES),
            artifact.artifact_dir(synth.model_id, BuildOptions(opt="-O3"), 100, STAGES),
            artifact.artifact_dir(synth.model_id, BuildOptions(), 100, STAGES[:2])}
    assert len(dirs) == 4


def _damage_manifest(d):
    (d / "manifest.json").write_text((d / "manifest.json").read_text().replace('"stages"', '"stages" ', 1))


def _damage_blob_size(d):
    with open(d / "weights.bin", "ab") as fh:
        fh.write(b"\0")


def _damage_library(d):
    # replaced, not written in place: this process has the library mapped already
    lib = next(d.glob("*.so"))
    tmp = lib.with_suffix(".tmp")
    tmp.write_bytes(lib.read_bytes()[:-1] + b"\x01")
    tmp.replace(lib)


def _damage_missing_blob(d):
    (d / "weights.bin").unlink()


def _resign(d, m):
    """What kcc itself would have written (signed with this user's key): the checks after the
    signature must still hold on their own."""
    from kcc.cache_trust import sign
    text = json.dumps(m)
    (d / "manifest.json").write_text(text)
    (d / "manifest.sig").write_text(sign(text.encode(), "artifact-manifest"))


def _damage_version(d):
    m = json.loads((d / "manifest.json").read_text())
    m["artifact_version"] = 0
    _resign(d, m)


def _plant_library_rehashed(d):
    """An attacker who can write the cache but not ~/.config: a library of theirs, the manifest
    re-hashed as the old integrity record was, and a signature under a key of their own."""
    import hashlib
    import hmac
    lib = next(d.glob("*.so"))
    planted = _cc_library(d, "int planted(void) { return 1; }\n")
    planted.replace(lib)
    m = json.loads((d / "manifest.json").read_text())
    m["stages"][0]["library_sha256"] = hashlib.sha256(lib.read_bytes()).hexdigest()
    text = json.dumps(m)
    (d / "manifest.json").write_text(text)
    (d / "manifest.sha256").write_text(hashlib.sha256(text.encode()).hexdigest())
    (d / "manifest.sig").write_text(hmac.new(b"k" * 32, b"artifact-manifest\0" + text.encode(),
                                             hashlib.sha256).hexdigest())


def _drop_signature(d):
    (d / "manifest.sig").unlink()


def _zero_blob_bytes(d):
    with open(d / "weights.bin", "r+b") as fh:          # in place, same size: a zeroed run of a page
        fh.seek(4096)
        fh.write(b"\0" * 4096)


def _damage_missing_symbol(d):
    # a library kcc signed that lacks the stage's entry point (another ABI): a rebuild, not a crash
    import hashlib
    m = json.loads((d / "manifest.json").read_text())
    lib = _cc_library(d, "int kcc_something_else(void) { return 1; }\n", "other.so")
    m["stages"][0]["library"] = "other.so"
    m["stages"][0]["library_sha256"] = hashlib.sha256(lib.read_bytes()).hexdigest()
    _resign(d, m)


def _cc_library(d, source, name="planted.tmp"):
    import subprocess
    src = d.parent / "planted.c"
    src.write_text(source)
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(d / name), str(src)], check=True)
    return d / name


def _damage_unloadable_library(d):
    # the recorded digest matches, the loader refuses it (as one built against another libc)
    import hashlib
    m = json.loads((d / "manifest.json").read_text())
    (d / "unloadable.so").write_bytes(b"not an ELF file")     # a new path: dlopen reuses a loaded one by name
    m["stages"][0]["library"] = "unloadable.so"
    m["stages"][0]["library_sha256"] = hashlib.sha256(b"not an ELF file").hexdigest()
    _resign(d, m)


def _damage_manifest_field(d):
    m = json.loads((d / "manifest.json").read_text())
    del m["blob_bytes"]
    _resign(d, m)


@pytest.mark.parametrize("damage, why", [
    (_damage_manifest, r"manifest\.json: not signed with this user's key"),
    (_plant_library_rehashed, r"manifest\.json: not signed with this user's key"),
    (_drop_signature, r"no readable manifest .*manifest\.sig"),
    (_zero_blob_bytes, r"weights\.bin: bytes 0\.\.1048576 differ from the manifest's SHA-256"),
    (_damage_missing_symbol, r"cannot be loaded: AttributeError: .*undefined symbol: kcc_"),
    (_damage_blob_size, r"weights\.bin: \d+ bytes, the manifest says \d+"),
    (_damage_library, r"\.so: missing or its SHA-256 differs from the manifest"),
    (_damage_missing_blob, r"weights\.bin: .*No such file"),
    (_damage_version, r"artifact version 0 != \d+"),
    (_damage_unloadable_library, r"cannot be loaded: OSError: .*\.so"),
    (_damage_manifest_field, r"cannot be loaded: KeyError: 'blob_bytes'")])
def test_a_damaged_artifact_is_refused_then_rebuilt(cache, small_ckpt_path, damage, why, capsys):
    import sys
    synth = model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES[:1], log=None)
    d = artifact.artifact_dir(synth.model_id, BuildOptions(), 100, STAGES[:1])
    good = synth.circuits[STAGES[0]].weights_sha256
    damage(d)
    with pytest.raises(artifact.ArtifactError, match=why):      # each check fires for its own damage
        artifact.load(d)
    rebuilt = model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES[:1], log=sys.stderr)
    assert "rebuilding the compiled model" in capsys.readouterr().err
    assert rebuilt.circuits[STAGES[0]].weights_sha256 == good
    artifact.load(d)                                    # whole again


def test_a_blob_written_since_the_manifest_is_checked_whole(cache, small_ckpt_path):
    synth = model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES[:1], log=None)
    d = artifact.artifact_dir(synth.model_id, BuildOptions(), 100, STAGES[:1])
    del synth
    artifact.load(d)
    blob = bytearray((d / "weights.bin").read_bytes())
    blob[100] ^= 0x40                                  # same size, one weight changed
    (d / "weights.bin").write_bytes(bytes(blob))       # a write: new mtime and ctime
    with pytest.raises(artifact.ArtifactError, match=r"bytes 0\.\.1048576 differ"):
        artifact.load(d)


def test_damage_that_kept_the_stamp_is_found_by_the_sampled_chunks(cache, small_ckpt_path, monkeypatch):
    """A blob whose stat still matches the manifest (restored with its times, bit rot) gets
    BLOB_SAMPLES random chunks checked on each load; verify=True checks all of them."""
    synth = model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES[:1], log=None)
    d = artifact.artifact_dir(synth.model_id, BuildOptions(), 100, STAGES[:1])
    del synth
    blob = bytearray((d / "weights.bin").read_bytes())
    blob[-1] ^= 0x01
    (d / "weights.bin").write_bytes(bytes(blob))
    m = json.loads((d / "manifest.json").read_text())
    m["blob_stamp"] = artifact._blob_stamp(d / "weights.bin")        # as if unchanged since written
    _resign(d, m)
    monkeypatch.setattr(artifact, "BLOB_SAMPLES", 0)
    artifact.load(d)                                   # no chunk sampled: not found
    with pytest.raises(artifact.ArtifactError, match="differ from the manifest's SHA-256"):
        artifact.load(d, verify=True)
    monkeypatch.setattr(artifact, "BLOB_SAMPLES", len(m["blob_chunks"]))
    with pytest.raises(artifact.ArtifactError, match="differ from the manifest's SHA-256"):
        artifact.load(d)


def test_a_planted_library_never_runs_its_constructor(cache, small_ckpt_path, tmp_path):
    """dlopen runs a library's constructors, so the digest check must come first: a planted
    library with a re-hashed manifest is refused and rebuilt, and its constructor never runs."""
    import hashlib
    synth = model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES[:1], log=None)
    d = artifact.artifact_dir(synth.model_id, BuildOptions(), 100, STAGES[:1])
    marker = tmp_path / "constructor-ran"
    lib = _cc_library(d, '#include <stdio.h>\n__attribute__((constructor)) static void boom(void) '
                         f'{{ FILE *f = fopen("{marker}", "w"); if (f) fclose(f); }}\n', "evil.so")
    m = json.loads((d / "manifest.json").read_text())
    m["stages"][0]["library"] = "evil.so"
    m["stages"][0]["library_sha256"] = hashlib.sha256(lib.read_bytes()).hexdigest()
    text = json.dumps(m)
    (d / "manifest.json").write_text(text)
    (d / "manifest.sha256").write_text(hashlib.sha256(text.encode()).hexdigest())
    rebuilt = model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES[:1], log=None)
    assert not marker.exists()
    assert rebuilt.circuits[STAGES[0]].weights_sha256 == synth.circuits[STAGES[0]].weights_sha256
    assert not (d / "evil.so").exists()


def test_an_interrupted_compile_leaves_nothing_the_next_one_keeps(cache, small_ckpt_path):
    """A killed compile's half artifact (kcc's temp name with a dead pid) is removed by the next
    compile; a live process's and a user's look-alike stay."""
    import os
    import subprocess
    dead = subprocess.Popen(["true"])
    dead.wait()
    models = cache / "models"
    models.mkdir(parents=True)
    os.chmod(cache, 0o700)
    half = models / f".kcc-tmp.{dead.pid}.file-abc.x1y2.part"
    half.mkdir()
    (half / "weights.bin").write_bytes(b"\0" * 4096)
    live = models / f".kcc-tmp.{os.getppid()}.file-abc.zz.part"
    live.mkdir()
    users = models / ".notes.part"
    users.write_text("mine")
    model_store.load_model(small_ckpt_path, max_frames=100, stages=STAGES[:1], log=None)
    assert not half.exists() and live.is_dir() and users.read_text() == "mine"


def test_a_changed_checkpoint_file_is_a_new_model(cache, small_ckpt_path, tmp_path):
    copy = tmp_path / "copy.pth"
    shutil.copyfile(small_ckpt_path, copy)
    first = model_store.file_identity(copy)
    assert model_store.file_identity(copy) == first            # remembered
    with open(copy, "ab") as fh:
        fh.write(b"\0")
    assert model_store.file_identity(copy) != first            # size/mtime changed: re-hashed


def test_a_missing_checkpoint_is_a_named_error(cache, tmp_path):
    from kcc.weights.checkpoint import CheckpointError
    with pytest.raises(CheckpointError, match="does not exist"):
        model_store.load_model(tmp_path / "nope.pth", log=None)
    with pytest.raises(CheckpointError, match="not a regular file"):
        model_store.load_model(tmp_path, log=None)


def test_non_finite_audio_is_a_synthesis_error_not_a_wav(small_ckpt_path):
    """A style far outside real voices' range drives the decoder to inf (measured: |x| 1e3 on the
    seeded small model, 20 on the real one): synthesize refuses instead of returning it."""
    from kcc.model.pipeline import SynthesisError
    synth = Synthesizer(small_ckpt_path, max_frames=200)
    style = np.full((1, 256), 1e3, np.float32)
    with pytest.raises(SynthesisError, match="non-finite samples"):
        synth.synthesize(IDS, style)


def test_two_cold_processes_compile_once(cache, small_ckpt_path):
    """Two processes that find no artifact: one compiles, the other waits on the lock and maps it."""
    import subprocess
    import sys
    code = ("import sys; from kcc.model import model_store; "
            f"model_store.load_model({str(small_ckpt_path)!r}, max_frames=100, stages={STAGES[:1]!r})")
    procs = [subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errs = [p.communicate(timeout=600)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert sum("compiling" in e and "into generated C" in e for e in errs) == 1, errs


def test_a_mapped_artifact_loads_without_the_compiler(cache, small_ckpt_path):
    """A warm start maps the artifact and imports the runtime only: the op definitions, lowering,
    emitter and checkpoint readers (~40 ms of imports) stay out of a warm `kcc say`."""
    import subprocess
    import sys
    load = (f"from kcc.model import model_store; "
            f"model_store.load_model({str(small_ckpt_path)!r}, max_frames=100, stages={STAGES[:1]!r}, log=None)")
    subprocess.run([sys.executable, "-c", load], check=True, timeout=600)          # compiles once
    check = load + ("; import sys; print(sorted(m for m in sys.modules if m.startswith("
                    "('kcc.ops', 'kcc.circuits', 'kcc.compiler.lower', 'kcc.compiler.emit', 'kcc.compiler.driver'))))")
    out = subprocess.run([sys.executable, "-c", check], check=True, timeout=600, capture_output=True, text=True)
    assert out.stdout.strip() == "[]", out.stdout


def test_a_digest_memo_that_cannot_be_written_costs_only_the_next_start(cache, small_ckpt_path):
    from kcc.files import file_sha256
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "file-digests").write_text("a file where the memo directory would go")
    assert model_store.file_identity(small_ckpt_path) == file_sha256(small_ckpt_path)
    assert sorted(p.name for p in cache.iterdir()) == ["file-digests"]        # no temporary left behind
