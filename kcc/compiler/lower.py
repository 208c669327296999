"""Lowering: a validated circuit plus a checkpoint becomes an IR graph with resolved shapes.

Repeated blocks unroll here (their tensors get '<block>.<i>.' prefixes, their weights stay
shared), weight references resolve against the checkpoint (with weight norm folded where the
circuit asks), and each op's output shape is inferred by its OpDef. Graph passes run last.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from kcc.weights.checkpoint import Checkpoint, tensor_sha256
from kcc.weights.quantised import Quantised, QuantisedError, from_exact
from kcc.ir import Checkpoint as XrayPoint
from kcc.ir import Graph, Op, Tensor, WeightRef
from kcc.ops import OPS, LoweringError

Pass = Callable[[Graph], Graph]


def resolve_weights(circuit: dict, ckpt: Checkpoint) -> dict[str, np.ndarray]:
    out = {}
    for name, spec in circuit["weights"].items():
        if spec.get("fold", "none") == "weight_norm":
            out[name] = ckpt.weight_norm(spec["ref"])
        else:
            out[name] = ckpt.get(spec["ref"])
    return out


def resolve_quant(circuit: dict, ckpt: Checkpoint) -> dict[str, Quantised]:
    """Circuit weight name -> its int8 provenance (Checkpoint.quant), for weights used as stored
    (a weight-norm fold of a split weight is not int8 * scale any more)."""
    out = {}
    for name, spec in circuit["weights"].items():
        ref = spec["ref"]
        if spec.get("fold", "none") == "weight_norm":
            ref = None if f"{ref}.weight_v" in ckpt else f"{ref}.weight"
        if ref in ckpt.quant:
            out[name] = ckpt.quant[ref]
    return out


def _int8_source(name: str, arrays: dict, quant: dict[str, Quantised], op_name: str) -> Quantised:
    if name in quant:
        return quant[name]
    try:
        return from_exact(name, arrays[name])
    except QuantisedError as exc:
        raise LoweringError(f"op {op_name}: int8 storage needs an int8 weight: {exc}") from None


def _pack_roles(g: Graph, arrays: dict[str, np.ndarray], defn, weights: dict[str, str], attrs: dict,
                quant: dict[str, Quantised] | None = None, op_name: str = "") -> None:
    """Point each packed role of an op at '<weight>.<tag>', making that array once. A role whose
    weight already has the tag's layout (a pass moved it between ops) is left as it is. An
    int8 role packs the weight's int8 provenance (`quant`, else derived exactly from it)."""
    for role, (tag, fn) in (defn.pack or {}).items():
        if role not in weights:
            continue
        tag = tag.format(**attrs)
        base = weights[role]
        if g.weights[base].pack == tag:
            continue
        packed = f"{base}.{tag}"
        if packed not in g.weights:
            src = (_int8_source(base, arrays, quant or {}, op_name) if role in defn.int8_roles else arrays[base])
            arrays[packed] = np.ascontiguousarray(fn(src, attrs), dtype=np.float32)
            src = g.weights[base]
            g.weights[packed] = WeightRef(packed, src.ref, src.fold, tuple(arrays[packed].shape), pack=tag)
        weights[role] = packed


def pack_weights(g: Graph, arrays: dict[str, np.ndarray]) -> None:
    """After the passes: pack the roles of ops they made (e.g. dft_conv1d's spectrum), drop the
    arrays no op reads any more and hash the new ones."""
    for op in g.ops:
        _pack_roles(g, arrays, OPS[op.type], op.weights, op.attrs)
    used = {w for op in g.ops for w in op.weights.values()}
    g.weights = {k: v for k, v in g.weights.items() if k in used}
    for k in [k for k in arrays if k not in used]:
        del arrays[k]
    for name, w in g.weights.items():
        if not w.sha256:
            w.sha256 = tensor_sha256(arrays[name])


