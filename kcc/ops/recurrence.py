"""Recurrent ops: a bidirectional single-layer LSTM (torch.nn.LSTM, bidirectional=True) as two ops.

`lstm_gates` does the input-to-gate GEMM for every timestep and both directions at once into a
planned arena tensor [2, B, T, 4H] (direction-major; it dies right after the recurrence, so
the planner reuses its bytes). `bilstm` runs the recurrence over it with W_hh:
x [B, T, Cin] -> [B, T, 2H] (forward half first, as torch). attr `packed`: true reproduces
pack_padded_sequence / pad_packed_sequence (sequence b covers t < lengths[b]; the reverse
direction starts at lengths[b]-1; padded rows are 0) and needs `lengths` [B] i32; false runs
every sequence over all T rows (torch called on a plain tensor) and takes no lengths.
Weights in torch's layout: weight_ih_l0 [4H, Cin], weight_hh_l0 [4H, H], biases [4H], and
the *_reverse ones; gate order i, f, g, o.
`lstm_gates_q8` / `bilstm_q8` are their int8-storage twins (kcc.weights.quantised): W_ih and W_hh
packed as int8 + one scale per gate row, expanded in registers; the same bits as the f32 ops.
"""
from __future__ import annotations

import numpy as np

from kcc.kernels.registry import Contract, I64, IN_F32, IN_I32, Kernel, OUT_F32, WEIGHT, c_constant, register
from kcc.ops.core import BindContext, Case, OpDef, define_op, expect
from kcc.ops.dense import int8_exact, pack_panels, pack_q8_panels, q8_words

MAX_HIDDEN = c_constant("lstm_bidirectional_f32.c", "KCC_LSTM_MAX_HIDDEN")   # fixed local state

register(Kernel(
    name="kcc_lstm_input_gates_f32",
    source="lstm_input_gates_f32.c",
    args=(("x", IN_F32), ("rows", I64), ("k", I64), ("wp_fwd", WEIGHT), ("b_fwd", WEIGHT),
          ("wp_rev", WEIGHT), ("b_rev", WEIGHT), ("n_gate", I64), ("gates", OUT_F32)),
    contract=Contract(accumulation="kcc_linear_f32 per direction: one f32 accumulator per gate in k order, + b_ih",
                      tolerance=2e-5, notes="x and gates must not alias"),
    requires=("kcc_linear_f32",),
))

register(Kernel(
    name="kcc_bilstm_f32",
    source="lstm_bidirectional_f32.c",
    args=(("pre", IN_F32), ("lengths", IN_I32), ("n_seq", I64), ("n_tok", I64),
          ("whh_fwd", WEIGHT), ("bhh_fwd", WEIGHT), ("whh_rev", WEIGHT), ("bhh_rev", WEIGHT),
          ("hidden", I64), ("packed", I64), ("out", OUT_F32)),
    contract=Contract(
        accumulation="W_hh h: one f32 accumulator per gate in k order, then + b_hh, then + input gates; "
                     "sigmoid/tanh in f64 on kcc_exp_f64 (correctly rounded in tests), rounded once; "
                     "cell update rounded per op in f32 as torch",
        tolerance=2e-5,
        notes=f"hidden <= {MAX_HIDDEN} (fixed local state); lengths checked in [1, T] when packed, "
              "not read when not packed; errors compound over steps only through the (contracting) recurrence"),
))


register(Kernel(
    name="kcc_lstm_input_gates_q8",
    source="lstm_input_gates_q8.c",
    args=(("x", IN_F32), ("rows", I64), ("k", I64), ("wq_fwd", WEIGHT), ("b_fwd", WEIGHT),
          ("wq_rev", WEIGHT), ("b_rev", WEIGHT), ("n_gate", I64), ("gates", OUT_F32)),
    contract=Contract(accumulation="kcc_lstm_input_gates_f32's on the dequantised W_ih (kcc_linear_q8): the same bits",
                      tolerance=2e-5, notes="wq_*: dense.pack_q8_panels words; x and gates must not alias"),
    requires=("kcc_linear_q8",),
))

