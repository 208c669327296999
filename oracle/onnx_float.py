"""Rewrite the dynamically quantised ONNX graph into a float one with the same dequantised weights.

The int8 graph also quantises every activation to uint8 on the fly, which caps any comparison
with FP32 torch at ~20-40 dB. Replacing each integer op by its float twin, fed with exactly the
weights the importer dequantises, leaves the export's own graph (its STFT, its sine source, its
op order) and removes only the activation rounding, so torch on the imported .pth must match it
to float precision if and only if every tensor was mapped right.

  MatMulInteger -> Cast -> Mul(x_scale * w_scale)             => MatMul(x, W)
  ConvInteger -> Add(int bias) -> Cast -> Mul(x_scale * w_scale) => Conv(x, W, b)
  DynamicQuantizeLSTM                                           => LSTM (float W, R)
  Gather(int8 table) -> DequantizeLinear                        => Gather(float table)
"""
from __future__ import annotations

import numpy as np

from kcc.weights.importers.onnx_graph import GraphIndex, OnnxImportError


def _chain_end(g: GraphIndex, node):
    """Follow Add/Cast consumers to the rescaling Mul; return (nodes in chain, int bias Add or None)."""
    chain, bias_add, cur = [], None, node.output[0]
    while True:
        nxt = g.consumers.get(cur, [])
        if len(nxt) != 1:
            raise OnnxImportError(f"node {node.name}: output {cur} does not lead to one rescaling Mul")
        n = nxt[0]
        chain.append(n)
        if n.op_type == "Mul":
            return chain, bias_add
        if n.op_type == "Add":
            bias_add = n
        elif n.op_type != "Cast":
            raise OnnxImportError(f"node {node.name}: unexpected {n.op_type} {n.name} before the rescale")
        cur = n.output[0]


def _float_bias(g: GraphIndex, add) -> str:
    """The float bias behind an int32 bias Add: Reshape <- Cast <- Floor <- Div(bias, scale)."""
    other = [i for i in add.input if i in g.producer and g.producer[i].op_type == "Reshape"]
    n = g.producer[other[0]] if other else None
    for op in ("Reshape", "Cast", "Floor", "Div"):
        if n is None or n.op_type != op:
            raise OnnxImportError(f"bias add {add.name}: cannot trace its float bias")
        if op == "Div":
            return n.input[0]
        n = g.producer.get(n.input[0])
    raise AssertionError


def float_model(onnx_path):
    """Return an onnx.ModelProto computing the export in float with the dequantised weights."""
    import onnx
    from onnx import helper, numpy_helper
    from kcc.weights.importers.onnx_graph import dequant_conv_integer, dequant_gather, dequant_matmul_integer

    g = GraphIndex.load(onnx_path)
    model = onnx.load(str(onnx_path))
    drop: set[int] = set()
    new_nodes: dict[int, list] = {}
    new_init = []

    added: set[str] = set()

    def add_init(name, arr):
        if name not in added:  # ALBERT's shared layer: one weight, twelve nodes
            new_init.append(numpy_helper.from_array(np.ascontiguousarray(arr, np.float32), name))
            added.add(name)
        return name

    def act_float(node):
        return g.producer[node.input[0]].input[0]  # the DynamicQuantizeLinear's float input

    for i, node in enumerate(g.nodes):
        op = node.op_type
        if op in ("MatMulInteger", "ConvInteger") and node.input[1] in g.init:
            chain, bias_add = _chain_end(g, node)
            out = chain[-1].output[0]
            drop.update(id(n) for n in chain)
            if op == "MatMulInteger":
                w = add_init(node.input[1] + "_float", dequant_matmul_integer(g, node).T)
                new_nodes[i] = [helper.make_node("MatMul", [act_float(node), w], [out], name=node.name + "_float")]
            else:
                w = add_init(node.input[1] + "_float", dequant_conv_integer(g, node))
                ins = [act_float(node), w] + ([_float_bias(g, bias_add)] if bias_add is not None else [])
                conv = helper.make_node("Conv", ins, [out], name=node.name + "_float")
                conv.attribute.extend(node.attribute)
                new_nodes[i] = [conv]
            drop.add(id(node))
        elif op == "DynamicQuantizeLSTM":
            w, r = (g.const(node, s, n).astype(np.float64) for s, n in ((1, "W"), (2, "R")))
            ws, wz, rs, rz = (g.const(node, s, n).astype(np.float64).reshape(-1, 1, 1) for s, n in
                              ((8, "W scale"), (9, "W zero point"), (10, "R scale"), (11, "R zero point")))
            wf = add_init(node.input[1] + "_float", ((w - wz) * ws).transpose(0, 2, 1))
            rf = add_init(node.input[2] + "_float", ((r - rz) * rs).transpose(0, 2, 1))
            ins = [node.input[0], wf, rf] + list(node.input[3:7])
            lstm = helper.make_node("LSTM", ins, list(node.output), name=node.name + "_float")
            lstm.attribute.extend(a for a in node.attribute if a.name in ("direction", "hidden_size"))
            new_nodes[i] = [lstm]
            drop.add(id(node))
        elif op == "Gather" and node.input[0] in g.init and g.init[node.input[0]].dtype == np.int8:
            dq = g.consumers[node.output[0]][0]
            t = add_init(node.input[0] + "_float", dequant_gather(g, node))
            new_nodes[i] = [helper.make_node("Gather", [t, node.input[1]], [dq.output[0]], name=node.name + "_float",
                                             axis=0)]
            drop.update((id(node), id(dq)))
    nodes = []
    for i, node in enumerate(g.nodes):
        nodes.extend(new_nodes.get(i, []))
        if id(node) not in drop:
            nodes.append(node)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    model.graph.initializer.extend(new_init)
    return model
