"""The importer on the float graphs of kokoro-onnx's release (kokoro-v1.0.onnx, .fp16.onnx).

Those files cannot be downloaded here, so each test builds a small graph in the shape the torch
exporter gives them (Linear as MatMul on a transposed weight under its module scope, LSTM as a
plain ONNX LSTM node with gates i, o, f, c, named biases and norms as initialisers,
weight-normed convs folded) from known torch-layout tensors, and checks the import gives those
tensors back exactly; `targets` narrows the layout to the tensors the graph holds."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from kcc.weights.importers.onnx_graph import OnnxImportError  # noqa: E402
from kcc.weights.importers.onnx_kokoro import import_onnx  # noqa: E402

H, IN, OUT = 4, 6, 5
LSTM = "text_encoder.lstm"
LINEAR = "bert.encoder.albert_layer_groups.0.albert_layers.0.attention.query"
CONV = "decoder.generator.ups.0"


def _torch_tensors(seed=0):
    rng = np.random.default_rng(seed)
    t = {}
    for leaf in ("", "_reverse"):
        t[f"{LSTM}.weight_ih_l0{leaf}"] = rng.standard_normal((4 * H, IN)).astype(np.float32)
        t[f"{LSTM}.weight_hh_l0{leaf}"] = rng.standard_normal((4 * H, H)).astype(np.float32)
        t[f"{LSTM}.bias_ih_l0{leaf}"] = rng.standard_normal(4 * H).astype(np.float32)
        t[f"{LSTM}.bias_hh_l0{leaf}"] = rng.standard_normal(4 * H).astype(np.float32)
    t[f"{LINEAR}.weight"] = rng.standard_normal((OUT, IN)).astype(np.float32)
    t[f"{LINEAR}.bias"] = rng.standard_normal(OUT).astype(np.float32)
    conv = rng.standard_normal((3, 2, 4)).astype(np.float32)
    t[f"{CONV}.weight_v"] = conv
    t[f"{CONV}.weight_g"] = np.sqrt((conv.astype(np.float64) ** 2).sum(axis=(1, 2))).reshape(3, 1, 1).astype(np.float32)
    t[f"{CONV}.bias"] = rng.standard_normal(2).astype(np.float32)
    return t


def _onnx_gates(m):
    """torch's gate blocks (i, f, g, o) -> ONNX's (i, o, f, c)."""
    i, f, g, o = np.split(m, 4, axis=0)
    return np.concatenate([i, o, f, g], axis=0)


def _graph(t, dtype=np.float32, cast_lstm=False):
    """The exporter's float graph for the tensors in `t` (torch layout), weights in `dtype`."""
    def init(name, a):
        return numpy_helper.from_array(np.asarray(a, dtype=dtype), name)
    inits, nodes = [], []
    w = np.stack([_onnx_gates(t[f"{LSTM}.weight_ih_l0{s}"]) for s in ("", "_reverse")])
    r = np.stack([_onnx_gates(t[f"{LSTM}.weight_hh_l0{s}"]) for s in ("", "_reverse")])
    b = np.stack([np.concatenate([_onnx_gates(t[f"{LSTM}.bias_ih_l0{s}"]), _onnx_gates(t[f"{LSTM}.bias_hh_l0{s}"])])
                  for s in ("", "_reverse")])
    inits += [init("onnx::LSTM_101", w), init("onnx::LSTM_102", r), init("onnx::LSTM_103", b)]
    w_in = "onnx::LSTM_101"
    if cast_lstm:                       # a half weight widened by a Cast before the LSTM
        nodes.append(helper.make_node("Cast", ["onnx::LSTM_101"], ["w_f32"], to=TensorProto.FLOAT,
                                      name="/encoder/text_encoder/lstm/Cast"))
        w_in = "w_f32"
    nodes.append(helper.make_node("LSTM", ["x", w_in, "onnx::LSTM_102", "onnx::LSTM_103"], ["y"], hidden_size=H,
                                  direction="bidirectional", name="/encoder/text_encoder/lstm/LSTM"))
    inits += [init("onnx::MatMul_201", t[f"{LINEAR}.weight"].T),
              init(f"encoder.{LINEAR}.bias", t[f"{LINEAR}.bias"])]
    nodes.append(helper.make_node("MatMul", ["x", "onnx::MatMul_201"], ["q"],
                                  name="/encoder/bert/encoder/albert_layer_groups.0/albert_layers.0/attention/query/MatMul"))
    folded = t[f"{CONV}.weight_v"]      # weight_g = ||v|| per channel: the folded weight is v itself
    inits += [init("onnx::ConvTranspose_301", folded), init(f"decoder.{CONV}.bias", t[f"{CONV}.bias"])]
    nodes.append(helper.make_node("ConvTranspose", ["z", "onnx::ConvTranspose_301"], ["u"],
                                  name="/decoder/decoder/generator/ups.0/ConvTranspose"))
    graph = helper.make_graph(nodes, "kokoro_float", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], initializer=inits)
    return helper.make_model(graph)


def _flat(sections):
    return {f"{sec}.{k.removeprefix('module.')}": v for sec, sd in sections.items() for k, v in sd.items()}


@pytest.mark.parametrize("dtype, cast, tol", [(np.float32, False, 0), (np.float16, False, 2e-3),
                                              (np.float16, True, 2e-3)])
def test_float_graph_imports_to_the_torch_tensors(tmp_path, dtype, cast, tol):
    t = _torch_tensors()
    path = tmp_path / "kokoro-v1.0.onnx"
    onnx.save(_graph(t, dtype, cast), str(path))
    got = _flat(import_onnx(path, targets={k: v.shape for k, v in t.items()})[0])
    assert set(got) == set(t)
    for k, want in t.items():
        assert got[k].dtype == np.float32 and got[k].shape == want.shape, k
        np.testing.assert_allclose(got[k], want, rtol=tol, atol=tol, err_msg=k)


class TestFloatLstmRefusals:
    def _save(self, tmp_path, **attrs):
        t = _torch_tensors()
        model = _graph(t)
        lstm = next(n for n in model.graph.node if n.op_type == "LSTM")
        for k, v in attrs.items():
            lstm.attribute.append(helper.make_attribute(k, v))
        path = tmp_path / "m.onnx"
        onnx.save(model, str(path))
        return path, {k: v.shape for k, v in t.items()}

    def test_input_forget(self, tmp_path):
        path, targets = self._save(tmp_path, input_forget=1)
        with pytest.raises(OnnxImportError, match="input_forget=1"):
            import_onnx(path, targets=targets)

    def test_wrong_hidden_size(self, tmp_path):
        t = _torch_tensors()
        model = _graph(t)
        lstm = next(n for n in model.graph.node if n.op_type == "LSTM")
        next(a for a in lstm.attribute if a.name == "hidden_size").i = H + 1   # no longer fits W and R
        path = tmp_path / "m.onnx"
        onnx.save(model, str(path))
        with pytest.raises(OnnxImportError, match="do not fit hidden=5"):
            import_onnx(path, targets={k: v.shape for k, v in t.items()})
