"""Embedding lookups: the three-table ALBERT embedding with its LayerNorm, as one op; a plain
lookup, and its int8-storage twin `embedding_q8` (a table that is int8 * per-row scale in the
checkpoint stays int8: kcc.weights.quantised)."""
from __future__ import annotations

import numpy as np

from kcc.kernels.registry import F32, I64, IN_I32, OUT_F32, WEIGHT, Contract, Kernel, register
from kcc.ops.core import BindContext, Case, OpDef, c_float, define_op, expect
from kcc.ops.cost_terms import data_movement, per_output
from kcc.ops.dense import int8_exact
from kcc.ops.norm import layer_norm_reference

register(Kernel(
    name="kcc_embedding_three_table_layer_norm_f32",
    source="embedding_three_table_layer_norm_f32.c",
    args=(("ids", IN_I32), ("type_ids", IN_I32), ("n_seq", I64), ("n_tok", I64),
          ("word", WEIGHT), ("n_word", I64), ("position", WEIGHT), ("n_position", I64),
          ("type", WEIGHT), ("n_type", I64), ("gamma", WEIGHT), ("beta", WEIGHT),
          ("n_chan", I64), ("eps", F32), ("out", OUT_F32)),
    contract=Contract(accumulation="LayerNorm mean/variance in f64, sums and affine in f32",
                      tolerance=2e-5,
                      notes="validates every id and type id before the first write"),
))

# -- embedding_three_table_layer_norm --------------------------------------------------------

def _emb_infer(name, ins, ws, attrs):
    ids, tids = ins["ids"], ins["type_ids"]
    expect(len(ids) == 2, name, f"ids must be [batch, token], got {list(ids)}")
    expect(tuple(ids) == tuple(tids), name, f"type_ids extent {list(tids)} differs from ids {list(ids)}")
    chan = ws["word"][1]
    for role in ("word", "position", "type"):
        expect(len(ws[role]) == 2 and ws[role][1] == chan, name,
                f"weight '{role}' has shape {ws[role]}, expected [rows, {chan}]")
    for role in ("gamma", "beta"):
        expect(tuple(ws[role]) == (chan,), name, f"weight '{role}' has shape {ws[role]}, expected [{chan}]")
    return (*ids, chan), "f32"


def _emb_bind(ctx: BindContext):
    return "kcc_embedding_three_table_layer_norm_f32", {
        "ids": ctx.in_ptr["ids"], "type_ids": ctx.in_ptr["type_ids"],
        "n_seq": ctx.dim("ids", 0), "n_tok": ctx.dim("ids", 1),
        "word": ctx.w_ptr["word"], "n_word": str(ctx.w_shape["word"][0]),
        "position": ctx.w_ptr["position"], "n_position": str(ctx.w_shape["position"][0]),
        "type": ctx.w_ptr["type"], "n_type": str(ctx.w_shape["type"][0]),
        "gamma": ctx.w_ptr["gamma"], "beta": ctx.w_ptr["beta"],
        "n_chan": str(ctx.w_shape["word"][1]), "eps": c_float(ctx.attrs["eps"]), "out": ctx.out_ptr,
    }


def _emb_reference(ins, ws, a):
    t = ins["ids"].shape[1]
    x = ws["word"][ins["ids"]] + ws["type"][ins["type_ids"]] + ws["position"][:t]   # f32 sums, as the kernel
    return layer_norm_reference(x, ws["gamma"], ws["beta"], a["eps"])


def _emb_cases():
    rng = np.random.default_rng(90)

    def case(name, b, t, chan, n_word, n_pos, n_type, eps):
        tab = lambda n: rng.standard_normal((n, chan)).astype(np.float32)  # noqa: E731
        ins = {"ids": rng.integers(0, n_word, (b, t)).astype(np.int32),
               "type_ids": rng.integers(0, n_type, (b, t)).astype(np.int32)}
        ins["ids"][0, 0], ins["ids"][-1, -1] = 0, n_word - 1                   # both ends of the table
        return Case(name, ins, {"word": tab(n_word), "position": tab(n_pos), "type": tab(n_type),
                                "gamma": (1 + 0.1 * rng.standard_normal(chan)).astype(np.float32),
                                "beta": (0.1 * rng.standard_normal(chan)).astype(np.float32)}, {"eps": eps})
    return [case("albert_like", 2, 7, 24, 50, 9, 2, 1e-12), case("all_positions_one_type", 1, 5, 3, 4, 5, 1, 1e-5)]


