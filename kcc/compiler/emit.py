"""The checked C emitter: IR graph + memory plan -> one self-contained C11 translation unit.

Before a line of C is written the plan is checked against the graph: every weight and
activation placed, inside its region, aligned, no two live buffers sharing bytes, no two
buffer defines colliding, and every kernel call matching the registry's signature. A bad
plan raises CheckedCallCodegenError; bad plans never become binaries.

The generated entry point checks arena and weight blob (size, alignment), runtime dims and
pointers before any kernel runs, runs the kernels in order, and copies the outputs to the
caller's buffers only after every kernel succeeded, so a failed call leaves them untouched.
"""
from __future__ import annotations

import re

from kcc.compiler.abi import ABI_VERSION, WEIGHT_DONE_MIN_BYTES, run_prototype, symbol_prefix
from kcc.ir import DTYPE_BYTES, Graph
from kcc.kernels.registry import C_TYPES, COMMON_HEADER, F32, I64, IN_F32, IN_I32, OUT_F32, OUT_I32, WEIGHT, get_kernel, with_requires
from kcc.ops import OPS, BindContext
from kcc.compiler.plan import MemoryPlan, live_ranges, placement_order



class CheckedCallCodegenError(Exception):
    """The plan or a kernel call is malformed; nothing was emitted."""


def numel_expr(shape) -> str:
    """C expression (size_t) for the element count of a shape of ints and dim expressions."""
    return "*".join(f"(size_t)({e})" for e in shape) or "1"


def c_ident(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z_]", "_", name).upper()


def _fail(msg: str):
    raise CheckedCallCodegenError(msg)


def check_plan(g: Graph, plan: MemoryPlan) -> None:
    if plan.alignment < 16 or plan.alignment & (plan.alignment - 1):
        _fail(f"plan alignment {plan.alignment} is not a power of two >= 16")
    defines: dict[str, str] = {}
    for region, bufs in (("weight", plan.weights), ("activation", plan.activations)):
        for key, buf in bufs.items():
            if key != buf.name:
                _fail(f"{region} buffer keyed '{key}' is named '{buf.name}'")
            ident = f"{region[0].upper()}_{c_ident(buf.name)}"
            if ident in defines:
                _fail(f"duplicate buffer define {ident}: {region} buffers '{defines[ident]}' and '{buf.name}'")
            defines[ident] = buf.name
    for name, w in g.weights.items():
        buf = plan.weights.get(name)
        if buf is None:
            _fail(f"weight '{name}' ({w.ref}) has no planned offset")
        _check_buffer("weight", buf, w.nbytes, plan.weights_bytes, plan.alignment)
    ws = sorted(plan.weights.values(), key=lambda b: b.offset)
    for a, b in zip(ws, ws[1:]):
        if a.overlaps(b):
            _fail(f"weights '{a.name}' and '{b.name}' overlap in the weight blob "
                  f"([{a.offset}, {a.offset + a.nbytes}) and [{b.offset}, {b.offset + b.nbytes}))")
    for op in g.ops:
        buf = plan.activations.get(op.output)
        if buf is None:
            _fail(f"activation '{op.output}' (output of op {op.name}) has no planned offset")
        _check_buffer("activation", buf, g.tensors[op.output].nbytes_max(g.dims), plan.arena_bytes, plan.alignment)
    acts = list(plan.activations.values())
    for i, a in enumerate(acts):
        for b in acts[i + 1:]:
            if a.live_with(b) and a.overlaps(b):
                _fail(f"activations '{a.name}' and '{b.name}' are live together but overlap in the arena")


def _check_buffer(region: str, buf, need: int, limit: int, alignment: int) -> None:
    if buf.offset < 0 or buf.offset >= limit:
        _fail(f"{region} '{buf.name}' offset {buf.offset} is at or past the {region} region size {limit}")
    if buf.offset + need > limit:
        _fail(f"{region} '{buf.name}' needs {need} B at offset {buf.offset}, past the region size {limit}")
    if buf.nbytes < need:
        _fail(f"{region} '{buf.name}' is planned {buf.nbytes} B but needs {need} B")
    if buf.offset % alignment:
        _fail(f"{region} '{buf.name}' offset {buf.offset} is not {alignment}-byte aligned")


