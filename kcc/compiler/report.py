"""`kcc report`: per-op FLOPs and bytes moved at given dims, the arena, and a roofline bound.

The roofline uses two numbers measured on this machine at the given thread count: memory
bandwidth from a STREAM-like triad (the `add` op, y[i] = a[i] + b[i], over arrays far larger than
the caches, 12 bytes per element counted, no write-allocate, best of the repetitions), and peak
FLOP/s from kcc's own GEMM (the `linear` op, kcc_linear_f32, -O3 -march=native, OpenMP) on a
large square problem. Both are one circuit compiled like any other (lower, plan, emit, build,
the runtime's ABI) with per-op timing (BuildOptions(profile=True)): each op's kernel is timed
inside the library, without the runtime's copies. Each op's bound is max(bytes / BW,
flops / peak); the circuit's bound is the sum over ops. It is a floor on run time, not a
prediction: an op far above its bound is where the time goes.
"""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kcc.circuits import load_circuit
from kcc.compiler.build import BuildOptions, release_options
from kcc.compiler.costs import OpCost, graph_costs
from kcc.compiler.driver import compile_circuit
from kcc.compiler.isa import library_level
from kcc.compiler.lower import lower_circuit
from kcc.compiler.passes import DEFAULT_PASSES
from kcc.compiler.plan import plan_memory
from kcc.compiler.runtime import NP_DTYPES
from kcc.weights.checkpoint import Checkpoint, load_checkpoint


class ReportError(ValueError):
    """`kcc report` arguments it cannot cost: no checkpoint, one of --bandwidth / --peak alone or
    not positive, a dim the circuit lacks or below its minimum, a --dims entry not NAME=INTEGER."""


@dataclass
class Roofline:
    bandwidth: float          # bytes / s
    peak: float               # FLOP / s
    threads: int
    how: str = "measured"

    def bound(self, c: OpCost) -> float:
        return max(c.bytes / self.bandwidth, (c.flops or 0) / self.peak)


def _probe(triad_floats: int, gemm_n: int) -> tuple[dict, dict[str, np.ndarray]]:
    """The roofline circuit: the triad (an add over [triad_floats]) and the GEMM (a linear of
    [gemm_n, gemm_n] by [gemm_n, gemm_n]), independent; and its seeded weights."""
    rng = np.random.default_rng(0)
    f32 = {"dtype": "f32"}
    doc = {"schema": "kcc.circuit/1", "name": "kcc_roofline", "dims": {},
           "inputs": [{"name": "a", **f32, "shape": [triad_floats]}, {"name": "b", **f32, "shape": [triad_floats]},
                      {"name": "x", **f32, "shape": [gemm_n, gemm_n]}],
           "weights": {"w": {"ref": "w"}, "bias": {"ref": "bias"}},
           "blocks": [{"name": "probe", "ops": [
               {"op": "add", "in": {"a": "a", "b": "b"}, "out": "sum"},
               {"op": "linear", "in": {"x": "x"}, "w": {"weight": "w", "bias": "bias"}, "out": "y"}]}],
           "outputs": ["sum", "y"]}
    return doc, {"w": rng.standard_normal((gemm_n, gemm_n), dtype=np.float32),
                 "bias": np.zeros(gemm_n, dtype=np.float32)}


