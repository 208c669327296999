"""Graph passes that run after lowering, in order. Each takes and returns a Graph.

Fusion passes rewrite chains so intermediates never materialise; a tensor is fused away only
when its one consumer is the next op of the chain and it is neither a checkpoint nor an output
(X-Ray still sees every declared checkpoint). Fused ops compute bit-identical results.
spectral_convs and winograd_convs change the arithmetic (block DFTs for long convs, Winograd
F(m, 3) for K = 3 ones: fewer multiplies, same FP32 gate), so FUSION_PASSES leaves them out.
winograd_convs runs on fp32 builds only (`for_precision`): the bf16 and int8 passes rewrite the
direct convs it would replace into their own ops.
"""
from __future__ import annotations

from kcc.ir import Graph, Op, extent_value, max_dims
from kcc.ops import OPS, dft_conv, winograd_conv
from kcc.ops.conv import variant
from kcc.ops.elementwise import same_extent
from kcc.ops.fused import ATTRS as FUSED_ATTRS
from kcc.ops.fused import fits_norm_conv

RES_PRODUCERS = ("conv1d", "conv_transpose1d", "adain_conv1d", "dft_conv1d", "winograd_conv1d")


def drop_dead_ops(g: Graph) -> Graph:
    """Remove ops whose outputs reach neither a graph output nor a checkpoint."""
    needed = _pinned(g)
    keep = []
    for op in reversed(g.ops):
        if op.output in needed:
            keep.append(op)
            needed.update(op.inputs.values())
    g.ops = list(reversed(keep))
    live = {op.output for op in g.ops} | set(g.inputs)
    g.tensors = {k: v for k, v in g.tensors.items() if k in live}
    used = {w for op in g.ops for w in op.weights.values()}
    g.weights = {k: v for k, v in g.weights.items() if k in used}
    return g


def _consumers(g: Graph) -> dict[str, list[Op]]:
    out: dict[str, list[Op]] = {}
    for op in g.ops:
        for t in op.inputs.values():
            out.setdefault(t, []).append(op)
    return out


def _pinned(g: Graph) -> set[str]:
    """Tensors a pass must keep materialised: graph outputs and X-Ray checkpoints."""
    return set(g.outputs) | {c.tensor for c in g.checkpoints}


def _private(tensor: str, pinned: set[str], consumers: dict, reader: Op) -> bool:
    """tensor is read by `reader` only, and is no checkpoint or output."""
    return tensor not in pinned and [id(o) for o in consumers.get(tensor, [])] == [id(reader)]


def _gemm_conv(g: Graph, op: Op) -> tuple[int, int, int] | None:
    """(K, c_in, c_out) of a conv1d that reads only x and runs as the GEMM variant (stride 1,
    its weight in the GEMM pack [K, panels, Cin, 16]): what both conv rewrites start from."""
    if op.type != "conv1d" or set(op.inputs) != {"x"} or op.attrs["stride"] != 1:
        return None
    w, x = g.weights[op.weights["weight"]].shape, g.tensors[op.inputs["x"]].shape
    if len(w) != 4 or len(x) != 3:
        return None
    k, c_in, c_out = w[0], w[2], g.tensors[op.output].shape[2]
    return (k, c_in, c_out) if variant(c_in, c_out, op.attrs["groups"], op.attrs["dilation"], False) == "gemm" else None


def fuse_adain(g: Graph, fused: str, geometry) -> Graph:
    """adain -> conv becomes one `fused` op at the conv's place, for every conv that
    geometry(g, conv) accepts (it gives (K, c_in, ...), or None) whose adain output no one else
    reads and whose rows fit the fused tile; the conv's other inputs (a residual) come along."""
    consumers, pinned = _consumers(g), _pinned(g)
    drop: set[int] = set()
    for i, conv in enumerate(g.ops):
        found = geometry(g, conv)
        if found is None:
            continue
        norm = g.producer(conv.inputs["x"])
        if norm is None or norm.type != "adain" or not _private(conv.inputs["x"], pinned, consumers, conv):
            continue
        a, (k, c_in) = conv.attrs, found[:2]
        if not fits_norm_conv(c_in, a["dilation"] * (k - 1)):
            continue
        attrs = dict(FUSED_ATTRS, eps=norm.attrs["eps"], norm_act=norm.attrs["act"], norm_slope=norm.attrs["slope"],
                     padding=a["padding"], dilation=a["dilation"], act=a["act"], slope=a["slope"])
        inputs = {**norm.inputs, **{name: t for name, t in conv.inputs.items() if name != "x"}}
        g.ops[i] = Op(conv.name, fused, inputs, {**norm.weights, **conv.weights}, attrs, conv.output)
        drop.add(id(norm))
    g.ops = [op for op in g.ops if id(op) not in drop]
    return drop_dead_ops(g)


def fuse_adain_conv(g: Graph) -> Graph:
    """adain -> conv1d (GEMM path, fits the tile) becomes one adain_conv1d at the conv's place."""
    return fuse_adain(g, "adain_conv1d", _gemm_conv)