register(Kernel(
    name="kcc_bilstm_q8",
    source="lstm_bidirectional_q8.c",
    args=(("pre", IN_F32), ("lengths", IN_I32), ("n_seq", I64), ("n_tok", I64),
          ("whq_fwd", WEIGHT), ("bhh_fwd", WEIGHT), ("whq_rev", WEIGHT), ("bhh_rev", WEIGHT),
          ("hidden", I64), ("packed", I64), ("out", OUT_F32)),
    contract=Contract(accumulation="kcc_bilstm_f32's, each W_hh term (float)q * scale (exact, rounded once): "
                                   "the same bits as kcc_bilstm_f32 on the dequantised W_hh",
                      tolerance=2e-5, notes="whq_*: pack_q8_transposed words (scales [4H], int8 [H][4H])"),
    requires=("kcc_bilstm_f32",),
))


def pack_q8_transposed(quant, attrs=None) -> np.ndarray:
    """Quantised W_hh [4H, H] -> scales [4H] then int8 [H, 4H] (the f32 layout's transpose)."""
    return q8_words(quant.scale, np.ascontiguousarray(quant.q.T))


def _transpose(w: np.ndarray, attrs=None) -> np.ndarray:
    """W_hh [4H, H] -> [H, 4H]: row k holds every gate's weight on h[k] (contiguous axpy)."""
    return np.ascontiguousarray(w.T)


# -- lstm_gates --------------------------------------------------------------------------------

def _gates_infer(name, ins, ws, attrs):
    x = ins["x"]
    expect(len(x) == 3, name, f"x must be [batch, time, channel], got {list(x)}")
    wf, wr = ws["w_fwd"], ws["w_rev"]
    expect(len(wf) == 2 and wf[0] % 4 == 0, name, f"w_fwd must be [4H, Cin], got {list(wf)}")
    expect(tuple(wr) == tuple(wf), name, f"w_rev shape {list(wr)} differs from w_fwd {list(wf)}")
    expect(wf[1] == x[-1], name, f"x channels {x[-1]} differ from weight Cin = {wf[1]}")
    for role in ("b_fwd", "b_rev"):
        expect(tuple(ws[role]) == (wf[0],), name, f"{role} has shape {list(ws[role])}, expected [{wf[0]}]")
    return (2, x[0], x[1], wf[0]), "f32"


def _gates_bind(ctx: BindContext):
    return "kcc_lstm_input_gates_f32", {
        "x": ctx.in_ptr["x"], "rows": ctx.rows("x"), "k": ctx.dim("x", -1),
        "wp_fwd": ctx.w_ptr["w_fwd"], "b_fwd": ctx.w_ptr["b_fwd"],
        "wp_rev": ctx.w_ptr["w_rev"], "b_rev": ctx.w_ptr["b_rev"],
        "n_gate": str(ctx.w_shape["b_fwd"][0]), "gates": ctx.out_ptr,
    }


def _gates_reference(ins, ws, a):
    x = ins["x"].astype(np.float64)
    return np.stack([x @ ws[f"w_{d}"].astype(np.float64).T + ws[f"b_{d}"].astype(np.float64) for d in ("fwd", "rev")])


def _gates_cases():
    rng = np.random.default_rng(70)

    def case(name, b, t, c_in, hidden):
        w = lambda *s: (rng.standard_normal(s) / np.sqrt(s[-1])).astype(np.float32)  # noqa: E731
        return Case(name, {"x": rng.standard_normal((b, t, c_in)).astype(np.float32)},
                    {"w_fwd": w(4 * hidden, c_in), "b_fwd": w(4 * hidden), "w_rev": w(4 * hidden, c_in),
                     "b_rev": w(4 * hidden)})
    return [case("odd", 2, 5, 7, 3), case("panel_tail_k_over_chunk", 1, 9, 131, 13)]


def _gates_cost(v) -> int:
    k = v.ins["x"][-1]
    m = v.n(v.ins["x"]) // k
    g = v.out[-1]
    return 2 * (2 * m * k * g + m * g)


def _gates_bind_q8(ctx: BindContext):
    _, args = _gates_bind(ctx)
    args["wq_fwd"], args["wq_rev"] = args.pop("wp_fwd"), args.pop("wp_rev")
    return "kcc_lstm_input_gates_q8", args


def _gates_q8_cases():
    rng = np.random.default_rng(72)

    def case(name, b, t, c_in, hidden):
        bias = lambda: rng.standard_normal(4 * hidden).astype(np.float32)  # noqa: E731
        return Case(name, {"x": rng.standard_normal((b, t, c_in)).astype(np.float32)},
                    {"w_fwd": int8_exact(rng, 4 * hidden, c_in), "b_fwd": bias(),
                     "w_rev": int8_exact(rng, 4 * hidden, c_in), "b_rev": bias()})
    return [case("odd", 2, 5, 7, 3), case("panel_tail_k_over_chunk", 1, 9, 131, 13)]