define_op(OpDef("embedding_three_table_layer_norm", ("ids", "type_ids"),
          ("word", "position", "type", "gamma", "beta"), {"eps": None}, _emb_infer, _emb_bind,
          reference=_emb_reference, cases=_emb_cases, cost=per_output(10)))   # two adds + LayerNorm


# -- embedding (plain lookup) ----------------------------------------------------------------

register(Kernel(
    name="kcc_embedding_lookup_f32",
    source="embedding_lookup_f32.c",
    args=(("ids", IN_I32), ("n_ids", I64), ("table", WEIGHT), ("n_rows", I64), ("n_chan", I64),
          ("out", OUT_F32)),
    contract=Contract(accumulation="none (row copies)", tolerance=0.0,
                      notes="validates every id against the table rows before the first write"),
))


def _lookup_infer(name, ins, ws, attrs):
    ids = ins["ids"]
    expect(len(ids) == 2, name, f"ids must be [batch, token], got {list(ids)}")
    expect(len(ws["table"]) == 2, name, f"weight 'table' must be [rows, channels], got {list(ws['table'])}")
    return (*ids, ws["table"][1]), "f32"


def _lookup_bind(ctx: BindContext):
    return "kcc_embedding_lookup_f32", {
        "ids": ctx.in_ptr["ids"], "n_ids": ctx.rows("ids") + "*" + ctx.dim("ids", 1),
        "table": ctx.w_ptr["table"], "n_rows": str(ctx.w_shape["table"][0]),
        "n_chan": str(ctx.w_shape["table"][1]), "out": ctx.out_ptr,
    }


def _lookup_cases(seed: int, odd_name: str, make_table) -> list[Case]:
    """An odd-sized lookup and a one-id wide one (the last row always read); make_table(rng, rows,
    chan) gives the table the op takes (float32, or int8-exact for the q8 twin)."""
    rng = np.random.default_rng(seed)
    out = []
    for name, (b, t, rows, chan) in {odd_name: (2, 7, 11, 5), "one_id_wide": (1, 1, 3, 130)}.items():
        ids = rng.integers(0, rows, (b, t)).astype(np.int32)
        ids.flat[0] = rows - 1
        out.append(Case(name, {"ids": ids}, {"table": make_table(rng, rows, chan)}))
    return out


define_op(OpDef("embedding", ("ids",), ("table",), {}, _lookup_infer, _lookup_bind,
                reference=lambda i, w, a: w["table"][i["ids"]],
                cases=lambda: _lookup_cases(91, "odd", lambda rng, r, c: rng.standard_normal((r, c)).astype(np.float32)),
                cost=data_movement,
                int8_twin="embedding_q8"))


# -- embedding_q8 (plain lookup, int8 table) -------------------------------------------------

register(Kernel(
    name="kcc_embedding_lookup_q8",
    source="embedding_lookup_q8.c",
    args=(("ids", IN_I32), ("n_ids", I64), ("table", WEIGHT), ("n_rows", I64), ("row_words", I64),
          ("n_chan", I64), ("out", OUT_F32)),
    contract=Contract(accumulation="none: each value (float)q * row scale, exact and rounded once (the FP32 "
                                   "table's value)", tolerance=0.0,
                      notes="table: pack_q8_rows words; validates every id before the first write"),
))


def pack_q8_rows(quant, attrs=None) -> np.ndarray:
    """Quantised [rows, C] -> [rows, 1 + ceil(C/4)] words: each row's scale, then its int8 values
    (zero-padded to a whole word), so one lookup reads one contiguous row."""
    rows, chan = quant.q.shape
    width = 4 + -(-chan // 4) * 4
    raw = np.zeros((rows, width), np.uint8)
    raw[:, :4] = np.ascontiguousarray(quant.scale, dtype=np.float32).view(np.uint8).reshape(rows, 4)
    raw[:, 4:4 + chan] = quant.q.view(np.uint8)
    return raw.view(np.float32)


def _lookup_q8_bind(ctx: BindContext):
    _, args = _lookup_bind(ctx)
    args.update(row_words=str(ctx.w_shape["table"][1]), n_chan=str(ctx.out_shape[-1]))
    return "kcc_embedding_lookup_q8", args


define_op(OpDef("embedding_q8", ("ids",), ("table",), {}, _lookup_infer, _lookup_q8_bind,
                pack={"table": ("q8rows", pack_q8_rows)}, reference=lambda i, w, a: w["table"][i["ids"]],
                cases=lambda: _lookup_cases(92, "odd_chan", int8_exact), cost=data_movement, int8_roles=("table",)))
