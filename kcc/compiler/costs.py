"""Per-op cost model: FLOPs and compulsory bytes moved, from the IR graph at given dim values.

FLOPs are nominal: one per add or multiply (a multiply-add is 2), one per division, compare
or transcendental (sigmoid: 3), counting what the kernel does (the STFT kernels run a direct
DFT, so they are charged n_fft * bins per frame, not an FFT's n log n; conv taps that land in
the zero padding are charged too). Bytes are compulsory traffic: every distinct input, weight
(in its packed layout, as the kernel reads it) and output touched once; re-reads that a cache
absorbs (the LSTM's W_hh per step, attention's K/V per query) are not counted. Formulas are
keyed by op type; an op type without one gets flops None and the report says so.
"""
from __future__ import annotations

import math

from dataclasses import dataclass
from typing import Callable

from kcc.compiler.ir import DTYPE_BYTES, Graph, Op, extent_value
from kcc.ops import OPS, BindContext

ACT_FLOPS = {"none": 0, "relu": 1, "leaky_relu": 1, "tanh": 1, "sigmoid": 3, "gelu_new": 8, "snake": 5}


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


def _epilogue(v: _View, per: int) -> int:
    """Bias, fused activation and fused residual: each one op per output element."""
    f = 0
    if "bias" in v.w:
        f += per
    f += ACT_FLOPS.get(v.attrs.get("act", "none"), 1) * per
    if "res" in v.ins:
        f += per
    return f


def _linear(v: _View) -> int:
    k, n = v.ins["x"][-1], v.out[-1]
    m = v.n(v.ins["x"]) // k
    return 2 * m * k * n + _epilogue(v, m * n)