define_op(OpDef("lstm_gates", ("x",), ("w_fwd", "b_fwd", "w_rev", "b_rev"), {}, _gates_infer, _gates_bind,
                pack={"w_fwd": ("panel16", pack_panels), "w_rev": ("panel16", pack_panels)},
                reference=_gates_reference, cases=_gates_cases, cost=_gates_cost, int8_twin="lstm_gates_q8"))
define_op(OpDef("lstm_gates_q8", ("x",), ("w_fwd", "b_fwd", "w_rev", "b_rev"), {}, _gates_infer, _gates_bind_q8,
                pack={"w_fwd": ("q8panel16", pack_q8_panels), "w_rev": ("q8panel16", pack_q8_panels)},
                reference=_gates_reference, cases=_gates_q8_cases, cost=_gates_cost, int8_roles=("w_fwd", "w_rev")))


# -- bilstm ----------------------------------------------------------------------------------

def _lstm_infer(name, ins, ws, attrs):
    g = ins["gates"]
    expect(isinstance(attrs["packed"], bool), name, f"attr packed must be true or false, got {attrs['packed']!r}")
    expect(len(g) == 4 and g[0] == 2, name, f"gates must be [2, batch, time, 4H] (an lstm_gates output), got {list(g)}")
    wf = ws["w_hh_fwd"]          # torch layout here; bind sees the packed [H, 4H]
    expect(len(wf) == 2 and wf[0] == 4 * wf[1], name, f"w_hh_fwd must be [4H, H], got {list(wf)}")
    hidden = wf[1]
    expect(g[3] == 4 * hidden, name, f"gates width {g[3]} differs from 4H = {4 * hidden} of w_hh")
    expect(hidden <= MAX_HIDDEN, name, f"hidden size {hidden} exceeds the kernel's {MAX_HIDDEN}")
    expect(tuple(ws["w_hh_rev"]) == tuple(wf), name, "w_hh_rev shape differs from w_hh_fwd")
    for role in ("b_hh_fwd", "b_hh_rev"):
        expect(tuple(ws[role]) == (4 * hidden,), name, f"{role} has shape {list(ws[role])}, expected [{4 * hidden}]")
    if attrs["packed"]:
        expect("lengths" in ins, name, "packed: true needs a lengths input [batch] i32")
        expect(tuple(ins["lengths"]) == (g[1],), name, f"lengths extent {list(ins['lengths'])} is not [{g[1]}]")
    else:
        expect("lengths" not in ins, name, "packed: false runs every sequence over all rows; drop the lengths input")
    return (g[1], g[2], 2 * hidden), "f32"


def _lstm_bind(ctx: BindContext):
    packed = bool(ctx.attrs["packed"])
    return "kcc_bilstm_f32", {
        "pre": ctx.in_ptr["gates"], "lengths": ctx.in_ptr["lengths"] if packed else "NULL",
        "n_seq": ctx.dim("gates", 1), "n_tok": ctx.dim("gates", 2),
        "whh_fwd": ctx.w_ptr["w_hh_fwd"], "bhh_fwd": ctx.w_ptr["b_hh_fwd"],
        "whh_rev": ctx.w_ptr["w_hh_rev"], "bhh_rev": ctx.w_ptr["b_hh_rev"],
        "hidden": str(ctx.w_shape["w_hh_fwd"][0]), "packed": "1" if packed else "0", "out": ctx.out_ptr,
    }


