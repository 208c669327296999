"""Per-op cost model: FLOPs and compulsory bytes moved, from the IR graph at given dim values.

FLOPs are nominal: one per add or multiply (a multiply-add is 2), one per division, compare
or transcendental (sigmoid: 3), counting what the kernel does (the STFT kernels run a direct
DFT, so they are charged n_fft * bins per frame, not an FFT's n log n; conv taps that land in
the zero padding are charged too). Bytes are compulsory traffic: every distinct input, weight
(in its packed layout, as the kernel reads it) and output touched once; re-reads that a cache
absorbs (the LSTM's W_hh per step, attention's K/V per query) are not counted. Formulas are
defined with each op (OpDef.cost, next to its kernel binding and reference); an op type without
one gets flops None and the report says so.
"""
from __future__ import annotations

from dataclasses import dataclass

from kcc.ir import DTYPE_BYTES, Graph, Op, extent_value
from kcc.ops import OPS, BindContext
from kcc.ops.dft_conv import reads_spectrum


@dataclass
class OpCost:
    name: str
    type: str
    flops: int | None            # None: no formula for this op type
    bytes_in: int                # activations and graph inputs read
    bytes_w: int                 # weights read (packed layout)
    bytes_out: int
    fused: str = ""              # epilogues folded into the op (act, residual, extra operands)

    @property
    def bytes(self) -> int:
        return self.bytes_in + self.bytes_w + self.bytes_out

    @property
    def intensity(self) -> float:
        return (self.flops or 0) / self.bytes if self.bytes else 0.0


@dataclass
class _View:
    """What a formula sees: shapes as ints at the given dims, attrs, kernel args."""
    op: Op
    ins: dict[str, tuple[int, ...]]
    out: tuple[int, ...]
    w: dict[str, tuple[int, ...]]
    attrs: dict
    kernel_args: dict[str, str]

    def n(self, shape) -> int:
        p = 1
        for e in shape:
            p *= e
        return p

    @property
    def n_out(self) -> int:
        return self.n(self.out)

    def karg(self, name: str) -> int:
        return int(self.kernel_args[name])


# Byte rules read an op's roles, not its type name, so a precision twin (embedding_q8,
# dft_conv1d_bf16, adain_conv1d_bf16) is costed as its FP32 op is.
def _gathers(op: Op) -> bool:
    """A table lookup: it reads one table row per id, not the table."""
    return "ids" in op.inputs


def _reads_one_layout(op: Op) -> bool:
    """A block-DFT conv: it holds the weight in two layouts and reads one (reads_spectrum)."""
    return "spectrum" in op.weights


def bind_op(g: Graph, op: Op) -> tuple[str, dict[str, str]]:
    """The kernel `op` binds to and its arguments, as its OpDef binds them (pointers are placeholders)."""
    ctx = BindContext(op_name=op.name, in_ptr={r: f"in_{r}" for r in op.inputs},
                      in_shape={r: g.tensors[t].shape for r, t in op.inputs.items()},
                      w_ptr={r: f"w_{r}" for r in op.weights},
                      w_shape={r: g.weights[w].shape for r, w in op.weights.items()},
                      out_ptr="out", attrs=op.attrs, out_shape=g.tensors[op.output].shape)
    return OPS[op.type].bind(ctx)


def _fused(op: Op) -> str:
    parts = [f"{op.attrs['norm_act']}>conv"] if "norm_act" in op.attrs else []
    if _reads_one_layout(op):
        parts.append(f"dft{op.attrs['n']}")
    act = op.attrs.get("act", "none")
    if act != "none":
        parts.append(act)
    if "res" in op.inputs:
        parts.append("+res")
    if op.type == "add" and len(op.inputs) > 2:
        parts.append(f"{len(op.inputs)} operands")
    return ",".join(parts)


def tensor_bytes(g: Graph, name: str, dims: dict[str, int]) -> int:
    t = g.tensors[name]
    return t.numel(dims) * DTYPE_BYTES[t.dtype]


def weight_bytes(g: Graph, name: str) -> int:
    n = 4
    for e in g.weights[name].shape:
        n *= e
    return n


def op_cost(g: Graph, op: Op, dims: dict[str, int]) -> OpCost:
    shape = lambda s: tuple(extent_value(e, dims) for e in s)  # noqa: E731
    ins = {r: shape(g.tensors[t].shape) for r, t in op.inputs.items()}
    v = _View(op, ins, shape(g.tensors[op.output].shape),
              {r: g.weights[w].shape for r, w in op.weights.items()}, op.attrs, bind_op(g, op)[1])
    fn = OPS[op.type].cost
    w_bytes = {w: weight_bytes(g, w) for w in set(op.weights.values())}
    if _gathers(op):
        tokens = v.n(v.out[:-1])
        w_bytes = {w: min(n, tokens * g.weights[w].shape[-1] * 4) if len(g.weights[w].shape) == 2 else n
                   for w, n in w_bytes.items()}
    reads = set(op.inputs.values())
    out_bytes = tensor_bytes(g, op.output, dims)
    if _reads_one_layout(op):
        w_bytes.pop(op.weights["weight" if reads_spectrum(v) else "spectrum"], None)
    return OpCost(op.name, op.type, fn(v) if fn else None, sum(tensor_bytes(g, t, dims) for t in reads),
                  sum(w_bytes.values()), out_bytes, _fused(op))


def graph_costs(g: Graph, dims: dict[str, int]) -> list[OpCost]:
    missing = [d for d in g.dims if d not in dims]
    if missing:
        raise ValueError(f"circuit '{g.name}': no value for dim(s) {missing}")
    return [op_cost(g, op, dims) for op in g.ops]