def lower_circuit(circuit: dict, ckpt: Checkpoint, passes: list[Pass] = ()) -> tuple[Graph, dict[str, np.ndarray]]:
    """Return the graph and the FP32 arrays of the weights its ops use (after folding); weights
    with int8 provenance go to the ops' int8 twins and are stored packed as int8 + scales."""
    arrays = resolve_weights(circuit, ckpt)
    quant = resolve_quant(circuit, ckpt)
    g = Graph(name=circuit["name"],
              dims={k: (v["min"], v["max"]) for k, v in circuit["dims"].items()},
              inputs=[i["name"] for i in circuit["inputs"]], outputs=list(circuit["outputs"]))
    for inp in circuit["inputs"]:
        g.tensors[inp["name"]] = Tensor(inp["name"], inp["dtype"], tuple(inp["shape"]), "input")
    for name, spec in circuit["weights"].items():
        g.weights[name] = WeightRef(name, spec["ref"], spec.get("fold", "none"), tuple(arrays[name].shape))

    visible: dict[str, str] = {n: n for n in g.inputs}
    for block in circuit["blocks"]:
        repeat = block.get("repeat", 1)
        carry = block.get("input", {})
        (local, carried), = carry.items() if carry else ((None, None),)
        for i in range(repeat):
            prefix = f"{block['name']}.{i}." if (repeat > 1 or carry) else ""
            scope = dict(visible)
            if carry:
                scope[local] = visible[carried] if i == 0 else scope_prev_out
            for o, spec in enumerate(block["ops"]):
                _lower_op(g, arrays, spec, scope, prefix, f"{block['name']}.{i}.{o}" if repeat > 1 else f"{block['name']}.{o}",
                          quant)
            for ck in block.get("checkpoints", []):
                g.checkpoints.append(XrayPoint(ck["name"].format(i=i), scope[ck["tensor"]], ck["layout"], ck["axes"],
                                             ck.get("gate", {})))
            if carry:
                scope_prev_out = scope[block["output"]]
            else:
                visible.update({k: v for k, v in scope.items() if k not in visible})
        if carry:
            visible[block["name"]] = scope_prev_out
    g.outputs = [visible[o] for o in circuit["outputs"]]

    used = {w for op in g.ops for w in op.weights.values()}
    g.weights = {k: v for k, v in g.weights.items() if k in used}
    arrays = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in arrays.items() if k in used}
    for name, w in g.weights.items():
        w.sha256 = tensor_sha256(arrays[name])
    for p in passes:
        g = p(g)
    pack_weights(g, arrays)
    return g, arrays


def _same_kind(value, default) -> bool:
    """A given attr has its default's JSON kind (an int is a float; a bool is neither): the op's
    infer then meets only the types it was written for. Required attrs (default None) are the
    op's to check."""
    if default is None:
        return True
    if isinstance(default, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(default, bool)
    if isinstance(default, float):
        return isinstance(value, (int, float))
    return isinstance(value, type(default))


def _lower_op(g: Graph, arrays: dict, spec: dict, scope: dict[str, str], prefix: str, op_name: str,
              quant: dict[str, Quantised]) -> None:
    defn = OPS[spec["op"]]
    # A role ending in '?' is optional (e.g. a residual operand).
    required = {r for r in defn.inputs if not r.endswith("?")}
    allowed = required | {r[:-1] for r in defn.inputs if r.endswith("?")}
    missing_in = required - spec["in"].keys()
    extra_in = spec["in"].keys() - allowed
    if missing_in or extra_in:
        raise LoweringError(f"op {op_name} ({defn.name}): inputs must be {list(defn.inputs)}, got {list(spec['in'])}")
    wspec = spec.get("w", {})
    # A weight role ending in '?' is optional too (e.g. a conv bias).
    w_required = {r for r in defn.weights if not r.endswith("?")}
    w_allowed = w_required | {r[:-1] for r in defn.weights if r.endswith("?")}
    if not w_required <= set(wspec) <= w_allowed:
        raise LoweringError(f"op {op_name} ({defn.name}): weights must be {list(defn.weights)}, got {list(wspec)}")
    attrs = dict(defn.attrs)
    unknown = set(spec.get("attrs", {})) - set(defn.attrs)
    if unknown:
        raise LoweringError(f"op {op_name} ({defn.name}): unknown attr(s) {sorted(unknown)}")
    for k, v in spec.get("attrs", {}).items():
        if not _same_kind(v, defn.attrs[k]):
            raise LoweringError(f"op {op_name} ({defn.name}): attr '{k}' = {v!r} must be a "
                                f"{type(defn.attrs[k]).__name__} like its default {defn.attrs[k]!r}")
    attrs.update(spec.get("attrs", {}))
    absent = [k for k, v in attrs.items() if v is None]
    if absent:
        raise LoweringError(f"op {op_name} ({defn.name}): required attr(s) {absent} not given")
    inputs = {role: scope[t] for role, t in spec["in"].items()}
    weights = dict(wspec)
    shapes = {role: g.tensors[t].shape for role, t in inputs.items()}
    wshapes = {role: g.weights[w].shape for role, w in weights.items()}
    shape, dtype = defn.infer(op_name, shapes, wshapes, attrs)
    if defn.int8_twin and all(weights.get(r) in quant for r in OPS[defn.int8_twin].int8_roles):
        defn = OPS[defn.int8_twin]          # int8 weight storage: same infer, int8-reading kernel
    _pack_roles(g, arrays, defn, weights, attrs, quant, op_name)
    out = prefix + spec["out"]
    g.tensors[out] = Tensor(out, dtype, tuple(shape), "activation")
    g.ops.append(Op(op_name, defn.name, inputs, weights, attrs, out))
    scope[spec["out"]] = out