def measure_roofline(threads: int = 1, triad_floats: int = 1 << 24, gemm_n: int = 1024, reps: int = 5,
                     options: BuildOptions | None = None) -> Roofline:
    """~1-3 s. triad_floats per array (64 MiB each by default: past any L3 this machine has).
    options: the build measured (default -O3 -march=native with OpenMP; bench/bench_gemm.py
    passes a portable build forced to each dispatch level); per-op timing is switched on."""
    options = options or release_options(native=True)
    doc, weights = _probe(triad_floats, gemm_n)
    cc = compile_circuit(doc, Checkpoint(Path("<memory>"), weights), options=dataclasses.replace(options, profile=True),
                         passes=[])
    got = cc.set_threads(int(threads))
    rng = np.random.default_rng(1)
    ins = {"a": np.ones(triad_floats, dtype=np.float32), "b": np.ones(triad_floats, dtype=np.float32),
           "x": rng.standard_normal((gemm_n, gemm_n), dtype=np.float32)}
    arena = cc.new_arena()
    outs = {name: np.empty(cc.shape_of(name, {}), dtype=np.float32) for name in cc.graph.outputs}
    kind = {op.name: op.type for op in cc.graph.ops}
    best = {"add": float("inf"), "linear": float("inf")}
    for _ in range(reps + 1):                        # the first run faults the pages in and warms caches
        cc.run(ins, arena=arena, out=outs)
        for name, t in cc.op_seconds().items():
            best[kind[name]] = min(best[kind[name]], t)
    return Roofline(12.0 * triad_floats / best["add"], 2.0 * gemm_n ** 3 / best["linear"], got,
                    f"measured: triad 3 x {triad_floats * 4 >> 20} MiB, kcc_linear_f32 {gemm_n}^3 "
                    f"({' '.join(f for f in options.flags() if f.startswith(('-O', '-march', '-mtune', '-DKCC_ISA')))}, "
                    f"{library_level(cc.lib)}, {got} thread{'s' if got != 1 else ''})")


# -- the report ----------------------------------------------------------------------------

@dataclass
class Report:
    circuit: str
    dims: dict[str, int]
    costs: list[OpCost]
    arena_bytes_max: int               # planned for the circuit's declared max dims
    arena_bytes_at: int                # planned with the given dims as the max
    weights_bytes: int
    planned_max: dict[str, int]
    roofline: Roofline | None = None
    notes: list[str] = field(default_factory=list)
    passes: str = "default"
    measured: dict[str, float] | None = None   # op name -> best wall seconds (measure_ops)

    @property
    def flops(self) -> int:
        return sum(c.flops or 0 for c in self.costs)

    @property
    def bytes(self) -> int:
        return sum(c.bytes for c in self.costs)

    def bound_s(self) -> float:
        return sum(self.roofline.bound(c) for c in self.costs) if self.roofline else float("nan")

    def by_type(self) -> dict[str, dict]:
        out: dict[str, dict] = {}
        for c in self.costs:
            key = c.type + (f"[{c.fused}]" if c.fused else "")
            row = out.setdefault(key, {"ops": 0, "flops": 0, "bytes": 0, "bound_s": 0.0})
            row["ops"] += 1
            row["flops"] += c.flops or 0
            row["bytes"] += c.bytes
            if self.roofline:
                row["bound_s"] += self.roofline.bound(c)
            if self.measured:
                row["measured_s"] = row.get("measured_s", 0.0) + self.measured[c.name]
        return dict(sorted(out.items(), key=lambda kv: -kv[1]["bound_s"] if self.roofline else -kv[1]["flops"]))

    def to_json(self) -> dict:
        rf = self.roofline
        return {
            "circuit": self.circuit, "passes": self.passes, "dims": self.dims, "planned_max": self.planned_max,
            "flops": self.flops, "bytes": self.bytes, "weights_bytes": self.weights_bytes,
            "arena_bytes_max": self.arena_bytes_max, "arena_bytes_at_dims": self.arena_bytes_at,
            "roofline": None if rf is None else {"bandwidth_Bps": rf.bandwidth, "peak_flops": rf.peak,
                                                 "threads": rf.threads, "how": rf.how, "bound_s": self.bound_s()},
            "by_type": self.by_type(),
            "ops": [{"name": c.name, "type": c.type, "fused": c.fused, "flops": c.flops, "bytes_in": c.bytes_in,
                     "bytes_w": c.bytes_w, "bytes_out": c.bytes_out,
                     **({"bound_s": rf.bound(c)} if rf else {}),
                     **({"measured_s": self.measured[c.name]} if self.measured else {})} for c in self.costs],
            "notes": self.notes,
        }


