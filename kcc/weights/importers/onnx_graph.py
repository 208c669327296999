"""Read an ONNX graph's initialisers and undo onnxruntime's dynamic int8 quantisation.

Model-neutral helpers: an index of producers/consumers, and per-node dequantisers that read
scale and zero point from *each node's own inputs* (the quantiser deduplicates zero-point
constants by value, so a tensor's `*_zero_point` name may belong to another layer).
All arithmetic is float64, the result float32.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kcc.weights.quantised import Quantised, symmetric


class OnnxImportError(Exception):
    """The ONNX graph holds something the importer cannot map; the message names the node/tensor."""


@dataclass
class GraphIndex:
    nodes: list
    init: dict[str, np.ndarray]
    producer: dict[str, object] = field(default_factory=dict)
    consumers: dict[str, list] = field(default_factory=dict)

    @classmethod
    def load(cls, path) -> "GraphIndex":
        try:
            import onnx
            from onnx import numpy_helper
        except ImportError as exc:  # optional dependency group "real"
            raise OnnxImportError(f"reading {path} needs the 'onnx' package (pip install kcc[real]): {exc}")
        try:
            model = onnx.load(str(path))
        except Exception as exc:  # onnx raises DecodeError / OSError variants
            raise OnnxImportError(f"{path}: not a readable ONNX model: {exc}")
        g = model.graph
        try:
            init = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        except (ValueError, TypeError, MemoryError) as exc:      # raw data that does not fit its dims...
            raise OnnxImportError(f"{path}: an initializer cannot be read: {type(exc).__name__}: {exc}") from None
        idx = cls(nodes=list(g.node), init=init)
        idx.fold_half_casts()
        for n in idx.nodes:
            for o in n.output:
                idx.producer[o] = n
            for i in n.input:
                idx.consumers.setdefault(i, []).append(n)
        return idx

    def fold_half_casts(self) -> None:
        """An fp16 export (kokoro-onnx's kokoro-v1.0.fp16.onnx) may feed a float16 weight through
        Cast(to=float) into the op that uses it: the cast's output is that weight as float32."""
        for n in self.nodes:
            if n.op_type == "Cast" and len(n.input) == 1 and self.init.get(n.input[0]) is not None \
                    and self.init[n.input[0]].dtype == np.float16:
                self.init[n.output[0]] = self.init[n.input[0]].astype(np.float32)

    def const(self, node, slot: int, what: str) -> np.ndarray:
        """Initialiser feeding input `slot` of `node`; a missing optional zero point reads as 0."""
        name = node.input[slot] if slot < len(node.input) else ""
        if not name:
            if "zero point" in what:
                return np.zeros((), np.int64)
            raise OnnxImportError(f"node {node.name} ({node.op_type}): input {slot} ({what}) is empty")
        if name not in self.init:
            raise OnnxImportError(
                f"node {node.name} ({node.op_type}): {what} '{name}' is computed at run time, not an initialiser")
        return self.init[name]

    def attr(self, node, name, default=None):
        import onnx
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        return default

    def weight_scale(self, node) -> np.ndarray:
        """The weight scale of a MatMulInteger / ConvInteger node.

        onnxruntime rescales the int32 result with Mul(result, Mul(x_scale, w_scale)), possibly
        after a Cast and an integer bias Add: follow that chain and take the initialiser input
        of the inner Mul, checking its other input is the scale of this node's own activation.
        """
        act_q = node.input[0]
        dql = self.producer.get(act_q)
        if dql is None or dql.op_type != "DynamicQuantizeLinear":
            raise OnnxImportError(f"node {node.name}: activation {act_q} is not dynamically quantised")
        act_scale = dql.output[1]
        cur = node.output[0]
        for _ in range(4):
            nxt = self.consumers.get(cur, [])
            if len(nxt) != 1:
                break
            n = nxt[0]
            if n.op_type == "Mul":
                other = [i for i in n.input if i != cur]
                inner = self.producer.get(other[0]) if len(other) == 1 else None
                if inner is None or inner.op_type != "Mul" or act_scale not in inner.input:
                    break
                w = [i for i in inner.input if i != act_scale]
                if len(w) != 1 or w[0] not in self.init:
                    break
                return self.init[w[0]]
            if n.op_type not in ("Cast", "Add"):
                break
            cur = n.output[0]
        raise OnnxImportError(f"node {node.name} ({node.op_type}): cannot find the Mul(x_scale, w_scale) that rescales it")


def _matmul_integer_parts(g: GraphIndex, node) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(int8 B [in, out], zero point, scale) of a MatMulInteger, checked per output channel."""
    q = g.const(node, 1, "weight")
    zp = g.const(node, 3, "weight zero point")
    scale = g.weight_scale(node)
    if q.ndim != 2 or zp.size not in (1, q.shape[1]) or scale.size not in (1, q.shape[1]):
        raise OnnxImportError(f"node {node.name}: weight {q.shape}, zero point {zp.shape}, scale {scale.shape} "
                              "are not a per-output-channel [in, out] quantisation")
    return q, zp, scale


def dequant_matmul_integer(g: GraphIndex, node) -> np.ndarray:
    """MatMulInteger B [in, out] int8, per-output-channel scale/zp -> Linear weight [out, in]."""
    q, zp, scale = (a.astype(np.float64) for a in _matmul_integer_parts(g, node))
    return ((q - zp.reshape(1, -1)) * scale.reshape(1, -1)).T.astype(np.float32)


def quantised_matmul_integer(g: GraphIndex, node) -> Quantised | None:
    """The int8 provenance of dequant_matmul_integer's weight: q [out, in], a scale per output."""
    q, zp, scale = _matmul_integer_parts(g, node)
    return symmetric(q.T, zp, scale)


def dequant_conv_integer(g: GraphIndex, node) -> np.ndarray:
    """ConvInteger W [out, in/groups, k] uint8, per-tensor scale/zp -> float weight, same layout."""
    q = g.const(node, 1, "weight").astype(np.float64)
    zp = g.const(node, 3, "weight zero point").astype(np.float64)
    scale = g.weight_scale(node).astype(np.float64)
    if zp.size != 1 or scale.size != 1:
        raise OnnxImportError(f"node {node.name}: expected per-tensor conv quantisation, got zero point "
                              f"{zp.shape}, scale {scale.shape}")
    return ((q - zp.reshape(())) * scale.reshape(())).astype(np.float32)


def _gather_parts(g: GraphIndex, node) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(int8 table, zero point, scale) of a quantised Gather and its one DequantizeLinear."""
    table = g.const(node, 0, "embedding table")
    nxt = g.consumers.get(node.output[0], [])
    if len(nxt) != 1 or nxt[0].op_type != "DequantizeLinear":
        raise OnnxImportError(f"node {node.name}: quantised Gather is not followed by one DequantizeLinear")
    dq = nxt[0]
    scale = g.const(dq, 1, "scale")
    zp = g.const(dq, 2, "zero point")
    if scale.size != 1 or zp.size != 1:
        raise OnnxImportError(f"node {dq.name}: expected a per-tensor embedding quantisation")
    return table, zp, scale


def dequant_gather(g: GraphIndex, node) -> np.ndarray:
    """Gather on an int8 table followed by DequantizeLinear -> float embedding table."""
    table, zp, scale = (a.astype(np.float64) for a in _gather_parts(g, node))
    return ((table - zp.reshape(())) * scale.reshape(())).astype(np.float32)


def quantised_gather(g: GraphIndex, node) -> Quantised | None:
    """The int8 provenance of dequant_gather's table (one scale, given to every row)."""
    return symmetric(*_gather_parts(g, node))


def _tensor(proto) -> np.ndarray:
    from onnx import numpy_helper
    return numpy_helper.to_array(proto)


# ONNX LSTM gate blocks are (i, o, f, c); PyTorch's are (i, f, g=c, o).
_TORCH_FROM_ONNX_GATES = (0, 2, 3, 1)


def _regate(m: np.ndarray, hidden: int) -> np.ndarray:
    blocks = [m[k * hidden:(k + 1) * hidden] for k in range(4)]
    return np.concatenate([blocks[k] for k in _TORCH_FROM_ONNX_GATES], axis=0)


def _lstm_hidden(g: GraphIndex, node) -> int:
    """hidden_size of an ONNX LSTM node (float or DynamicQuantizeLSTM), checked to be what nn.LSTM
    computes: no input_forget, no peepholes, zero initial states (constants or ConstantOfShape)."""
    hidden = int(g.attr(node, "hidden_size"))
    if g.attr(node, "input_forget", 0):
        raise OnnxImportError(f"node {node.name}: input_forget=1 has no PyTorch nn.LSTM equivalent")
    if len(node.input) > 7 and node.input[7]:
        raise OnnxImportError(f"node {node.name}: peephole weights P have no PyTorch nn.LSTM equivalent")
    for slot, what in ((5, "initial_h"), (6, "initial_c")):
        name = node.input[slot] if len(node.input) > slot else ""
        if name and name not in g.init:
            maker = g.producer.get(name)
            if maker is None or maker.op_type != "ConstantOfShape":
                raise OnnxImportError(f"node {node.name}: {what} '{name}' is neither constant nor ConstantOfShape")
            fill = g.attr(maker, "value")
            if fill is not None and np.any(_tensor(fill) != 0):
                raise OnnxImportError(f"node {node.name}: non-zero {what}; nn.LSTM starts from zeros")
        elif name:
            v = g.const(node, slot, what)
            if np.any(v != 0):
                raise OnnxImportError(f"node {node.name}: non-zero {what}; nn.LSTM starts from zeros")
    return hidden


def _lstm_parts(g: GraphIndex, node) -> tuple:
    """(hidden, W, R, B, W scale, W zero point, R scale, R zero point) of a DynamicQuantizeLSTM,
    checked: no input_forget, no peepholes, zero initial states, one scale per direction."""
    hidden = _lstm_hidden(g, node)
    w, r, b = (g.const(node, s, n) for s, n in ((1, "W"), (2, "R"), (3, "B")))
    ws, wz, rs, rz = (g.const(node, s, n).reshape(-1) for s, n in
                      ((8, "W scale"), (9, "W zero point"), (10, "R scale"), (11, "R zero point")))
    dirs = w.shape[0]
    if w.shape[2] != 4 * hidden or r.shape[1:] != (hidden, 4 * hidden) or b.shape != (dirs, 8 * hidden):
        raise OnnxImportError(f"node {node.name}: W {w.shape}, R {r.shape}, B {b.shape} do not fit hidden={hidden}")
    for name, v in (("W scale", ws), ("W zero point", wz), ("R scale", rs), ("R zero point", rz)):
        if v.size != dirs:
            raise OnnxImportError(f"node {node.name}: {name} has {v.size} entries, expected one per direction ({dirs})")
    return hidden, w, r, b, ws, wz, rs, rz


def _lstm_leaf(d: int, kind: str) -> str:
    return f"{kind}_l0" + ("_reverse" if d == 1 else "")


def dequant_lstm(g: GraphIndex, node) -> dict[str, np.ndarray]:
    """DynamicQuantizeLSTM -> PyTorch nn.LSTM parameters (one layer, uni- or bidirectional).

    Inputs (com.microsoft): X, W [D, in, 4H] int8, R [D, H, 4H] int8, B [D, 8H], seq_lens,
    initial_h, initial_c, P, W_scale [D], W_zero_point [D], R_scale [D], R_zero_point [D].
    """
    hidden, *parts = _lstm_parts(g, node)
    w, r, b, ws, wz, rs, rz = (a.astype(np.float64) for a in parts)
    out = {}
    for d in range(w.shape[0]):
        out[_lstm_leaf(d, "weight_ih")] = _regate(((w[d] - wz[d]) * ws[d]).T, hidden)
        out[_lstm_leaf(d, "weight_hh")] = _regate(((r[d] - rz[d]) * rs[d]).T, hidden)
        out[_lstm_leaf(d, "bias_ih")] = _regate(b[d, :4 * hidden], hidden)
        out[_lstm_leaf(d, "bias_hh")] = _regate(b[d, 4 * hidden:], hidden)
    return {k: v.astype(np.float32) for k, v in out.items()}


def float_lstm(g: GraphIndex, node) -> dict[str, np.ndarray]:
    """A float ONNX LSTM (the fp32 / fp16 export) -> PyTorch nn.LSTM parameters.

    Inputs: X, W [D, 4H, in], R [D, 4H, H], B [D, 8H] (optional: zeros), gates (i, o, f, c);
    the same checks as the quantised node (_lstm_hidden)."""
    hidden = _lstm_hidden(g, node)
    w, r = (g.const(node, s, n).astype(np.float64) for s, n in ((1, "W"), (2, "R")))
    dirs = w.shape[0]
    has_b = len(node.input) > 3 and node.input[3]
    b = g.const(node, 3, "B").astype(np.float64) if has_b else np.zeros((dirs, 8 * hidden))
    if w.shape[1] != 4 * hidden or r.shape[1:] != (4 * hidden, hidden) or b.shape != (dirs, 8 * hidden):
        raise OnnxImportError(f"node {node.name}: W {w.shape}, R {r.shape}, B {b.shape} do not fit hidden={hidden}")
    out = {}
    for d in range(dirs):
        out[_lstm_leaf(d, "weight_ih")] = _regate(w[d], hidden)
        out[_lstm_leaf(d, "weight_hh")] = _regate(r[d], hidden)
        out[_lstm_leaf(d, "bias_ih")] = _regate(b[d, :4 * hidden], hidden)
        out[_lstm_leaf(d, "bias_hh")] = _regate(b[d, 4 * hidden:], hidden)
    return {k: v.astype(np.float32) for k, v in out.items()}


def quantised_lstm(g: GraphIndex, node) -> dict[str, Quantised]:
    """The int8 provenance of dequant_lstm's weight_ih / weight_hh (torch layout, gate rows
    regated; one scale per direction, given to every row); a leaf with a zero point is left out."""
    hidden, w, r, _b, ws, wz, rs, rz = _lstm_parts(g, node)
    out = {}
    for d in range(w.shape[0]):
        for kind, q, s, z in (("weight_ih", w, ws, wz), ("weight_hh", r, rs, rz)):
            quant = symmetric(_regate(q[d].T, hidden), z[d], s[d])
            if quant is not None:
                out[_lstm_leaf(d, kind)] = quant
    return out


def weight_norm_split(w: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
    """Split a folded weight W into (weight_g, weight_v) for torch weight_norm(dim=0).

    weight_v = W and weight_g = ||W|| over every axis but 0, so g * v / ||v|| == W. A channel
    that is all zeros (the int8 export rounds 94 of them to zero) gets g = 0 and a unit-norm
    placeholder v = 1/sqrt(n): torch computes g * v / ||v|| literally, so v = 0 would give
    0/0 = NaN in upstream KModel, while this folds to exactly 0 in torch and in kcc.
    Returns (g, v, number of zero channels).
    """
    w64 = w.astype(np.float64)
    flat = w64.reshape(w64.shape[0], -1)
    norm = np.sqrt(np.sum(flat * flat, axis=1))
    zero = norm == 0
    v = flat.copy()
    if zero.any():
        v[zero] = 1.0 / np.sqrt(flat.shape[1])
    g = norm.reshape((w.shape[0],) + (1,) * (w.ndim - 1))
    return g.astype(np.float32), v.reshape(w.shape).astype(np.float32), int(zero.sum())
