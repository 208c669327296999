"""The compile driver: a circuit and a checkpoint in, a loaded CompiledCircuit out
(validate -> lower + passes -> plan -> emit -> build -> load)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kcc.circuits import CircuitError, load_circuit, validate_circuit
from kcc.compiler.build import BuildOptions, build_library
from kcc.compiler.emit import emit_c
from kcc.ir import Graph
from kcc.compiler.lower import lower_circuit
from kcc.compiler.passes import DEFAULT_PASSES, for_precision
from kcc.compiler.plan import MemoryPlan, plan_memory
from kcc.compiler.precision import passes as precision_passes
from kcc.compiler.runtime import CompiledCircuit, aligned_empty
from kcc.ops import OPS
from kcc.weights.checkpoint import Checkpoint, load_checkpoint


def weight_blob(plan: MemoryPlan, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """The read-only weight blob at the plan's offsets. Consumes `arrays`: each array is
    dropped once copied, so packed weights and blob are not both held in full (the generator's
    packed spectra alone are ~280 MB)."""
    blob = aligned_empty(plan.weights_bytes, plan.alignment)
    blob[:] = 0
    for name, buf in plan.weights.items():
        data = np.ascontiguousarray(arrays.pop(name), dtype=np.float32).view(np.uint8).reshape(-1)
        blob[buf.offset:buf.offset + data.size] = data
    blob.setflags(write=False)
    return blob


def compile_graph(g: Graph, arrays, options: BuildOptions = BuildOptions(), reuse: bool = True) -> CompiledCircuit:
    """Plan, emit, build and load `g`; `arrays` (lower_circuit's) is consumed into the weight blob."""
    plan = plan_memory(g, reuse=reuse)
    source = emit_c(g, plan)
    built = build_library(source, options, name=g.name)
    return CompiledCircuit(g, plan, built, weight_blob(plan, arrays), source)


def compile_circuit(circuit: str | Path | dict, checkpoint: str | Path | Checkpoint,
                    options: BuildOptions = BuildOptions(), dims: dict[str, int] | None = None,
                    passes=None, reuse: bool = True) -> CompiledCircuit:
    """circuit: a shipped name, a JSON path or a dict; dims: optional new max per runtime dim."""
    g, arrays = lower(circuit, checkpoint, options, dims, passes)
    return compile_graph(g, arrays, options, reuse)


def generated_source(circuit: str | Path | dict, checkpoint: str | Path | Checkpoint,
                     options: BuildOptions = BuildOptions(), dims: dict[str, int] | None = None) -> str:
    """The C that compile_circuit would build, without building it (the wheel's prebuilt libraries)."""
    g, _arrays = lower(circuit, checkpoint, options, dims)
    return emit_c(g, plan_memory(g))


def lower(circuit: str | Path | dict, checkpoint: str | Path | Checkpoint, options: BuildOptions = BuildOptions(),
          dims: dict[str, int] | None = None, passes=None) -> tuple[Graph, dict[str, np.ndarray]]:
    """The graph compile_circuit builds and its weight arrays: validated, re-planned, lowered, passes run."""
    if isinstance(circuit, dict):
        validate_circuit(circuit, known_ops=set(OPS), source=circuit.get("name", "circuit"))
        doc = circuit
    else:
        doc = load_circuit(circuit)
    if dims:
        unknown = sorted(set(dims) - set(doc["dims"]))
        if unknown:
            raise CircuitError(f"circuit '{doc['name']}' has no dim(s) {unknown} to re-plan; dims are {list(doc['dims'])}")
        doc = {**doc, "dims": {**doc["dims"], **{k: {**doc["dims"][k], "max": v} for k, v in dims.items()}}}
        validate_circuit(doc, known_ops=set(OPS), source=f"{doc['name']} (re-planned dims)")
    ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else load_checkpoint(checkpoint)
    passes = for_precision(DEFAULT_PASSES if passes is None else passes, options.precision)   # fp32-only ones left out
    return lower_circuit(doc, ckpt, [*passes, *precision_passes(options.precision)])   # precision's last: bf16 rewrites the others' ops