def build_report(circuit, checkpoint, dims: dict[str, int] | None = None, passes=None,
                 roofline: Roofline | None = None) -> Report:
    """Lower (no C build) and cost `circuit` at `dims`; dims not given take the planned max."""
    doc = circuit if isinstance(circuit, dict) else load_circuit(circuit)
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    dims = dict(dims or {})
    unknown = [d for d in dims if d not in doc["dims"]]
    if unknown:
        raise ReportError(f"circuit '{doc['name']}': no dim(s) {unknown}; dims are {list(doc['dims'])}")
    notes = []
    # A given value above the declared max raises the max (as compile --max does).
    grown = {k: {**doc["dims"][k], "max": max(doc["dims"][k]["max"], int(v))} for k, v in dims.items()}
    doc = {**doc, "dims": {**doc["dims"], **grown}}
    g, _ = lower_circuit(doc, ckpt, DEFAULT_PASSES if passes is None else passes)
    for d, (lo, hi) in g.dims.items():
        if d not in dims:
            dims[d] = hi
            notes.append(f"dim {d} not given: costed at its planned max {hi}")
        elif not lo <= dims[d]:
            raise ReportError(f"dim {d} = {dims[d]} is below its minimum {lo}")
    plan_max = plan_memory(g)
    plan_at = plan_memory(dataclasses.replace(g, dims={d: (lo, dims[d]) for d, (lo, _) in g.dims.items()}))
    costs = graph_costs(g, dims)
    missing = sorted({c.type for c in costs if c.flops is None})
    if missing:
        notes.append(f"no FLOP formula (OpDef.cost) for op type(s) {missing}: counted as 0")
    return Report(g.name, dims, costs, plan_max.arena_bytes, plan_at.arena_bytes, plan_max.weights_bytes,
                  {d: hi for d, (_, hi) in g.dims.items()}, roofline, notes,
                  "default" if passes is None else (", ".join(p.__name__ for p in passes) or "none"))


def measure_ops(circuit, checkpoint, dims: dict[str, int], passes=None, threads: int = 1,
                reps: int = 3, seed: int = 0, planned_max: dict[str, int] | None = None) -> dict[str, float]:
    """Each op's best wall time over `reps` runs at `dims`: the circuit built with -O3
    -march=native, OpenMP and BuildOptions(profile=True), on seeded inputs (f32 ~ N(0, 0.1^2),
    integers 0: a timing input, not a meaningful utterance)."""
    cc = compile_circuit(circuit, checkpoint, release_options(native=True, profile=True),
                         dims=planned_max, passes=passes)
    cc.set_threads(threads)
    rng = np.random.default_rng(seed)
    ins = {}
    for name in cc.graph.inputs:
        shape, dtype = cc.shape_of(name, dims), cc.graph.tensors[name].dtype
        ins[name] = ((0.1 * rng.standard_normal(shape)).astype(np.float32) if dtype == "f32"
                     else np.zeros(shape, dtype=NP_DTYPES[dtype]))
    arena, best = cc.new_arena(), {}
    for _ in range(reps + 1):                       # the first run warms caches and pages
        cc.run(ins, arena=arena, dims=dims)
        for op, t in cc.op_seconds().items():
            best[op] = min(best.get(op, float("inf")), t)
    return best


def _si(x: float, unit: str) -> str:
    for f, p in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= f:
            return f"{x / f:.2f} {p}{unit}"
    return f"{x:.0f} {unit}"


