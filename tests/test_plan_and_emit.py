"""Memory plans and the checked emitter: good plans emit, malformed plans never become C."""
from __future__ import annotations

import copy

import pytest

from kcc.circuits import load_circuit
from kcc.compiler.emit import CheckedCallCodegenError, check_plan, emit_c
from kcc.compiler.lower import lower_circuit
from kcc.compiler.plan import plan_memory


@pytest.fixture(scope="module")
def graph(small_ckpt):
    g, _ = lower_circuit(load_circuit("kokoro_embedding"), small_ckpt)
    return g


@pytest.fixture()
def plan(graph):
    return plan_memory(graph)


def test_good_plan_is_aligned_and_in_bounds(graph, plan):
    check_plan(graph, plan)
    for b in list(plan.weights.values()) + list(plan.activations.values()):
        assert b.offset % 64 == 0
    assert plan.weights_bytes >= sum(b.nbytes for b in plan.weights.values())
    src = emit_c(graph, plan)
    assert "kcc_kokoro_embedding_run" in src and "W_WORD" in src


def _emits_nothing(graph, plan, match):
    with pytest.raises(CheckedCallCodegenError, match=match):
        emit_c(graph, plan)


def test_weight_offset_at_arena_size_is_rejected(graph, plan):
    plan.weights["ln_beta"].offset = plan.weights_bytes
    _emits_nothing(graph, plan, "offset .* is at or past the weight region size")


def test_weight_running_past_the_region_is_rejected(graph, plan):
    plan.weights["word"].offset = plan.weights_bytes - 64
    _emits_nothing(graph, plan, "past the region size")


def test_duplicate_buffer_define_is_rejected(graph, plan):
    # Two weights planned onto one buffer: the second define would alias the first.
    plan.weights["ln_gamma"].offset = plan.weights["ln_beta"].offset
    _emits_nothing(graph, plan, "overlap in the weight blob")


def test_colliding_c_identifiers_are_rejected(graph, plan):
    twin = copy.copy(plan.weights["word"])
    twin.name = "WORD"
    plan.weights["WORD"] = twin
    _emits_nothing(graph, plan, "duplicate buffer define W_WORD")


def test_misaligned_offset_is_rejected(graph, plan):
    plan.weights["word"].offset += 4
    _emits_nothing(graph, plan, "not 64-byte aligned")


def test_missing_weight_and_activation_are_rejected(graph, plan):
    p = copy.deepcopy(plan)
    del p.weights["position"]
    _emits_nothing(graph, p, "weight 'position' .* has no planned offset")
    p = copy.deepcopy(plan)
    p.activations.clear()
    _emits_nothing(graph, p, "activation 'emb' .* has no planned offset")


def test_undersized_activation_is_rejected(graph, plan):
    plan.activations["emb"].nbytes = 64
    _emits_nothing(graph, plan, r"activation 'emb' is planned 64 B but needs \d+ B")


def test_activation_past_the_arena_is_rejected(graph, plan):
    plan.activations["emb"].nbytes = 64
    plan.arena_bytes = 64
    _emits_nothing(graph, plan, r"activation 'emb' .*needs \d+ B at offset 0, past the region size 64")


def test_live_activations_sharing_bytes_are_rejected(graph, plan):
    g = copy.deepcopy(graph)
    p = copy.deepcopy(plan)
    second = copy.deepcopy(g.ops[0])
    second.name, second.output = "embeddings.1", "emb2"
    g.tensors["emb2"] = copy.deepcopy(g.tensors["emb"])
    g.tensors["emb2"].name = "emb2"
    g.ops.append(second)
    g.outputs.append("emb2")
    buf = copy.deepcopy(p.activations["emb"])
    buf.name, buf.first, buf.last = "emb2", 1, 1
    p.activations["emb2"] = buf
    p.activations["emb"].last = 1
    _emits_nothing(g, p, "live together but overlap")
    # The planner itself never does this: it separates them.
    fresh = plan_memory(g)
    check_plan(g, fresh)
    a, b = fresh.activations["emb"], fresh.activations["emb2"]
    assert not a.overlaps(b)


def test_liveness_reuse_shares_dead_buffers(graph):
    g = copy.deepcopy(graph)
    # emb -> (dead) ; a chain a->b->c where a is dead once b exists: reuse must kick in.
    chain = []
    prev = "emb"
    for i in range(3):
        op = copy.deepcopy(g.ops[0])
        op.name, op.output = f"chain.{i}", f"c{i}"
        g.tensors[f"c{i}"] = copy.deepcopy(g.tensors["emb"])
        g.tensors[f"c{i}"].name = f"c{i}"
        op.inputs = dict(op.inputs)
        chain.append(op)
        prev = op.output
    g.ops.extend(chain)
    g.outputs = [prev]
    reused = plan_memory(g, reuse=True)
    separate = plan_memory(g, reuse=False)
    check_plan(g, reused)
    check_plan(g, separate)
    assert reused.arena_bytes < separate.arena_bytes


def test_one_abi_description_drives_the_c_ctypes_and_export(small_ckpt):
    """kcc.compiler.abi is the only spelling of the entry point: the emitted C declares exactly its
    prototype, the runtime calls it with its ctypes types, the export declares its pointer type."""
    from kcc.compiler import abi
    from kcc.compiler.driver import compile_circuit
    c = compile_circuit("kokoro_embedding", small_ckpt)
    assert abi.run_prototype(c.prefix) + "\n{" in c.source
    assert c._run.argtypes == [t for _, _, t in abi.RUN_PARAMS]
    for name, (ret, params, _, _) in abi.HELPERS.items():
        assert f"{ret} {c.prefix}_{name}({params})" in c.source, name
    from kcc.model.export import runtime_helpers
    assert abi.run_fn_typedef("kcc_run_fn") in "\n".join(runtime_helpers())
