"""What a malformed circuit document may do, checked the same way by the atheris target
(fuzz_circuit_validator.py) and the bounded pytest fuzz (tests/test_reliability.py).

A document is either refused by the validator with a CircuitError whose message starts with
the source name and a JSON path that exists in the document (its last step may be a key the
message says is missing), or accepted; an accepted one, given a `lower` function, lowers or is
refused there by a named error (LoweringError, CheckpointError). Any other exception, and a
refusal that names no such path, is a finding.
"""
from __future__ import annotations

import re

from kcc.weights.checkpoint import CheckpointError
from kcc.circuits import CircuitError, validate_circuit
from kcc.ops import OPS, LoweringError

KNOWN = set(OPS)


def path_problem(message: str, source: str, doc) -> str | None:
    """None if `message` is '<source><path>: ...' with <path> naming a place in `doc`. The path
    is read against the document itself (keys are matched as they are spelled there, so a key
    holding '.' or ' ' is still one step)."""
    if not message.startswith(source):
        return f"refusal does not start with the source {source!r}: {message!r}"
    rest, pos, node = message[len(source):], 0, doc
    while not rest.startswith(": ", pos):
        if isinstance(node, list) and (m := re.match(r"\[(\d+)\]", rest[pos:])):
            if int(m.group(1)) >= len(node):
                return f"refusal names index {m.group(0)} past the list's end: {message!r}"
            node, pos = node[int(m.group(1))], pos + m.end()
            continue
        if isinstance(node, dict) and rest.startswith(".", pos):
            keys = [k for k in node if isinstance(k, str) and rest.startswith("." + k, pos)
                    and rest[pos + 1 + len(k):pos + 3 + len(k)][:1] in (".", "[", ":")]
            if keys:
                key = max(keys, key=len)
                node, pos = node[key], pos + 1 + len(key)
                continue
            end = rest.find(": ", pos)
            if end > pos + 1 and not re.search(r"[.\[]", rest[pos + 1:end]):
                return None            # the last step: a key the message says is missing
        return f"refusal names {rest[:pos]!r} then {rest[pos:pos + 40]!r}, not a place in the document: {message!r}"
    return None


def check_mutant(doc, source: str, lower=None) -> str:
    """'refused', 'accepted' (no lower given), 'lowered' or 'refused at lowering'; raises
    AssertionError for a refusal that names no path, and lets any other exception through."""
    try:
        validate_circuit(doc, known_ops=KNOWN, source=source)
    except CircuitError as exc:
        problem = path_problem(str(exc), source, doc)
        if problem:
            raise AssertionError(problem) from exc
        return "refused"
    if lower is None:
        return "accepted"
    try:
        lower(doc)
    except (LoweringError, CheckpointError):
        return "refused at lowering"
    return "lowered"