def _bind(g: Graph, op) -> tuple[str, list[str]]:
    defn = OPS[op.type]
    in_ptr = {}
    for role, t in op.inputs.items():
        tensor = g.tensors[t]
        ctype = "const int32_t *" if tensor.dtype == "i32" else "const float *"
        if tensor.kind == "input":
            in_ptr[role] = f"(({ctype})inputs[{g.inputs.index(t)}])"
        else:
            in_ptr[role] = f"(({ctype})(ar + A_{c_ident(t)}))"
    ctx = BindContext(
        op_name=op.name, in_ptr=in_ptr, in_shape={r: g.tensors[t].shape for r, t in op.inputs.items()},
        w_ptr={r: f"((const float *)(wb + W_{c_ident(w)}))" for r, w in op.weights.items()},
        w_shape={r: g.weights[w].shape for r, w in op.weights.items()},
        out_ptr=f"(({'int32_t' if g.tensors[op.output].dtype == 'i32' else 'float'} *)(ar + A_{c_ident(op.output)}))",
        attrs=op.attrs, out_shape=g.tensors[op.output].shape)
    kname, args = defn.bind(ctx)
    kernel = get_kernel(kname)
    want = [a for a, _ in kernel.args]
    if set(args) != set(want):
        _fail(f"op {op.name}: binding to {kname} passes {sorted(args)}, kernel takes {want}")
    # Pointer kinds must agree with what the op actually hands over.
    kinds_by_ptr = {}
    for role, t in op.inputs.items():
        kinds_by_ptr[in_ptr[role]] = IN_I32 if g.tensors[t].dtype == "i32" else IN_F32
    for p in ctx.w_ptr.values():
        kinds_by_ptr[p] = WEIGHT
    kinds_by_ptr[ctx.out_ptr] = OUT_I32 if g.tensors[op.output].dtype == "i32" else OUT_F32
    for a, kind in kernel.args:
        expr = args[a]
        if kind in (IN_I32, IN_F32) and expr == "NULL":
            continue  # an absent optional input; the kernel's flags say it is not read
        if kind in (IN_I32, IN_F32, WEIGHT, OUT_F32, OUT_I32):
            got = kinds_by_ptr.get(expr)
            if got != kind:
                _fail(f"op {op.name}: argument '{a}' of {kname} must be {kind}, got {got or expr}")
        elif kind not in (I64, F32):
            _fail(f"op {op.name}: argument '{a}' of {kname} has unknown kind {kind}")
    return kname, [args[a] for a in want]


def _dims_in_range(g: Graph, refuse: str) -> str:
    return "\n".join(f"    if (dims[{i}] < {lo} || dims[{i}] > {hi}) return {refuse};"
                     for i, (lo, hi) in enumerate(g.dims.values()))


def _placement(g: Graph, plan: MemoryPlan) -> list[str]:
    """kcc_place(dims, off): plan.first_fit in C over the actual sizes, in plan.placement_order,
    falling back to the planned offsets (valid at every dims) if it would end past the arena;
    A_<name> is the activation's slot in that array."""
    order = placement_order(g)
    ranges = live_ranges(g)
    n = max(1, len(order))
    L = [f"#define KCC_N_ACT {n}u",
         "#define KCC_ALIGN_UP(x) (((x) + KCC_ALIGN - 1u) / KCC_ALIGN * KCC_ALIGN)"]
    for i, name in enumerate(order):
        b = plan.activations[name]
        L.append(f"#define A_{c_ident(name)} kcc_off[{i}] /* planned at {b.offset}: {b.nbytes} B, ops {b.first}..{b.last} */")
    live = ", ".join(f"{{{ranges[t][0]}, {ranges[t][1]}}}" for t in order) or "{0, 0}"
    planned = ", ".join(f"{plan.activations[t].offset}u" for t in order) or "0u"
    sizes = ", ".join(f"KCC_ALIGN_UP({numel_expr(g.tensors[t].shape)}*{DTYPE_BYTES[g.tensors[t].dtype]}u)"
                      for t in order) or "0u"
    dims = "\n".join(f"    const int64_t {d} = dims[{i}];\n    (void){d};" for i, d in enumerate(g.dims))
    L.append(f"""static const int64_t kcc_live[KCC_N_ACT][2] = {{{live}}};
static const size_t kcc_planned_off[KCC_N_ACT] = {{{planned}}};
static void kcc_place(const int64_t *dims, size_t *off)
{{
{dims}
    (void)dims;
    const size_t sz[KCC_N_ACT] = {{{sizes}}};
    size_t conf[KCC_N_ACT];
    size_t end = 0;
    for (size_t i = 0; i < KCC_N_ACT; ++i) {{
        size_t nc = 0, at = 0;
        for (size_t j = 0; j < i; ++j) {{   /* earlier buffers live with i, sorted by offset (stable) */
            if (kcc_live[j][0] > kcc_live[i][1] || kcc_live[i][0] > kcc_live[j][1]) continue;
            size_t k = nc++;
            for (; k > 0 && off[conf[k - 1]] > off[j]; --k) conf[k] = conf[k - 1];
            conf[k] = j;
        }}
        for (size_t k = 0; k < nc; ++k) {{
            size_t b = conf[k];
            if (at + sz[i] <= off[b]) break;
            if (off[b] + sz[b] > at) at = off[b] + sz[b];
        }}
        off[i] = at;
        if (at + sz[i] > end) end = at + sz[i];
    }}
    if (end > KCC_ARENA_BYTES) memcpy(off, kcc_planned_off, sizeof kcc_planned_off);
}}""")
    return L


