"""The speaker encoder's network as a kcc circuit, compiled to generated C by kcc's own compiler.

resemblyzer's LSTM is unidirectional; kcc's recurrence ops (kcc.ops.recurrence: lstm_gates +
bilstm, Kokoro's) are bidirectional. Each layer runs as a bidirectional one whose reverse
direction has all-zero weights and biases: its gates are then i = f = o = 0.5, g = 0, so its
cell and hidden state stay exactly 0, and the layer's output is [h_forward, 0...]. The next
layer's input weights are padded with zero columns for those 256 zeros, and so is the
projection (linear 256 -> 256, ReLU, kcc.ops.dense). The price is twice the recurrence work;
the gain is one compiler, one set of checked kernels and one thread policy for both networks.
The circuit returns the projection at every frame; the encoder keeps the last frame's and
L2-normalises it (kcc.speech.voice_design.encoder).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kcc.compiler.driver import compile_circuit
from kcc.speech.voice_design.mel import N_MELS, PARTIAL_FRAMES
from kcc.weights.checkpoint import Checkpoint
from kcc.weights.speaker_encoder import HIDDEN, LAYERS

MAX_BATCH = 16                       # partials per call: 16 x 1.6 s; longer recordings take several calls


def circuit() -> dict:
    ops, weights = [], {}
    x = "mels"
    for i in range(LAYERS):
        names = {role: f"l{i}_{role}" for role in ("w_ih", "b_ih", "w_hh", "b_hh", "z_ih", "z_b", "z_hh", "z_bh")}
        weights.update({name: {"ref": f"encoder.{name}"} for name in names.values()})
        ops.append({"op": "lstm_gates", "in": {"x": x}, "out": f"gates{i}",
                    "w": {"w_fwd": names["w_ih"], "b_fwd": names["b_ih"], "w_rev": names["z_ih"], "b_rev": names["z_b"]}})
        ops.append({"op": "bilstm", "in": {"gates": f"gates{i}"}, "attrs": {"packed": False}, "out": f"h{i}",
                    "w": {"w_hh_fwd": names["w_hh"], "b_hh_fwd": names["b_hh"], "w_hh_rev": names["z_hh"],
                          "b_hh_rev": names["z_bh"]}})
        x = f"h{i}"
    weights.update({"proj_w": {"ref": "encoder.proj_w"}, "proj_b": {"ref": "encoder.proj_b"}})
    ops.append({"op": "linear", "in": {"x": x}, "w": {"weight": "proj_w", "bias": "proj_b"},
                "attrs": {"act": "relu"}, "out": "proj"})
    return {"schema": "kcc.circuit/1", "name": "resemblyzer_speaker_encoder",
            "dims": {"B": {"min": 1, "max": MAX_BATCH}, "T": {"min": 1, "max": PARTIAL_FRAMES}},
            "inputs": [{"name": "mels", "dtype": "f32", "shape": ["B", "T", N_MELS]}],
            "weights": weights, "blocks": [{"name": "encoder", "ops": ops}], "outputs": ["proj"]}


def _pad_columns(w: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros((w.shape[0], width), np.float32)
    out[:, :w.shape[1]] = w
    return out


def checkpoint(w: dict[str, np.ndarray]) -> Checkpoint:
    """resemblyzer's tensors in the circuit's layout (zero reverse direction, padded inputs)."""
    g = 4 * HIDDEN
    arrays = {}
    for i in range(LAYERS):
        w_ih = w[f"lstm.weight_ih_l{i}"]
        arrays.update({
            f"encoder.l{i}_w_ih": w_ih if i == 0 else _pad_columns(w_ih, 2 * HIDDEN),
            f"encoder.l{i}_b_ih": w[f"lstm.bias_ih_l{i}"], f"encoder.l{i}_w_hh": w[f"lstm.weight_hh_l{i}"],
            f"encoder.l{i}_b_hh": w[f"lstm.bias_hh_l{i}"],
            f"encoder.l{i}_z_ih": np.zeros((g, N_MELS if i == 0 else 2 * HIDDEN), np.float32),
            f"encoder.l{i}_z_b": np.zeros(g, np.float32), f"encoder.l{i}_z_hh": np.zeros((g, HIDDEN), np.float32),
            f"encoder.l{i}_z_bh": np.zeros(g, np.float32)})
    arrays["encoder.proj_w"] = _pad_columns(w["linear.weight"], 2 * HIDDEN)
    arrays["encoder.proj_b"] = w["linear.bias"]
    return Checkpoint(Path("resemblyzer-0.1.4/pretrained.pt"), {k: np.ascontiguousarray(v, np.float32)
                                                                 for k, v in arrays.items()})


class CompiledNetwork:
    """[batch, frames, 40] mels -> [batch, 256] L2-normed embeddings, in generated C."""

    def __init__(self, w: dict[str, np.ndarray]):
        self.compiled = compile_circuit(circuit(), checkpoint(w))

    def __call__(self, mels: np.ndarray) -> np.ndarray:
        mels = np.ascontiguousarray(mels, np.float32)
        last = np.concatenate([self.compiled.run({"mels": mels[k:k + MAX_BATCH]}).outputs["proj"][:, -1]
                               for k in range(0, len(mels), MAX_BATCH)])
        return last / np.linalg.norm(last, axis=1, keepdims=True)
