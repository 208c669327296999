"""Semantic ops: what each circuit op means, its output shape, and which kernel computes it.

An OpDef's `infer` gives the output extent from input and weight shapes (and rejects
mismatches by name); its `bind` maps the op onto one registered kernel, argument by argument,
as C expressions. The emitter checks that mapping against the kernel's recorded signature.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kcc.ir import Shape


class LoweringError(Exception):
    """An op cannot be lowered as declared; the message names the op and the problem."""


@dataclass
class BindContext:
    """What `bind` may ask about the op being lowered; all answers are C expressions."""
    op_name: str
    in_ptr: dict[str, str]
    in_shape: dict[str, Shape]
    w_ptr: dict[str, str]
    w_shape: dict[str, tuple[int, ...]]
    out_ptr: str
    attrs: dict

    @staticmethod
    def extent(e) -> str:
        return str(e)

    def rows(self, role: str) -> str:
        """Product of every extent but the last: the row count of a [..., C] tensor."""
        return "*".join(f"(int64_t)({self.extent(e)})" for e in self.in_shape[role][:-1]) or "1"

    def dim(self, role: str, axis: int) -> str:
        return self.extent(self.in_shape[role][axis])


@dataclass(frozen=True)
class OpDef:
    name: str
    inputs: tuple[str, ...]
    weights: tuple[str, ...]
    attrs: dict                     # name -> default (None: required)
    infer: Callable[[str, dict, dict, dict], tuple[Shape, str]]
    bind: Callable[[BindContext], tuple[str, dict[str, str]]]


OPS: dict[str, OpDef] = {}


def _op(defn: OpDef) -> OpDef:
    OPS[defn.name] = defn
    return defn


def _expect(cond: bool, op_name: str, msg: str) -> None:
    if not cond:
        raise LoweringError(f"op {op_name}: {msg}")


def _f32(x) -> str:
    return f"{float(x)!r}f"


# -- embedding_three_table_layer_norm --------------------------------------------------------

def _emb_infer(name, ins, ws, attrs):
    ids, tids = ins["ids"], ins["type_ids"]
    _expect(len(ids) == 2, name, f"ids must be [batch, token], got {list(ids)}")
    _expect(tuple(ids) == tuple(tids), name, f"type_ids extent {list(tids)} differs from ids {list(ids)}")
    chan = ws["word"][1]
    for role in ("word", "position", "type"):
        _expect(len(ws[role]) == 2 and ws[role][1] == chan, name,
                f"weight '{role}' has shape {ws[role]}, expected [rows, {chan}]")
    for role in ("gamma", "beta"):
        _expect(tuple(ws[role]) == (chan,), name, f"weight '{role}' has shape {ws[role]}, expected [{chan}]")
    return (*ids, chan), "f32"


def _emb_bind(ctx: BindContext):
    return "kcc_embedding_three_table_layer_norm_f32", {
        "ids": ctx.in_ptr["ids"], "type_ids": ctx.in_ptr["type_ids"],
        "n_seq": ctx.dim("ids", 0), "n_tok": ctx.dim("ids", 1),
        "word": ctx.w_ptr["word"], "n_word": str(ctx.w_shape["word"][0]),
        "position": ctx.w_ptr["position"], "n_position": str(ctx.w_shape["position"][0]),
        "type": ctx.w_ptr["type"], "n_type": str(ctx.w_shape["type"][0]),
        "gamma": ctx.w_ptr["gamma"], "beta": ctx.w_ptr["beta"],
        "n_chan": str(ctx.w_shape["word"][1]), "eps": _f32(ctx.attrs["eps"]), "out": ctx.out_ptr,
    }


_op(OpDef("embedding_three_table_layer_norm", ("ids", "type_ids"),
          ("word", "position", "type", "gamma", "beta"), {"eps": None}, _emb_infer, _emb_bind))
