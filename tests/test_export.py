"""The standalone C runner: exported, built with make, run with no Python; bit-identical audio."""
from __future__ import annotations

import subprocess

import numpy as np
import pytest

from kcc.model.export import export
from kcc.model.pipeline import Synthesizer
from kcc.speech.say import random_voice
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
