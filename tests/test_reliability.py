"""Reliability: concurrent contexts are bit-identical to serial runs; fuzzed inputs never crash.

The fuzz loops are bounded (fixed example counts, fixed seeds) so the suite stays fast and
repeatable; every failure mode they reach must be a named error or a nonzero status with the
output canary intact.
"""
from __future__ import annotations

import copy
import hashlib
import json
import random
import threading

import numpy as np
import pytest

from kcc.circuits import CircuitError, load_circuit, validate_circuit
from kcc.ops import OPS
from kcc.compiler.driver import compile_circuit

pytestmark = pytest.mark.sanitize    # scripts/sanitize.sh reruns it under ASan + UBSan

CANARY = -777.0


@pytest.fixture(scope="module")
def emb(small_ckpt):
    return compile_circuit("kokoro_embedding", small_ckpt)


def test_threads_on_separate_arenas_match_serial_bit_for_bit(emb):
    rng = np.random.default_rng(3)
    batches = [rng.integers(0, 178, size=(2, int(rng.integers(1, 200))), dtype=np.int32) for _ in range(16)]
    serial = [emb.run({"input_ids": b, "token_type_ids": np.zeros_like(b)}).outputs["emb"] for b in batches]
    blob_before = hashlib.sha256(emb.weights.tobytes()).hexdigest()
    results: list = [None] * len(batches)

    def worker(k: int) -> None:
        arena = emb.new_arena()
        for i in range(k, len(batches), 4):
            b = batches[i]
            results[i] = emb.run({"input_ids": b, "token_type_ids": np.zeros_like(b)}, arena=arena).outputs["emb"]

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for a, b in zip(serial, results):
        np.testing.assert_array_equal(a, b)
    assert hashlib.sha256(emb.weights.tobytes()).hexdigest() == blob_before


def test_fuzzed_ids_either_run_or_leave_the_canary(emb):
    rng = np.random.default_rng(11)
    arena = emb.new_arena()
    refused = ran = 0
    for _ in range(300):
        t = int(rng.integers(1, 64))
        ids = rng.integers(0, 178, size=(1, t), dtype=np.int32)
        types = np.zeros((1, t), dtype=np.int32)
        if rng.random() < 0.5:  # poison one position with an out-of-range id or type id
            where = int(rng.integers(0, t))
            if rng.random() < 0.5:
                ids[0, where] = rng.choice([-3, -1, 178, 181, 2 ** 31 - 1])
            else:
                types[0, where] = rng.choice([-1, 2, 7])
        out = np.full((1, t, 128), CANARY, dtype=np.float32)
        status, msg = emb.call([ids, types], [1, t], [out], arena)
        valid = bool(((ids >= 0) & (ids < 178)).all() and ((types >= 0) & (types < 2)).all())
        if valid:
            assert status == 0 and np.isfinite(out).all()
            ran += 1
        else:
            assert status == -1 and np.all(out == CANARY) and "rejected its input" in msg
            refused += 1
    assert ran > 10 and refused > 10


def _mutations(doc: dict, rng: random.Random):
    """Yield documents with one random structural change each."""
    paths = []

    def walk(node, path):
        paths.append(path)
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, path + [k])
        elif isinstance(node, list):
            for i, v in enumerate(node):
                walk(v, path + [i])
    walk(doc, [])
    junk = [None, 0, -1, 1.5, "", "x", [], {}, True, "B", 10 ** 12]
    for _ in range(400):
        d = copy.deepcopy(doc)
        path = rng.choice(paths[1:])
        parent = d
        for p in path[:-1]:
            parent = parent[p]
        action = rng.random()
        if action < 0.5:
            parent[path[-1]] = rng.choice(junk)
        elif action < 0.8 and isinstance(parent, dict):
            del parent[path[-1]]
        else:
            if isinstance(parent, dict):
                parent["unexpected_" + str(rng.randint(0, 9))] = rng.choice(junk)
            else:
                parent.append(rng.choice(junk))
        yield d


def test_fuzzed_circuits_are_refused_with_named_errors_only():
    doc = load_circuit("kokoro_embedding")
    rng = random.Random(5)
    refused = 0
    for d in _mutations(doc, rng):
        try:
            validate_circuit(d, known_ops=set(OPS), source="fuzz")
        except CircuitError as exc:
            assert str(exc).startswith("fuzz"), exc
            refused += 1
    assert refused > 300


def test_every_shipped_circuit_survives_mutation_fuzz(small_ckpt):
    """Each mutant of each shipped circuit is refused by a CircuitError naming a JSON path that
    is in it, or accepted and then lowered or refused by LoweringError / CheckpointError;
    nothing else (fuzz/circuit_invariants.py, shared with the atheris target)."""
    from fuzz.circuit_invariants import check_mutant, path_problem
    from kcc.circuits import shipped_circuits
    from kcc.compiler.lower import lower_circuit
    # the checker itself: a refusal must name a place in the document
    assert path_problem("x.blocks[0].ops: bad", "x", {"blocks": [{"ops": []}]}) is None
    assert path_problem("x.blocks[0].output: missing", "x", {"blocks": [{"ops": []}]}) is None
    assert path_problem("x.blocks[1].ops: bad", "x", {"blocks": [{"ops": []}]}) is not None
    assert path_problem("x.blocks[0].ops.w.y: bad", "x", {"blocks": [{"ops": []}]}) is not None
    assert path_problem("y.blocks: bad", "x", {"blocks": []}) is not None
    rng = random.Random(9)
    seen = {}
    for name in sorted(shipped_circuits()):
        doc = load_circuit(name)
        for d in list(_mutations(doc, rng))[:100]:
            outcome = check_mutant(json.loads(json.dumps(d)), name, lambda m: lower_circuit(m, small_ckpt, []))
            seen[outcome] = seen.get(outcome, 0) + 1
    # every outcome is reached: 650 / 44 / 106 of 800 when measured
    assert seen["refused"] > 500 and seen["lowered"] > 20 and seen["refused at lowering"] > 50, seen