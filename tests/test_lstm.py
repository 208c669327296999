"""The bidirectional LSTM ops (lstm_gates + bilstm) against torch.nn.LSTM, packed and not.

Packed: pack_padded_sequence / pad_packed_sequence semantics (the reverse direction starts at
lengths[b]-1, padded rows 0); unpacked: torch called on the plain tensor (every row). Bad
lengths must leave the output canary untouched. Each op alone against its numpy reference, at
1 and 2 threads, is the op harness's (tests/test_ops.py).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from kcc.weights.checkpoint import Checkpoint
from kcc.ops import LoweringError
from kcc.compiler.driver import compile_circuit

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

CANARY = -555.0
CIN, HIDDEN, T_MAX = 48, 24, 40
ROLES = ["weight_ih_l0", "bias_ih_l0", "weight_hh_l0", "bias_hh_l0",
         "weight_ih_l0_reverse", "bias_ih_l0_reverse", "weight_hh_l0_reverse", "bias_hh_l0_reverse"]


def lstm_circuit(packed: bool, cin: int = CIN) -> dict:
    inputs = [{"name": "x", "dtype": "f32", "shape": ["B", "T", cin]}]
    lstm_in = {"gates": "gates"}
    if packed:
        inputs.append({"name": "lengths", "dtype": "i32", "shape": ["B"]})
        lstm_in["lengths"] = "lengths"
    return {
        "schema": "kcc.circuit/1", "name": f"test_bilstm_{'packed' if packed else 'plain'}",
        "dims": {"B": {"min": 1, "max": 4}, "T": {"min": 1, "max": T_MAX}},
        "inputs": inputs, "weights": {r: {"ref": f"lstm.{r}"} for r in ROLES},
        "blocks": [{"name": "lstm", "ops": [
            {"op": "lstm_gates", "in": {"x": "x"}, "w": {"w_fwd": ROLES[0], "b_fwd": ROLES[1],
                                                          "w_rev": ROLES[4], "b_rev": ROLES[5]}, "out": "gates"},
            {"op": "bilstm", "in": lstm_in, "w": {"w_hh_fwd": ROLES[2], "b_hh_fwd": ROLES[3],
                                                   "w_hh_rev": ROLES[6], "b_hh_rev": ROLES[7]},
             "attrs": {"packed": packed}, "out": "y"}],
            "checkpoints": [{"name": "y", "tensor": "y", "layout": "time_major", "dtype": "f32",
                             "axes": ["batch", "time", "channel"]}]}],
        "outputs": ["y"]}


@pytest.fixture(scope="module")
def torch_lstm():
    torch.manual_seed(7)
    lstm = torch.nn.LSTM(CIN, HIDDEN, 1, batch_first=True, bidirectional=True).eval()
    with torch.no_grad():   # larger-than-default weights so the gates saturate somewhere
        for p in lstm.parameters():
            p.mul_(3.0)
    ckpt = Checkpoint(Path("in-memory-lstm"), {f"lstm.{k}": v.detach().numpy().copy()
                                                for k, v in lstm.state_dict().items()})
    return lstm, ckpt


@pytest.fixture(scope="module")
def compiled(torch_lstm):
    return {p: compile_circuit(lstm_circuit(p), torch_lstm[1]) for p in (True, False)}


def _torch_ref(lstm, x, lengths=None):
    with torch.no_grad():
        if lengths is None:
            return lstm(x)[0].numpy()
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, torch.tensor(lengths), batch_first=True,
                                                         enforce_sorted=False)
        y, _ = lstm(packed)
        return torch.nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])[0].numpy()


@pytest.mark.parametrize("lengths", [[40, 17, 1], [5, 5], [1], [33, 40, 2, 39]])
def test_packed_matches_torch(torch_lstm, compiled, lengths):
    lstm, _ = torch_lstm
    x = torch.randn(len(lengths), max(lengths) + 1 if max(lengths) < T_MAX else T_MAX, CIN,
                    generator=torch.Generator().manual_seed(sum(lengths)))
    ref = _torch_ref(lstm, x, lengths)
    y = compiled[True].run({"x": x.numpy(), "lengths": np.array(lengths, np.int32)}).outputs["y"]
    assert y.shape == ref.shape == (len(lengths), x.shape[1], 2 * HIDDEN)
    assert np.abs(y - ref).max() <= 2e-5
    for b, n in enumerate(lengths):
        assert not y[b, n:].any(), "padded rows must be exactly 0"
    # Packing matters: the reverse direction of a short sequence starts at its own last row.
    if any(n < x.shape[1] for n in lengths):
        assert np.abs(y - _torch_ref(lstm, x)).max() > 1e-3


@pytest.mark.parametrize("shape", [(1, 1), (2, 13), (3, T_MAX)])
def test_unpacked_matches_torch(torch_lstm, compiled, shape):
    lstm, _ = torch_lstm
    x = torch.randn(*shape, CIN, generator=torch.Generator().manual_seed(shape[1]))
    y = compiled[False].run({"x": x.numpy()}).outputs["y"]
    assert np.abs(y - _torch_ref(lstm, x)).max() <= 2e-5



@pytest.mark.parametrize("bad", [[0, 5], [5, 6], [-1, 3]])
def test_bad_lengths_leave_output_untouched(compiled, bad):
    c = compiled[True]
    x = np.zeros((2, 5, CIN), np.float32)
    out = np.full((2, 5, 2 * HIDDEN), CANARY, np.float32)
    status, msg = c.call([x, np.array(bad, np.int32)], [2, 5], [out], c.new_arena())
    assert status != 0 and "bilstm" in msg
    assert (out == CANARY).all()


def test_lowering_rejects_mismatched_use(torch_lstm):
    doc = lstm_circuit(False, cin=CIN + 1)
    with pytest.raises(LoweringError, match="Cin"):
        compile_circuit(doc, torch_lstm[1])
    doc = lstm_circuit(False)
    doc["blocks"][0]["ops"][1]["attrs"]["packed"] = True
    with pytest.raises(LoweringError, match="lengths"):
        compile_circuit(doc, torch_lstm[1])