def render(r: Report, per_op: bool = True) -> str:
    rf = r.roofline
    L = [f"circuit {r.circuit} at {', '.join(f'{k}={v}' for k, v in r.dims.items())} "
         f"(planned max {', '.join(f'{k}={v}' for k, v in r.planned_max.items())}; passes: {r.passes})"]
    L.append(f"  {len(r.costs)} ops, {_si(r.flops, 'FLOP')}, {_si(r.bytes, 'B')} moved "
             f"(intensity {r.flops / max(1, r.bytes):.2f} FLOP/B); weights {_si(r.weights_bytes, 'B')}; "
             f"arena {_si(r.arena_bytes_max, 'B')} planned at max, {_si(r.arena_bytes_at, 'B')} planned at these dims")
    if rf:
        L.append(f"  roofline ({rf.how}): {rf.bandwidth / 1e9:.1f} GB/s, {rf.peak / 1e9:.1f} GFLOP/s "
                 f"(ridge {rf.peak / rf.bandwidth:.1f} FLOP/B); bound {r.bound_s() * 1e3:.3f} ms")
    for n in r.notes:
        L.append(f"  note: {n}")
    L.append("")
    m = r.measured
    if m:
        L.append(f"  measured (-O3 -march=native, profile build, best per op): {sum(m.values()) * 1e3:.3f} ms")
    L.append(f"  {'op type [fused]':40s} {'ops':>4s} {'FLOP':>12s} {'bytes':>11s} {'bound ms':>9s} {'share':>6s}"
             + (f" {'meas ms':>9s} {'x bound':>7s}" if m else ""))
    total = r.bound_s() if rf else r.flops
    for k, row in r.by_type().items():
        share = (row["bound_s"] if rf else row["flops"]) / total if total else 0.0
        line = (f"  {k:40s} {row['ops']:4d} {_si(row['flops'], ''):>12s} {_si(row['bytes'], 'B'):>11s} "
                f"{row['bound_s'] * 1e3 if rf else float('nan'):9.3f} {share:6.1%}")
        if m:
            ms = row["measured_s"] * 1e3
            line += f" {ms:9.3f} {ms / (row['bound_s'] * 1e3) if rf and row['bound_s'] else float('nan'):7.2f}"
        L.append(line)
    if per_op:
        L.append("")
        L.append(f"  {'op':32s} {'type':32s} {'fused':16s} {'FLOP':>11s} {'in B':>10s} {'w B':>10s} {'out B':>10s} "
                 f"{'FLOP/B':>7s} {'bound ms':>9s} {'limit':>5s}" + (f" {'meas ms':>9s}" if m else ""))
        for c in r.costs:
            flops = "n/a" if c.flops is None else _si(c.flops, "")
            lim, ms = "", float("nan")
            if rf:
                ms = rf.bound(c) * 1e3
                lim = "mem" if c.bytes / rf.bandwidth >= (c.flops or 0) / rf.peak else "flop"
            L.append(f"  {c.name:32s} {c.type:32s} {c.fused:16s} {flops:>11s} {_si(c.bytes_in, ''):>10s} "
                     f"{_si(c.bytes_w, ''):>10s} {_si(c.bytes_out, ''):>10s} {c.intensity:7.2f} {ms:9.4f} {lim:>5s}"
                     + (f" {m[c.name] * 1e3:9.4f}" if m else ""))
    return "\n".join(L)


def parse_dims(spec: str | None) -> dict[str, int]:
    """'T=36,F=200' -> {'T': 36, 'F': 200}."""
    out: dict[str, int] = {}
    for part in (spec or "").replace(" ", "").split(","):
        if not part:
            continue
        name, eq, value = part.partition("=")
        if not eq or not name or not value.isdigit():
            raise ReportError(f"--dims: {part!r} is not NAME=INTEGER (e.g. T=36,F=200)")
        out[name] = int(value)
    return out


def run_cli(args) -> int:
    passes = [] if args.passes == "none" else None
    # Every refusal comes before the roofline probe (1-3 s); a lone --bandwidth or --peak is
    # refused rather than measured over, and a zero would divide.
    ckpt = args.checkpoint or os.environ.get("KCC_CHECKPOINT")
    if not ckpt:
        raise ReportError("no checkpoint: pass --checkpoint PATH (or set KCC_CHECKPOINT)")
    given = [f for f, v in (("--bandwidth", args.bandwidth), ("--peak", args.peak)) if v is not None]
    if len(given) == 1:
        other = "--peak" if given == ["--bandwidth"] else "--bandwidth"
        raise ReportError(f"{given[0]} without {other}: give both, or neither to measure them")
    if any(v is not None and not v > 0 for v in (args.bandwidth, args.peak)):
        raise ReportError(f"--bandwidth and --peak must be positive, got {args.bandwidth} and {args.peak}")
    rf = None
    if given:
        rf = Roofline(args.bandwidth * 1e9, args.peak * 1e9, args.threads, "given on the command line")
    elif not args.no_roofline:
        rf = measure_roofline(args.threads)
    r = build_report(args.circuit, ckpt, parse_dims(args.dims), passes, rf)
    if args.measure:
        r.measured = measure_ops(args.circuit, ckpt, r.dims, passes, args.threads, planned_max=r.planned_max)
    print(render(r, per_op=not args.summary))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(r.to_json(), fh, indent=1)
    return 0
