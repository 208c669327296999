"""The standalone C runner: exported, built with make, run with no Python; bit-identical audio."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from kcc.model.export import export
from kcc.model.pipeline import Synthesizer
from kcc.speech.engine import random_voice
from kcc.speech.voices import style_for


@pytest.mark.tools("make")
def test_exported_program_matches_the_library_bit_for_bit(small_ckpt, tmp_path):
    synth = Synthesizer(small_ckpt, max_frames=200)
    pack = random_voice(1)
    out = export(synth, tmp_path / "runner", pack)
    build = subprocess.run(["make", "-C", str(out)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    ids = [50, 83, 54, 156, 57, 135]
    run = subprocess.run([str(out / "kokoro"), "--ids", ",".join(map(str, ids)), "-o", str(tmp_path / "a.wav"),
                          "--raw", str(tmp_path / "a.f32"), "--seed", "7", "--dir", str(out),
                          "--voice", str(out / "voice.f32")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    ours = np.fromfile(tmp_path / "a.f32", dtype=np.float32)
    lib = synth.synthesize(ids, style_for(pack, len(ids)), speed=1.0, seed=7).audio
    assert ours.shape == lib.shape
    np.testing.assert_array_equal(ours, lib)
    import wave
    with wave.open(str(tmp_path / "a.wav")) as w:
        assert w.getframerate() == 24000 and w.getnframes() == lib.size
    bad = subprocess.run([str(out / "kokoro"), "--ids", "50,999", "-o", str(tmp_path / "b.wav"), "--dir", str(out),
                          "--voice", str(out / "voice.f32")], capture_output=True, text=True)
    assert bad.returncode == 2 and "--ids: '999' is not an integer in 0..177" in bad.stderr   # refused by parse_args
    assert not (tmp_path / "b.wav").exists()


# -- the export directory: nothing is written through a planted link --------------------------
@pytest.fixture(scope="module")
def exported(small_ckpt, tmp_path_factory):
    synth = Synthesizer(small_ckpt, max_frames=200)
    pack = random_voice(1)
    clean = export(synth, tmp_path_factory.mktemp("clean"), pack)
    return synth, pack, sorted(p.name for p in clean.iterdir())


def test_export_writes_the_files_it_lists(exported):
    _, _, names = exported
    assert {"main.c", "Makefile", "voice.f32"} <= set(names)
    assert sum(n.startswith("stage_") and n.endswith(".c") for n in names) == sum(n.endswith(".weights") for n in names) > 3
    assert not any(n.startswith(".") for n in names)                         # no temporaries left


@pytest.mark.parametrize("plant", ["symlink", "dangling symlink", "directory", "fifo"])
def test_a_planted_entry_at_any_export_target_is_refused_before_writing(exported, tmp_path, plant):
    import os

    from kcc.model.export import ExportError
    synth, pack, names = exported
    for name in names:                                 # every file the exporter writes
        out = tmp_path / f"{plant.replace(' ', '_')}-{name}"
        out.mkdir()
        victim = tmp_path / f"victim-{name}"
        victim.write_text("the user's file")
        target = out / name
        if plant == "symlink":
            target.symlink_to(victim)
        elif plant == "dangling symlink":
            target.symlink_to(tmp_path / "nowhere" / name)
        elif plant == "directory":
            target.mkdir()
        else:
            os.mkfifo(target)
        with pytest.raises(ExportError, match=f"export target {target} is"):
            export(synth, out, pack)
        assert victim.read_text() == "the user's file", name
        assert [p.name for p in out.iterdir()] == [name], name                # nothing else written
        assert not (tmp_path / "nowhere").exists()


def test_a_link_planted_after_the_check_is_replaced_not_followed(exported, tmp_path, monkeypatch):
    """The check and the write are apart; a link that appears between them is replaced by the
    rename, its target untouched."""
    from kcc.files import AtomicFile
    synth, pack, names = exported
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("the user's file")
    real_init = AtomicFile.__init__

    def plant_then_open(self, path):
        if path.name == "main.c" and not path.is_symlink():
            path.symlink_to(victim)
        real_init(self, path)
    monkeypatch.setattr(AtomicFile, "__init__", plant_then_open)
    export(synth, out, pack)
    assert victim.read_text() == "the user's file"
    assert not (out / "main.c").is_symlink() and "int main(" in (out / "main.c").read_text()
    assert sorted(p.name for p in out.iterdir()) == names


def test_reexport_over_regular_files_replaces_them(exported, tmp_path):
    synth, pack, names = exported
    out = tmp_path / "out"
    out.mkdir()
    (out / "main.c").write_text("old")
    export(synth, out, pack)
    assert (out / "main.c").read_text() != "old" and sorted(p.name for p in out.iterdir()) == names