def weights_done_after(g: Graph, plan: MemoryPlan) -> list[list[str]]:
    """Per op, the weights (of >= WEIGHT_DONE_MIN_BYTES) no later op reads, in blob order."""
    last = {w: i for i, op in enumerate(g.ops) for w in op.weights.values()}
    done: list[list[str]] = [[] for _ in g.ops]
    for w in sorted(last, key=lambda w: plan.weights[w].offset):
        if plan.weights[w].nbytes >= WEIGHT_DONE_MIN_BYTES:
            done[last[w]].append(w)
    return done


def emit_c(g: Graph, plan: MemoryPlan) -> str:
    check_plan(g, plan)
    calls = [(op, *_bind(g, op)) for op in g.ops]
    used = with_requires(kname for _, kname, _ in calls)
    prefix = symbol_prefix(g.name)
    dims = list(g.dims)
    L = [f"/* Generated by kcc from circuit '{g.name}'. Do not edit: regenerate. */",
         "#include <stddef.h>", "#include <stdint.h>", "#include <stdio.h>", "#include <string.h>", ""]
    L.append(COMMON_HEADER.read_text(encoding="utf-8"))
    for kname in used:
        L.append(f"/* ---- kernel {kname} ({get_kernel(kname).source}) ---- */")
        L.append(get_kernel(kname).c_source())
    L.append("/* ---- memory plan ---- */")
    L.append(f"#define KCC_ALIGN {plan.alignment}u")
    L.append(f"#define KCC_WEIGHTS_BYTES {plan.weights_bytes}u")
    L.append(f"#define KCC_ARENA_BYTES {plan.arena_bytes}u")
    for name, buf in plan.weights.items():
        L.append(f"#define W_{c_ident(name)} {buf.offset}u /* {g.weights[name].ref} {list(g.weights[name].shape)} */")
    L.extend(_placement(g, plan))
    L.append("")
    L.append(f"int {prefix}_abi_version(void) {{ return {ABI_VERSION}; }}")
    L.append(f"size_t {prefix}_arena_bytes(void) {{ return KCC_ARENA_BYTES; }}")
    L.append(f"size_t {prefix}_weights_bytes(void) {{ return KCC_WEIGHTS_BYTES; }}")
    L.append(f"int {prefix}_set_threads(int n)")
    L.append("{")
    L.append("#ifdef _OPENMP")
    L.append("    if (n > 0) omp_set_num_threads(n);")
    L.append("    return omp_get_max_threads();")
    L.append("#else")
    L.append("    (void)n;")
    L.append("    return 1;")
    L.append("#endif")
    L.append("}")
    L.append(f"""
/* Called with a weight's bytes once the last op reading them has run (NULL: never), so that a
 * one-shot process can hand those pages back to the page cache as it goes (a stage then peaks
 * with about one op's weights resident: kcc/compiler/runtime.py, release_weights_as_used).
 * One per library, like the thread count: set it before runs, not during one. */
static void (*kcc_weight_done)(const void *, size_t);
void {prefix}_set_weight_done(void (*fn)(const void *, size_t)) {{ kcc_weight_done = fn; }}
""")
    n_ops = max(1, len(calls))
    L.append(f"""
/* Per-op wall time of the last run, in seconds (built with -DKCC_PROFILE; else never written). */
#ifdef KCC_PROFILE
#include <time.h>
static double kcc_op_s[{n_ops}];
static double kcc_now(void) {{ struct timespec t; timespec_get(&t, TIME_UTC); return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec; }}
#define KCC_OP_BEGIN double kcc_t0 = kcc_now();
#define KCC_OP_END(i) kcc_op_s[i] = kcc_now() - kcc_t0;
#else
#define KCC_OP_BEGIN
#define KCC_OP_END(i)
#endif
/* Copies up to n per-op times into out; returns the op count, or 0 when not profiled. */
size_t {prefix}_op_seconds(double *out, size_t n)
{{
#ifdef KCC_PROFILE
    for (size_t i = 0; i < n && i < {len(calls)}u; ++i) out[i] = kcc_op_s[i];
    return {len(calls)}u;
#else
    (void)out; (void)n;
    return 0;
#endif
}}
""")
    L.append(f"""
/* The activation offsets at these dims (in range: the caller checked), in placement order. */
size_t {prefix}_place(const int64_t *dims, size_t *offsets, size_t n)
{{
    size_t off[KCC_N_ACT];
    if (!dims || !offsets) return 0;
{_dims_in_range(g, "0")}
    kcc_place(dims, off);
    for (size_t i = 0; i < n && i < KCC_N_ACT; ++i) offsets[i] = off[i];
    return KCC_N_ACT;
}}
""")
    L.append("""
static int kcc_fail(char *err, size_t err_len, int status, const char *what)
{
    if (err && err_len) snprintf(err, err_len, "%s", what);
    return status;
}
""")
    L.append(run_prototype(prefix))
    L.append("{")
    L.append("    if (!arena) return kcc_fail(err, err_len, KCC_ENULL, \"arena is NULL\");")
    L.append("    if ((uintptr_t)arena % KCC_ALIGN) return kcc_fail(err, err_len, KCC_EARENA, "
             "\"arena is not " + str(plan.alignment) + "-byte aligned\");")
    L.append("    if (arena_bytes < KCC_ARENA_BYTES) return kcc_fail(err, err_len, KCC_EARENA, "
             f"\"arena is smaller than the planned {plan.arena_bytes} bytes\");")
    L.append("    if (!weights) return kcc_fail(err, err_len, KCC_ENULL, \"weights is NULL\");")
    L.append("    if ((uintptr_t)weights % KCC_ALIGN) return kcc_fail(err, err_len, KCC_EWEIGHTS, "
             "\"weight blob is not " + str(plan.alignment) + "-byte aligned\");")
    L.append("    if (weights_bytes != KCC_WEIGHTS_BYTES) return kcc_fail(err, err_len, KCC_EWEIGHTS, "
             f"\"weight blob is not the planned {plan.weights_bytes} bytes\");")
    L.append("    if (!dims || !inputs || !outputs) return kcc_fail(err, err_len, KCC_ENULL, \"dims, inputs or outputs is NULL\");")
    for i, d in enumerate(dims):
        lo, hi = g.dims[d]
        L.append(f"    const int64_t {d} = dims[{i}];")
        L.append(f"    if ({d} < {lo} || {d} > {hi}) return kcc_fail(err, err_len, KCC_EDIMS, "
                 f"\"dim {d} is outside its planned range [{lo}, {hi}]\");")
    for i, name in enumerate(g.inputs):
        L.append(f"    if (!inputs[{i}]) return kcc_fail(err, err_len, KCC_ENULL, \"input '{name}' is NULL\");")
    for i, name in enumerate(g.outputs):
        L.append(f"    if (!outputs[{i}]) return kcc_fail(err, err_len, KCC_ENULL, \"output '{name}' is NULL\");")
    L.append("    size_t kcc_off[KCC_N_ACT];")
    L.append("    kcc_place(dims, kcc_off);")
    L.append("    const unsigned char *wb = (const unsigned char *)weights;")
    L.append("    unsigned char *ar = (unsigned char *)arena;")
    L.append("    int st;")
    ck_index = {c.tensor: [] for c in g.checkpoints}
    for k, c in enumerate(g.checkpoints):
        ck_index[c.tensor].append(k)
    done_after = weights_done_after(g, plan)
    for i, (op, kname, args) in enumerate(calls):
        L.append(f"    /* op {op.name}: {op.type} -> {op.output} */")
        L.append(f"    {{ KCC_OP_BEGIN st = {kname}({', '.join(args)}); KCC_OP_END({i}) }}")
        L.append(f"    if (st) return kcc_fail(err, err_len, st, \"op {op.name} ({kname}) rejected its input\");")
        if done_after[i]:
            L.append("    if (kcc_weight_done) {")
            L.extend(f"        kcc_weight_done(wb + W_{c_ident(w)}, {plan.weights[w].nbytes}u);" for w in done_after[i])
            L.append("    }")
        for k in ck_index.get(op.output, []):
            nbytes = f"{numel_expr(g.tensors[op.output].shape)}*4u"
            # X-Ray teacher forcing: a caller may replace a checkpoint tensor with the reference
            # value before anything downstream reads it, to isolate the stages after it.
            L.append(f"    if (inject && inject[{k}]) memcpy(ar + A_{c_ident(op.output)}, inject[{k}], {nbytes});")
            L.append(f"    if (checkpoints && checkpoints[{k}]) memcpy(checkpoints[{k}], ar + A_{c_ident(op.output)}, {nbytes});")
    for i, name in enumerate(g.outputs):
        t = g.tensors[name]
        L.append(f"    memcpy(outputs[{i}], ar + A_{c_ident(name)}, {numel_expr(t.shape)}*4u);")
    L.append("    (void)wb;")
    L.append("    (void)checkpoints;")
    L.append("    (void)inject;")
    L.append("    return KCC_OK;")
    L.append("}")
    return "\n".join(L) + "\n"


__all__ = ["CheckedCallCodegenError", "check_plan", "emit_c", "weights_done_after", "C_TYPES", "ABI_VERSION"]
