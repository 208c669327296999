"""The speaker encoder without torch, against resemblyzer 0.1.4's own torch forward (a pinned
capture, oracle/voice_encoder_capture.py): its mel front-end, pause trimming, LSTM and embedding,
and the legacy torch reader its weights need."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

from kcc.compiler.xray import load_pinned
from kcc.speech.voice_design import mel
from kcc.speech.voice_design.encoder import SpeakerEncoder, partial_slices
from kcc.weights.bounded_read import CheckpointError
from kcc.weights.speaker_encoder import LAYERS, load_weights
from kcc.weights.torch_legacy import MAGIC_NUMBER, load_legacy_torch

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "voice_encoder"


@pytest.fixture(scope="module")
def pinned():
    cap = load_pinned("resemblyzer", "speech", FIXTURES)       # refuses a fixture whose SHA-256 drifted
    wav = cap.inputs["wav16k"].astype(np.float32) / 32767
    return wav, cap.checkpoints


@pytest.fixture(scope="module")
def encoder():
    return SpeakerEncoder()


def test_weights_are_the_pinned_resemblyzer_network():
    w = load_weights()
    assert w["lstm.weight_ih_l0"].shape == (1024, 40)
    assert all(w[f"lstm.weight_hh_l{i}"].shape == (1024, 256) for i in range(LAYERS))
    assert w["linear.weight"].shape == (256, 256) and w["linear.bias"].dtype == np.float32
    assert len(w) == 4 * LAYERS + 2


def test_volume_and_trimming_match_resemblyzer(pinned):
    wav, cp = pinned
    normalized = mel.normalize_volume(wav)
    peak = int(np.argmax(np.abs(wav)))
    assert float(normalized[peak] / wav[peak]) == pytest.approx(float(cp["gain"]), rel=1e-6)
    # a quiet copy is raised to exactly -30 dBFS RMS (the capture is louder: increase only)
    quiet = mel.normalize_volume(wav * 0.01)
    assert 20 * np.log10(np.sqrt(np.mean((quiet * 32767.0) ** 2)) / 32767) == pytest.approx(-30.0, abs=1e-3)
    # with webrtcvad's own flags the smoothing + dilation keep exactly resemblyzer's samples
    assert mel.trim_long_silences(normalized, cp["vad_flags"]).size == int(cp["kept"])
    # kcc's energy VAD keeps nearly the same stretch of speech
    ours = mel.trim_long_silences(normalized).size
    assert abs(ours - int(cp["kept"])) <= 0.03 * int(cp["kept"])


def test_mel_matches_librosa_through_resemblyzer(pinned):
    wav, cp = pinned
    pre = mel.trim_long_silences(mel.normalize_volume(wav), cp["vad_flags"])
    need = partial_slices(pre.size)[-1].stop * mel.HOP
    ours = mel.mel_spectrogram(np.pad(pre, (0, max(0, need - pre.size))))
    assert ours.shape == cp["mel"].shape
    np.testing.assert_allclose(ours, cp["mel"], rtol=0, atol=2e-6 * float(np.abs(cp["mel"]).max()))


@pytest.mark.parametrize("network", ["generated C", "numpy reference"])
def test_network_matches_torch(pinned, encoder, network):
    """The X-Ray of the encoder: each partial's embedding from the pinned mel, against torch's,
    through the compiled circuit and through the numpy reference."""
    _, cp = pinned
    slices = partial_slices(int(cp["kept"]))
    run = encoder.network if network == "generated C" else encoder.forward
    ours = run(np.stack([cp["mel"][s] for s in slices]))
    assert ours.shape == cp["partials"].shape == (len(slices), 256)
    np.testing.assert_allclose(ours, cp["partials"], rtol=0, atol=2e-6)
    emb = ours.mean(axis=0) / np.linalg.norm(ours.mean(axis=0))
    np.testing.assert_allclose(emb, cp["embedding"], rtol=0, atol=2e-6)


def test_compiled_network_takes_more_partials_than_one_call(pinned, encoder):
    """Recordings longer than MAX_BATCH partials run in several calls; each row as alone."""
    _, cp = pinned
    from kcc.speech.voice_design.encoder_circuit import MAX_BATCH
    rng = np.random.default_rng(3)
    mels = (rng.random((MAX_BATCH + 3, 160, 40)) * cp["mel"].max()).astype(np.float32)
    both = encoder.network(mels)
    np.testing.assert_allclose(both[-3:], encoder.network(mels[-3:]), rtol=0, atol=1e-6)
    np.testing.assert_allclose(both[:2], encoder.forward(mels[:2]), rtol=0, atol=2e-6)


def test_whole_pipeline_without_webrtcvad_stays_on_resemblyzers_embedding(pinned, encoder):
    wav, cp = pinned
    assert float(encoder.embed(wav) @ cp["embedding"]) > 0.995


def test_legacy_reader_refuses_a_pickle_naming_code(tmp_path):
    bad = tmp_path / "evil.pt"
    with open(bad, "wb") as f:
        for header in (MAGIC_NUMBER, 1001, {"little_endian": True}):
            pickle.dump(header, f)
        f.write(b"cos\nsystem\n(S'echo hi'\ntR.")
    with pytest.raises(CheckpointError, match="refusing pickle global os.system"):
        load_legacy_torch(bad)


def test_legacy_reader_refuses_a_file_of_another_kind(tmp_path):
    other = tmp_path / "zip.pt"
    pickle.dump(12345, open(other, "wb"))
    with pytest.raises(CheckpointError, match="magic number"):
        load_legacy_torch(other)
