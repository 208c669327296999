"""The speaker encoder: resemblyzer 0.1.4's GE2E network (3-layer LSTM 40 -> 256, linear 256 -> 256,
ReLU, L2 norm) on kcc.weights.speaker_encoder's weights -- no torch. The network runs in generated
C (kcc.speech.voice_design.encoder_circuit, compiled by kcc on first use); `forward` is the same
network in numpy, the reference the compiled one is checked against.

An utterance is cut into 1.6 s partials (160 mel frames) every ~0.77 s (rate 1.3 per second, the
last kept when it is >= 75 % covered); each partial's embedding is the final hidden state of the
top layer through the projection; the utterance embedding is their L2-normed mean. Parity with
resemblyzer's torch forward: tests/test_voice_design_encoder.py against a pinned capture
(oracle/voice_encoder_capture.py).
"""
from __future__ import annotations

import numpy as np

from kcc.speech.voice_design import mel
from kcc.speech.voice_design.encoder_circuit import CompiledNetwork
from kcc.weights.speaker_encoder import LAYERS, load_weights

RATE = 1.3
MIN_COVERAGE = 0.75


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * z))          # = 1/(1+e^-z) without overflow warnings


def partial_slices(n_samples: int, rate: float = RATE, min_coverage: float = MIN_COVERAGE) -> list[slice]:
    """resemblyzer's VoiceEncoder.compute_partial_slices, mel-frame side."""
    n_frames = int(np.ceil((n_samples + 1) / mel.HOP))
    step = int(np.round((mel.SAMPLE_RATE / rate) / mel.HOP))
    starts = range(0, max(1, n_frames - mel.PARTIAL_FRAMES + step + 1), step)
    slices = [slice(i, i + mel.PARTIAL_FRAMES) for i in starts]
    last = slices[-1]
    coverage = (n_samples - last.start * mel.HOP) / (mel.PARTIAL_FRAMES * mel.HOP)
    if coverage < min_coverage and len(slices) > 1:
        slices = slices[:-1]
    return slices


class SpeakerEncoder:
    """embed(wav16k) -> [256] unit vector; similarity of two voices = dot product of embeddings."""

    def __init__(self, weights: dict[str, np.ndarray] | None = None, compiled: bool = True):
        w = weights or load_weights()
        # numpy's recurrence is ~1000 small GEMMs per partial: on a busy machine OpenBLAS's
        # threads turn it 15-25x slower (measured 0.7 s -> 10-18 s); the C runs on kcc's threads.
        self.network = CompiledNetwork(w) if compiled else self.forward
        self.w_ih = [np.ascontiguousarray(w[f"lstm.weight_ih_l{i}"].T) for i in range(LAYERS)]
        self.w_hh = [np.ascontiguousarray(w[f"lstm.weight_hh_l{i}"].T) for i in range(LAYERS)]
        self.bias = [w[f"lstm.bias_ih_l{i}"] + w[f"lstm.bias_hh_l{i}"] for i in range(LAYERS)]
        self.lin_w, self.lin_b = np.ascontiguousarray(w["linear.weight"].T), w["linear.bias"]

    def forward(self, mels: np.ndarray) -> np.ndarray:
        """[batch, frames, 40] -> [batch, 256] L2-normed partial embeddings (torch's
        nn.LSTM gate order i, f, g, o; float32 throughout, as torch on CPU)."""
        x = np.asarray(mels, dtype=np.float32)
        b, t, _ = x.shape
        for layer in range(LAYERS):
            h_size = self.w_hh[layer].shape[0]
            gates_in = x @ self.w_ih[layer] + self.bias[layer]            # [b, t, 4H], once per layer
            h = np.zeros((b, h_size), np.float32)
            c = np.zeros((b, h_size), np.float32)
            out = np.empty((b, t, h_size), np.float32)
            for step in range(t):
                z = gates_in[:, step] + h @ self.w_hh[layer]
                i, f = _sigmoid(z[:, :h_size]), _sigmoid(z[:, h_size:2 * h_size])
                g, o = np.tanh(z[:, 2 * h_size:3 * h_size]), _sigmoid(z[:, 3 * h_size:])
                c = f * c + i * g
                h = o * np.tanh(c)
                out[:, step] = h
            x = out
        raw = np.maximum(x[:, -1] @ self.lin_w + self.lin_b, 0)
        return raw / np.linalg.norm(raw, axis=1, keepdims=True)

    def partials(self, wav: np.ndarray) -> np.ndarray:
        """[n, 256]: the embedding of each 1.6 s partial of an already preprocessed 16 kHz wav."""
        slices = partial_slices(len(wav))
        need = slices[-1].stop * mel.HOP
        if need >= len(wav):
            wav = np.pad(wav, (0, need - len(wav)))
        spec = mel.mel_spectrogram(wav)
        return self.network(np.stack([spec[s] for s in slices]))

    def embed_utterance(self, wav: np.ndarray) -> np.ndarray:
        """A preprocessed 16 kHz waveform's embedding (resemblyzer's embed_utterance)."""
        return unit(self.partials(wav).mean(axis=0))

    def embed(self, wav16k: np.ndarray) -> np.ndarray:
        """A raw 16 kHz waveform's embedding: preprocessed (mel.preprocess) first."""
        return self.embed_utterance(mel.preprocess(wav16k))


def unit(v: np.ndarray) -> np.ndarray:
    return (v / np.linalg.norm(v)).astype(np.float32)
