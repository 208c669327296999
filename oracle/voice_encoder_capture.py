"""Pin resemblyzer 0.1.4's own torch forward on one utterance, for kcc's numpy speaker encoder.

Usage: pip install resemblyzer==0.1.4 librosa webrtcvad (in a scratch venv beside the dev extra's
torch: resemblyzer's `typing` requirement shadows the standard library, so the dev extra leaves it
out), then python -m oracle.voice_encoder_capture (kcc's real model in the cache)

The input is kcc speaking one English sentence as af_heart, resampled to 16 kHz by
kcc.speech.voice_design.target.resample and stored as int16 (so the capture stands alone). Saved
(fixtures/voice_encoder/resemblyzer.speech.npz, SHA-256 and versions in MANIFEST.json there, the
layout kcc.compiler.xray.load_pinned reads):
  input/wav16k            int16 samples
  checkpoint/gain         normalize_volume(wav, -30, increase_only=True) / wav (one number)
  checkpoint/vad_flags    webrtcvad's voice flag per 30 ms window of the normalised wav
  checkpoint/kept         len(resemblyzer.preprocess_wav(wav)) (volume, then webrtcvad trimming)
  checkpoint/mel          wav_to_mel_spectrogram of the zero-padded preprocessed wav
  checkpoint/partials     VoiceEncoder's embedding of each 1.6 s partial
  checkpoint/embedding    embed_utterance: their normed mean
"""
from __future__ import annotations

import datetime
import hashlib
import io
import json
import struct
import sys
import types
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "voice_encoder"
NAME = "resemblyzer.speech.npz"
TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the forest."
VOICE = "af_heart"


def _resemblyzer():
    # webrtcvad 2.0.10 asks pkg_resources for its own version at import; newer setuptools has no
    # pkg_resources, and the version string is all it wants.
    sys.modules.setdefault("pkg_resources", types.SimpleNamespace(
        get_distribution=lambda name: types.SimpleNamespace(version="2.0.10")))
    import resemblyzer
    import webrtcvad
    from resemblyzer import audio
    return resemblyzer, audio, webrtcvad


def speech() -> np.ndarray:
    from kcc.model import load
    from kcc.speech.engine import plan
    from kcc.speech.g2p.g2p import G2P
    from kcc.speech.voice_design.target import resample
    from kcc.speech.voices import load_voice, style_for
    synth = load(None)
    chunk = plan(TEXT, G2P("en-us"))[0]
    out = synth.synthesize(chunk.ids, style_for(load_voice(VOICE), len(chunk.phonemes)), speed=1.0, seed=0)
    wav = resample(np.asarray(out.audio, np.float32), 24_000)
    return np.round(np.clip(wav, -1, 1) * 32767).astype(np.int16)


def capture(wav16k: np.ndarray) -> dict:
    resemblyzer, audio, webrtcvad = _resemblyzer()
    wav = wav16k.astype(np.float32) / 32767
    normalized = audio.normalize_volume(wav, -30, increase_only=True)
    window = 480
    cut = normalized[:len(normalized) - len(normalized) % window]
    pcm = struct.pack("%dh" % len(cut), *(np.round(cut * 32767)).astype(np.int16))
    vad = webrtcvad.Vad(mode=3)
    flags = np.array([vad.is_speech(pcm[i * 2:(i + window) * 2], sample_rate=16000)
                      for i in range(0, len(cut), window)])
    pre = resemblyzer.preprocess_wav(wav)
    enc = resemblyzer.VoiceEncoder("cpu", verbose=False)
    embedding, partials, wav_slices = enc.embed_utterance(pre, return_partials=True)
    padded = np.pad(pre, (0, max(0, wav_slices[-1].stop - len(pre))))
    peak = int(np.argmax(np.abs(wav)))
    return {"input/wav16k": wav16k, "checkpoint/gain": np.float64(normalized[peak] / wav[peak]),
            "checkpoint/vad_flags": flags, "checkpoint/kept": np.int64(len(pre)),
            "checkpoint/mel": audio.wav_to_mel_spectrogram(padded), "checkpoint/partials": partials,
            "checkpoint/embedding": embedding}


def main() -> int:
    arrays = capture(speech())
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    raw = buf.getvalue()
    FIXTURES.mkdir(parents=True, exist_ok=True)
    (FIXTURES / NAME).write_bytes(raw)
    import librosa
    import torch
    manifest = {NAME: {"sha256": hashlib.sha256(raw).hexdigest(), "capture": "resemblyzer speaker encoder",
                       "text": TEXT, "voice": VOICE, "source": "pinned_capture", "backend": "pytorch",
                       "versions": {"resemblyzer": "0.1.4", "torch": torch.__version__, "librosa": librosa.__version__,
                                    "numpy": np.__version__},
                       "created": datetime.date.today().isoformat()}}
    (FIXTURES / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    print(f"{FIXTURES / NAME}: {len(raw)} bytes, sha256 {manifest[NAME]['sha256']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
