"""One op as a circuit: how the op harness (tests/test_ops.py) and the op tests compile a single op.

`op_circuit` puts every Case of one op type into one circuit, each an independent op over its
own inputs and weights, so a harness variant costs one build however many cases the op has.
Input shapes are the case arrays' own (fixed) unless `shapes` gives an extent list per input
role with runtime dim names (declared 1..dim_max[name], default DIM_MAX). Dims no input carries
(Case.dims) are declared too; cases sharing a circuit must agree on their values.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from kcc.compiler.build import BuildOptions
from kcc.compiler.driver import compile_circuit
from kcc.compiler.runtime import NP_DTYPES, CompiledCircuit
from kcc.ops import OPS, Case
from kcc.weights.checkpoint import Checkpoint

DIM_MAX = 256


class OneOpError(ValueError):
    """Cases that cannot form one circuit: an input dtype the runtime lacks, an attr the op does
    not have, or two cases giving one runtime dim different values."""


_DTYPES = {np.dtype(t): name for name, t in NP_DTYPES.items()}     # the dtypes the runtime feeds
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _dtype(role: str, a: np.ndarray) -> str:
    if a.dtype not in _DTYPES:
        raise OneOpError(f"input '{role}': dtype {a.dtype} is none of {sorted(map(str, _DTYPES))}")
    return _DTYPES[a.dtype]


def op_circuit(op_type: str, cases: list[Case], shapes: dict | None = None,
               dim_max: dict[str, int] | None = None) -> tuple[dict, Checkpoint]:
    """The circuit document and in-memory checkpoint running `cases` of `op_type`; case k reads
    inputs c{k}_<role> and writes output c{k}_out."""
    defn = OPS[op_type]
    shapes, dim_max = shapes or {}, dim_max or {}
    dims: dict[str, dict] = {}
    given: dict[str, int] = {}
    inputs, weights, arrays, ops = [], {}, {}, []

    def declare(name: str, value: int | None = None) -> None:
        # an input shape may declare the dim before a case gives its value: the max takes both
        top = max(dim_max.get(name, DIM_MAX), value or 1)
        d = dims.setdefault(name, {"min": 1, "max": top})
        d["max"] = max(d["max"], top)

    for k, case in enumerate(cases):
        for role, a in case.inputs.items():
            shape = shapes.get(role, list(a.shape))
            for e in shape:
                for name in _IDENT.findall(e) if isinstance(e, str) else ():
                    declare(name)
            inputs.append({"name": f"c{k}_{role}", "dtype": _dtype(role, a), "shape": shape})
        for role, w in case.weights.items():
            weights[f"c{k}_{role}"] = {"ref": f"w.c{k}.{role}"}
            arrays[f"w.c{k}.{role}"] = np.ascontiguousarray(w, dtype=np.float32)
        for name, value in case.dims.items():
            if given.setdefault(name, value) != value:
                raise OneOpError(f"case '{case.name}' of {op_type}: dim {name} = {value}, another case has {given[name]}")
            declare(name, value)
        unknown = set(case.attrs) - set(defn.attrs)
        if unknown:
            raise OneOpError(f"case '{case.name}' of {op_type}: unknown attr(s) {sorted(unknown)}")
        ops.append({"op": op_type, "in": {r: f"c{k}_{r}" for r in case.inputs},
                    "w": {r: f"c{k}_{r}" for r in case.weights}, "attrs": dict(case.attrs), "out": f"c{k}_out"})
    doc = {"schema": "kcc.circuit/1", "name": f"op_{op_type}", "dims": dims, "inputs": inputs,
           "weights": weights, "blocks": [{"name": "cases", "ops": ops}],
           "outputs": [f"c{k}_out" for k in range(len(cases))]}
    return doc, Checkpoint(Path("<memory>"), arrays)


def compile_op(op_type: str, cases: list[Case], options: BuildOptions = BuildOptions(),
               shapes: dict | None = None, dim_max: dict[str, int] | None = None, passes=()) -> CompiledCircuit:
    """Build `cases` of `op_type` as one library; no passes run unless given (the op as written)."""
    doc, ckpt = op_circuit(op_type, cases, shapes, dim_max)
    return compile_circuit(doc, ckpt, options=options, passes=list(passes))


def run_cases(cc: CompiledCircuit, cases: list[Case]) -> list[np.ndarray]:
    """Every case's output, in order, from one call of a compile_op library."""
    feed = {f"c{k}_{r}": a for k, case in enumerate(cases) for r, a in case.inputs.items()}
    dims = {n: v for case in cases for n, v in case.dims.items()}
    outs = cc.run(feed, dims=dims or None).outputs
    return [outs[f"c{k}_out"] for k in range(len(cases))]


def run_op(op_type: str, inputs: dict[str, np.ndarray], weights: dict[str, np.ndarray] | None = None,
           attrs: dict | None = None, options: BuildOptions = BuildOptions(), shapes: dict | None = None,
           dim_max: dict[str, int] | None = None, dims: dict[str, int] | None = None) -> np.ndarray:
    """Compile one op over these arrays and return its output."""
    case = Case("run_op", inputs, weights or {}, attrs or {}, dims or {})
    return run_cases(compile_op(op_type, [case], options, shapes, dim_max), [case])[0]