def spectral_convs(g: Graph) -> Graph:
    """A stride-1 conv1d with a bias for which the cost model (kcc.ops.dft_conv.choose) picks a
    DFT length (long kernels: K = 7, 11 at 128+ channels) becomes dft_conv1d at that length (its
    spectrum is packed once after the passes); below min_rows input rows the kernel runs the
    direct conv, and a conv whose planned dims never reach min_rows stays direct.
    Runs before fuse_adain_conv: such convs read a materialised adain (its traffic is small
    next to the conv's multiplies)."""
    ops: list[Op] = []
    top = max_dims(g.dims)
    for op in g.ops:
        geometry = _gemm_conv(g, op)
        if geometry is None or "bias" not in op.weights:
            ops.append(op)
            continue
        (k, c_in, c_out), a = geometry, op.attrs
        choice = dft_conv.choose(c_in, c_out, k)
        x_shape = g.tensors[op.inputs["x"]].shape
        if choice is None or extent_value(x_shape[0], top) * extent_value(x_shape[1], top) < choice.min_rows:
            ops.append(op)             # never pays within the planned dims: keep the direct conv and its fusion
            continue
        conv = Op(op.name, "dft_conv1d", {"x": op.inputs["x"]}, {**op.weights, "spectrum": op.weights["weight"]},
                  {"n": choice.n, "k_size": k, "c_out": c_out, "min_rows": choice.min_rows, "padding": a["padding"],
                   "dilation": a["dilation"], "act": a["act"], "slope": a["slope"]}, op.output)
        ws = {role: g.weights[name].shape for role, name in conv.weights.items()}
        out, _ = OPS[conv.type].infer(conv.name, {"x": x_shape}, ws, conv.attrs)
        assert all(same_extent(p, q) for p, q in zip(out, g.tensors[op.output].shape)), (op.name, out)
        ops.append(conv)
    g.ops = ops
    return g


def winograd_convs(g: Graph) -> Graph:
    """A K = 3 conv with a bias on the GEMM pack, conv1d (stride 1, its GEMM variant) or
    adain_conv1d (its norm comes along), for which the cost model (kcc.ops.winograd_conv.choose)
    picks an m becomes winograd_conv1d at that m (its slot weights packed after the passes).
    Runs after fuse_adain_conv (so the norm it fused stays fused) and before fuse_residual_add."""
    for i, op in enumerate(g.ops):
        if op.type == "adain_conv1d" and "bias" in op.weights:
            w = g.weights[op.weights["weight"]].shape
            found = (w[0], w[2], g.tensors[op.output].shape[2]) if len(w) == 4 else None
        else:
            found = _gemm_conv(g, op) if "bias" in op.weights else None
        if found is None or found[0] != winograd_conv.K:
            continue
        _, c_in, c_out = found
        a, norm = op.attrs, op.type == "adain_conv1d"
        choice = winograd_conv.choose(c_in, c_out, a["dilation"], norm)
        if choice is None:
            continue
        attrs = {**OPS["winograd_conv1d"].attrs, "m": choice.m, "c_out": c_out,
                 **{k: a[k] for k in ("padding", "dilation", "act", "slope")}}
        if norm:
            attrs.update({k: a[k] for k in ("eps", "norm_act", "norm_slope")})
        conv = Op(op.name, "winograd_conv1d", dict(op.inputs), dict(op.weights), attrs, op.output)
        shapes = {role: g.tensors[t].shape for role, t in conv.inputs.items()}
        ws = {role: g.weights[name].shape for role, name in conv.weights.items()}
        out, _ = OPS[conv.type].infer(conv.name, shapes, ws, conv.attrs)
        assert all(same_extent(p, q) for p, q in zip(out, g.tensors[op.output].shape)), (op.name, out)
        g.ops[i] = conv
    return g


def fuse_residual_add(g: Graph) -> Graph:
    """add(a, b) (no scale, divisor or act) where one operand comes from a conv read only by
    this add, and the other exists before that conv runs, becomes the conv's `res` epilogue."""
    consumers, pinned = _consumers(g), _pinned(g)
    index = {id(op): i for i, op in enumerate(g.ops)}
    drop: set[int] = set()
    for add in g.ops:
        if (add.type != "add" or set(add.inputs) != {"a", "b"}
                or (add.attrs["scale"], add.attrs["divisor"], add.attrs["act"]) != (1.0, 1.0, "none")):
            continue
        for role, other in (("a", "b"), ("b", "a")):
            t, res = add.inputs[role], add.inputs[other]
            prod = g.producer(t)
            if prod is None or prod.type not in RES_PRODUCERS or "res" in prod.inputs or id(prod) in drop:
                continue
            if not _private(t, pinned, consumers, add):
                continue
            rp = g.producer(res)
            if rp is not None and index[id(rp)] >= index[id(prod)]:
                continue
            if not all(same_extent(p, q) for p, q in zip(g.tensors[res].shape, g.tensors[t].shape)):
                continue
            prod.inputs["res"] = res
            prod.output = add.output
            drop.add(id(add))
            break
    g.ops = [op for op in g.ops if id(op) not in drop]
    return drop_dead_ops(g)


FUSION_PASSES = [drop_dead_ops, fuse_adain_conv, fuse_residual_add]    # bit-identical to no passes
DEFAULT_PASSES = [drop_dead_ops, spectral_convs, fuse_adain_conv, winograd_convs, fuse_residual_add]
FP32_ONLY = (winograd_convs,)


def for_precision(passes: list, precision: str) -> list:
    """`passes` as a build of that precision runs them: without the fp32-only ones below fp32."""
    return list(passes) if precision == "fp32" else [p for p in passes if p not in FP32_ONLY]