def _conv(v: _View) -> int:
    x = v.ins["x"]
    c_in = x[2] if len(x) == 3 else 1
    b, _, c_out = v.out
    g, k = v.attrs["groups"], v.karg("k_size")
    if v.op.type == "conv_transpose1d":       # every input row scatters to (Cout/g) * K outputs
        mac = b * x[1] * c_in * (c_out // g) * k
    else:                                      # every output row gathers (Cin/g) * K inputs
        mac = b * v.out[1] * c_out * (c_in // g) * k
    return 2 * mac + _epilogue(v, v.n_out)


def _attention(v: _View) -> int:
    """QK^T and PV (2 B T^2 W each), softmax (scale, max, subtract, exp, sum: 5 per score),
    the final 1/denominator per output element. Every key counted (lengths = T)."""
    b, t, w = v.ins["q"]
    h = v.karg("heads")
    return 4 * b * t * t * w + 5 * b * h * t * t + b * t * w


def _layer_norm(v: _View) -> int:
    n = v.n_out                                # mean 1, variance 3, normalise 2, affine 2
    return 8 * n + (n if "res" in v.ins else 0)


def _adain(v: _View) -> int:
    b, s = v.ins["style"]
    c2 = v.w["fc_b"][0]
    n = v.n_out                                # fc(style) + instance norm + (1+gamma)*xn+beta
    return 2 * b * s * c2 + b * c2 + 8 * n + ACT_FLOPS[v.attrs["act"]] * n


def _adain_conv1d(v: _View) -> int:
    """The fused adain -> conv1d (kcc.compiler.passes.fuse_adain_conv): both formulas, on the adain's
    input (its act is attr norm_act) and the conv's output."""
    b, s = v.ins["style"]
    c_in = v.ins["x"][2]
    n_in = v.n(v.ins["x"])
    norm = 2 * b * s * 2 * c_in + b * 2 * c_in + (8 + ACT_FLOPS[v.attrs["norm_act"]]) * n_in
    b, t_out, c_out = v.out
    return norm + 2 * b * t_out * c_out * c_in * v.karg("k_size") + _epilogue(v, v.n_out)


def _dft_rows(v: _View) -> bool:
    """dft_conv1d below min_rows input rows runs the direct conv (its spectrum is not read)."""
    b, t, _ = v.ins["x"]
    return b * t >= v.attrs["min_rows"]


def _dft_conv1d(v: _View) -> int:
    """Per tile of h = n-K+1 outputs and slot: the input DFT (n rows x 2 Cin), three real GEMM
    rows of Cin x padded Cout (Gauss), the inverse (h rows x 2 Cout); tiles as the kernel cuts
    them (every residue of the dilation the same count). Below min_rows: the direct conv's."""
    b, t_out, c_out = v.out
    c_in, k, n, d = v.ins["x"][2], v.attrs["k_size"], v.attrs["n"], v.attrs["dilation"]
    if not _dft_rows(v):
        return 2 * b * t_out * c_out * c_in * k + _epilogue(v, v.n_out)
    h, cols = n - k + 1, v.w["spectrum"][2] * v.w["spectrum"][4]
    tiles = b * d * math.ceil(math.ceil(t_out / d) / h)           # per residue, from residue 0's outputs
    per_slot = 2 * (n * 2 * c_in + 3 * c_in * cols + h * 2 * c_out)
    return tiles * n // 2 * per_slot + _epilogue(v, v.n_out)


def _lstm_gates(v: _View) -> int:
    k = v.ins["x"][-1]
    m = v.n(v.ins["x"]) // k
    g = v.out[-1]
    return 2 * (2 * m * k * g + m * g)


def _bilstm(v: _View) -> int:
    """Per direction and step: W_hh h (8H^2), + b_hh + input gates (8H), gate
    nonlinearities (4H), cell and hidden update (5H)."""
    _, b, t, g4 = v.ins["gates"]
    h = g4 // 4
    return 2 * b * t * (8 * h * h + 17 * h)


def _harmonic_source(v: _View) -> int:
    """Per output sample and harmonic: phase step, cumsum, wrap, sin, amplitude, voicing,
    noise (10); then the merge Linear and tanh (2 per harmonic + 2)."""
    h = v.w["mix_w"][1]
    return v.n_out * (12 * h + 2)


def _stft(v: _View) -> int:
    b, frames, width = v.out
    n, bins = width - 2, width // 2
    return b * frames * (n + 4 * n * bins + 4 * bins)        # window, direct DFT, |X| and angle


def _istft(v: _View) -> int:
    b, frames, width = v.ins["x"]
    n, bins = width - 2, width // 2
    spec = 6 if v.attrs["spec"] == "exp_sin" else 4           # to rectangular (+ exp, sin)
    return b * frames * (spec * bins + 4 * n * bins + 3 * n) + v.n_out


def _add(v: _View) -> int:
    n = v.n_out
    extra = sum(1 for r in ("b", "c", "d") if r in v.ins)
    extra += (v.attrs["scale"] != 1.0) + (v.attrs["divisor"] != 1.0) + (v.attrs["act"] != "none")
    return extra * n


def _durations(v: _View) -> int:
    b, t, k = v.ins["logits"]
    return 4 * b * t * k + b * t                               # sigmoid 3 + sum 1, / speed


def _random_fill(v: _View) -> int:
    return (5 if v.attrs["dist"] == "normal" else 1) * v.n_out  # Box-Muller log/sqrt/cos/mul


def _zero(v: _View) -> int:
    return 0


FORMULAS: dict[str, Callable[[_View], int]] = {
    "linear": _linear, "conv1d": _conv, "conv_transpose1d": _conv, "attention": _attention,
    "layer_norm": _layer_norm, "adain": _adain, "adain_conv1d": _adain_conv1d, "lstm_gates": _lstm_gates, "bilstm": _bilstm,
    "dft_conv1d": _dft_conv1d,
    "harmonic_source": _harmonic_source, "stft": _stft, "istft": _istft, "add": _add,
    "leaky_relu": lambda v: v.n_out, "durations": _durations, "random_fill": _random_fill,
    "ada_layer_norm": lambda v: 10 * v.n_out,
    "embedding_three_table_layer_norm": lambda v: 10 * v.n_out,   # two adds + LayerNorm
    # data movement only
    "embedding": _zero, "concat": _zero, "upsample_nearest": _zero, "reflection_pad": _zero,
    "sequence_mask": _zero, "concat_style": _zero, "check_finite": _zero, "squeeze": _zero,
    "expand_by_durations": _zero,
}


GATHERS = ("embedding", "embedding_three_table_layer_norm")


def _kernel_args(g: Graph, op: Op) -> dict[str, str]:
    """The op's kernel arguments as its OpDef binds them (pointers are placeholders)."""
    ctx = BindContext(op_name=op.name, in_ptr={r: f"in_{r}" for r in op.inputs},
                      in_shape={r: g.tensors[t].shape for r, t in op.inputs.items()},
                      w_ptr={r: f"w_{r}" for r in op.weights},
                      w_shape={r: g.weights[w].shape for r, w in op.weights.items()},
                      out_ptr="out", attrs=op.attrs, out_shape=g.tensors[op.output].shape)
    return OPS[op.type].bind(ctx)[1]


def _fused(op: Op) -> str:
    parts = [f"{op.attrs['norm_act']}>conv"] if op.type == "adain_conv1d" else []
    if op.type == "dft_conv1d":
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
              {r: g.weights[w].shape for r, w in op.weights.items()}, op.attrs, _kernel_args(g, op))
    fn = FORMULAS.get(op.type)
    w_bytes = {w: weight_bytes(g, w) for w in set(op.weights.values())}
    if op.type in GATHERS:          # a lookup reads one table row per token, not the table
        tokens = v.n(v.out[:-1])
        w_bytes = {w: min(n, tokens * g.weights[w].shape[-1] * 4) if len(g.weights[w].shape) == 2 else n
                   for w, n in w_bytes.items()}
    reads = set(op.inputs.values())
    out_bytes = tensor_bytes(g, op.output, dims)
    if op.type == "dft_conv1d":                      # one of its two layouts of the weight is read
        w_bytes.pop(op.weights["weight" if _dft_rows(v) else "spectrum"], None)
    return OpCost(op.name, op.type, fn(v) if fn else None, sum(tensor_bytes(g, t, dims) for t in reads),
                  sum(w_bytes.values()), out_bytes, _fused(op))


def graph_costs(g: Graph, dims: dict[str, int]) -> list[OpCost]:
    missing = [d for d in g.dims if d not in dims]
    if missing:
        raise ValueError(f"circuit '{g.name}': no value for dim(s) {missing}")
    return [op_cost(g, op, dims) for op in g.ops]
