"""A small builder for circuit documents (schema kcc.circuit/1, see kcc/circuits/__init__.py).

The model modules describe each upstream module once, as a function that adds its weights, ops
and checkpoints to a Circuit; build_circuits turns the result into the shipped JSON. Weights
keep their declaration order (it is the weight blob's layout), so a function declares them in
the order the circuit lists them, then wires its ops to the names it got back.
"""
from __future__ import annotations

import json

from kcc.circuits import SCHEMA


class ModelBuildError(Exception):
    """The builder was asked for something a circuit cannot hold (a name declared twice)."""


class Block:
    def __init__(self, name: str, repeat: int = 1, carry: tuple[str, str] | None = None,
                 output: str | None = None):
        self.doc: dict = {"name": name}
        if repeat > 1:
            self.doc["repeat"] = repeat
        if carry is not None:
            local, outer = carry
            self.doc["input"] = {local: outer}
        if output is not None:
            self.doc["output"] = output
        self.doc["ops"] = []

    def op(self, kind: str, ins: dict[str, str], out: str, w: dict[str, str] | None = None,
           attrs: dict | None = None) -> str:
        """Append one op; return its output tensor's name (for chaining)."""
        spec: dict = {"op": kind, "in": dict(ins)}
        if w is not None:
            spec["w"] = dict(w)
        if attrs is not None:
            spec["attrs"] = dict(attrs)
        spec["out"] = out
        self.doc["ops"].append(spec)
        return out

    def checkpoint(self, name: str, tensor: str, axes: tuple[str, ...], layout: str = "time_major",
                   gate: dict | None = None) -> None:
        ck = {"name": name, "tensor": tensor, "layout": layout, "dtype": "f32", "axes": list(axes)}
        if gate is not None:
            ck["gate"] = dict(gate)
        self.doc.setdefault("checkpoints", []).append(ck)


class Circuit:
    def __init__(self, name: str, description: str, dims: dict[str, tuple[int, int]],
                 capture: str | None = None):
        self.name, self.description, self.capture = name, description, capture
        self.dims = {d: {"min": lo, "max": hi} for d, (lo, hi) in dims.items()}
        self.inputs: list[dict] = []
        self.weights: dict[str, dict] = {}
        self.blocks: list[Block] = []
        self.outputs: list[str] = []

    def input(self, name: str, dtype: str, shape: list) -> str:
        self.inputs.append({"name": name, "dtype": dtype, "shape": list(shape)})
        return name

    def weight(self, name: str, ref: str, weight_norm: bool = False) -> str:
        """Declare a checkpoint tensor (weight_norm: the module's g / v pair, folded at lowering)."""
        if name in self.weights:
            raise ModelBuildError(f"{self.name}: weight '{name}' declared twice")
        self.weights[name] = {"ref": ref, "fold": "weight_norm"} if weight_norm else {"ref": ref}
        return name

    def block(self, name: str, **kw) -> Block:
        b = Block(name, **kw)
        self.blocks.append(b)
        return b

    def document(self) -> dict:
        doc: dict = {"schema": SCHEMA, "name": self.name, "description": self.description}
        if self.capture is not None:
            doc["capture"] = self.capture
        doc.update({"dims": self.dims, "inputs": self.inputs, "weights": self.weights,
                    "blocks": [b.doc for b in self.blocks], "outputs": list(self.outputs)})
        return doc


def serialise(doc: dict) -> str:
    """The shipped text of a circuit: one layout for every file, so --check can compare bytes."""
    return json.dumps(doc, indent=1, ensure_ascii=False) + "\n"
