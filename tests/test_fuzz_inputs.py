"""A short run of fuzz/fuzz_inputs.py on each surface (the full bounded run is scripts/fuzz.sh),
and what it found, kept as tests."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import fuzz_inputs  # noqa: E402

from kcc.speech.voices import VoiceError, load_pack  # noqa: E402


@pytest.mark.parametrize("surface, n", [("manifest", 300), ("lexicon", 300), ("voices", 60)])
def test_a_short_fuzz_run_finds_nothing(surface, n):
    counts = fuzz_inputs.run(surface, n, seed=7, log=lambda *_: None)
    assert sum(counts.values()) == n and len(counts) == 2, counts      # both outcomes reached


# -- findings -------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["a" * 256, "a" * 300, "v" * 4096, "x" * 255 + ".npy", "a" * 300 + ".npz:af"])
def test_a_voice_name_longer_than_a_file_name_is_a_voice_error(tmp_path, name):
    """Found by the voices surface: a name past NAME_MAX raised a raw OSError (ENAMETOOLONG) from
    the path probe instead of 'no such voice'."""
    with pytest.raises(VoiceError, match="unknown voice|does not exist"):
        load_pack(name, [tmp_path])


def test_a_manifest_field_with_an_escaped_surrogate_is_rejected_not_written(tmp_path):
    """Found by the manifest surface (before the fix): an escaped lone surrogate in a JSONL
    field reached the outputs and failed there with UnicodeEncodeError."""
    from kcc.speech.batch.manifest import Rejected, read_manifest
    m = tmp_path / "m.jsonl"
    m.write_text('{"id": "ok\\ud83d", "text": "x"}\n{"id": "a", "text": "t", "voice": "\\udfff"}\n', encoding="utf-8")
    got = read_manifest(m)
    assert all(isinstance(r, Rejected) for r in got) and all((r.id or "").encode("utf-8") is not None for r in got)
    assert fuzz_inputs.check_manifest(m.read_bytes(), "jsonl", tmp_path) == "read"


def test_the_voices_checker_accepts_a_real_pack_and_refuses_noise(tmp_path):
    """The fuzzer's oracle itself: a valid pack loads, the same bytes damaged do not."""
    d = tmp_path / "voices"
    d.mkdir()
    np.save(d / "good.npy", (0.1 * np.random.default_rng(0).standard_normal((510, 1, 256))).astype(np.float32))
    (d / "noise.npy").write_bytes(b"\x93NUMPY" + bytes(range(200)))
    assert fuzz_inputs.check_voices_dir(d, None) == "loaded"
    assert load_pack("good", [d]).shape == (510, 1, 256)
    with pytest.raises(VoiceError):
        load_pack("noise", [d])