def _lstm_reference(ins, ws, a):
    """torch.nn.LSTM's cell (gates i, f, g, o) in f64 over precomputed input gates; packed: each
    sequence covers t < lengths[b], the reverse direction starts at lengths[b]-1, padded rows 0."""
    gates = ins["gates"].astype(np.float64)
    _, b, t, g4 = gates.shape
    h_size = g4 // 4
    out = np.zeros((b, t, 2 * h_size))
    sig = lambda z: 1.0 / (1.0 + np.exp(-z))  # noqa: E731
    for di, d in enumerate(("fwd", "rev")):
        w_hh, b_hh = ws[f"w_hh_{d}"].astype(np.float64), ws[f"b_hh_{d}"].astype(np.float64)
        for s in range(b):
            n = int(ins["lengths"][s]) if a["packed"] else t
            h, c = np.zeros(h_size), np.zeros(h_size)
            for step in (range(n) if d == "fwd" else range(n - 1, -1, -1)):
                z = gates[di, s, step] + w_hh @ h + b_hh
                i, f, g, o = sig(z[:h_size]), sig(z[h_size:2 * h_size]), np.tanh(z[2 * h_size:3 * h_size]), sig(z[3 * h_size:])
                c = f * c + i * g
                h = o * np.tanh(c)
                out[s, step, di * h_size:(di + 1) * h_size] = h
    return out


def _lstm_cases():
    rng = np.random.default_rng(71)

    def case(name, b, t, hidden, lengths=None):
        w = lambda *s: (rng.standard_normal(s) / np.sqrt(hidden)).astype(np.float32)  # noqa: E731
        ins = {"gates": rng.standard_normal((2, b, t, 4 * hidden)).astype(np.float32)}
        if lengths is not None:
            ins["lengths"] = np.array(lengths, np.int32)
        return Case(name, ins, {"w_hh_fwd": w(4 * hidden, hidden), "b_hh_fwd": w(4 * hidden),
                                "w_hh_rev": w(4 * hidden, hidden), "b_hh_rev": w(4 * hidden)},
                    {"packed": lengths is not None})
    return [case("packed_ragged", 3, 6, 5, [6, 2, 1]), case("unpacked", 2, 7, 17),
            case("packed_hidden_33", 1, 9, 33, [9])]


def _lstm_cost(v) -> int:
    """Per direction and step: W_hh h (8H^2), + b_hh + input gates (8H), gate
    nonlinearities (4H), cell and hidden update (5H)."""
    _, b, t, g4 = v.ins["gates"]
    h = g4 // 4
    return 2 * b * t * (8 * h * h + 17 * h)


def _lstm_bind_q8(ctx: BindContext):
    _, args = _lstm_bind(ctx)
    args["whq_fwd"], args["whq_rev"] = args.pop("whh_fwd"), args.pop("whh_rev")
    args["hidden"] = str(ctx.w_shape["b_hh_fwd"][0] // 4)     # the packed words do not carry H
    return "kcc_bilstm_q8", args


def _lstm_q8_cases():
    rng = np.random.default_rng(73)

    def case(name, b, t, hidden, lengths=None):
        bias = lambda: (0.1 * rng.standard_normal(4 * hidden)).astype(np.float32)  # noqa: E731
        w = lambda: int8_exact(rng, 4 * hidden, hidden) * np.float32(0.125)  # noqa: E731  (a power of 2: still exact)
        ins = {"gates": rng.standard_normal((2, b, t, 4 * hidden)).astype(np.float32)}
        if lengths is not None:
            ins["lengths"] = np.array(lengths, np.int32)
        return Case(name, ins, {"w_hh_fwd": w(), "b_hh_fwd": bias(), "w_hh_rev": w(), "b_hh_rev": bias()},
                    {"packed": lengths is not None})
    return [case("packed_ragged", 3, 6, 4, [6, 2, 1]), case("unpacked_tail", 2, 7, 17),
            case("packed_hidden_36", 1, 9, 36, [9])]


define_op(OpDef("bilstm", ("gates", "lengths?"), ("w_hh_fwd", "b_hh_fwd", "w_hh_rev", "b_hh_rev"),
                {"packed": None}, _lstm_infer, _lstm_bind,
                pack={"w_hh_fwd": ("t", _transpose), "w_hh_rev": ("t", _transpose)},
                reference=_lstm_reference, cases=_lstm_cases, cost=_lstm_cost, int8_twin="bilstm_q8"))
define_op(OpDef("bilstm_q8", ("gates", "lengths?"), ("w_hh_fwd", "b_hh_fwd", "w_hh_rev", "b_hh_rev"),
                {"packed": None}, _lstm_infer, _lstm_bind_q8,
                pack={"w_hh_fwd": ("q8t", pack_q8_transposed), "w_hh_rev": ("q8t", pack_q8_transposed)},
                reference=_lstm_reference, cases=_lstm_q8_cases, cost=_lstm_cost, int8_roles=("w_hh_fwd", "w_hh_rev")))
