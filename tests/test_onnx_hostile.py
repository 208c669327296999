"""A crafted ONNX file is an OnnxImportError naming the file, whatever part of the Kokoro export's
graph it gets wrong: an initializer whose bytes do not fill its dims, a quantised LSTM without its
hidden size, a weight of the wrong rank. (The real export's import is tests/test_onnx_import.py.)"""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from kcc.weights.importers.onnx_graph import OnnxImportError  # noqa: E402
from kcc.weights.importers.onnx_kokoro import import_onnx  # noqa: E402

LSTM = "/encoder/predictor/lstm/LSTM"


def _lstm(inputs, **attrs):
    return helper.make_node("DynamicQuantizeLSTM", inputs, ["Y"], name=LSTM, domain="com.microsoft", **attrs)


def _bad_raw_data():
    t = TensorProto()
    t.name, t.data_type = "encoder.bert.x", TensorProto.FLOAT
    t.dims.extend([1000])
    t.raw_data = b"\0" * 8
    return [], [t]


def _no_hidden_size():
    return [_lstm(["X", "W_q", "R", "B"])], [numpy_helper.from_array(np.zeros((2, 4, 8), np.int8), "W_q")]


def _one_dimensional_weight():
    inits = [numpy_helper.from_array(np.zeros((8,), np.int8), "W_q"), numpy_helper.from_array(np.zeros((8,), np.int8), "R"),
             numpy_helper.from_array(np.zeros((8,), np.float32), "B")]
    inits += [numpy_helper.from_array(np.ones((1,), np.float32), n) for n in ("ws", "rs")]
    inits += [numpy_helper.from_array(np.zeros((1,), np.int8), n) for n in ("wz", "rz")]
    return [_lstm(["X", "W_q", "R", "B", "", "", "", "", "ws", "wz", "rs", "rz"], hidden_size=2)], inits


@pytest.mark.parametrize("make, why", [
    (_bad_raw_data, r"an initializer cannot be read: ValueError: cannot reshape"),
    (_no_hidden_size, r"not the Kokoro export's graph: TypeError"),
    (_one_dimensional_weight, r"not the Kokoro export's graph: IndexError"),
])
def test_a_crafted_export_is_an_import_error_naming_the_file(tmp_path, make, why):
    nodes, inits = make()
    path = tmp_path / "crafted.onnx"
    onnx.save(helper.make_model(helper.make_graph(nodes, "g", [], [], initializer=inits)), str(path))
    with pytest.raises(OnnxImportError, match=rf"crafted\.onnx: {why}"):
        import_onnx(path)
