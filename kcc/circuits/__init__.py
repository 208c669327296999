"""Declared circuits: bounded graphs as versioned JSON, and the validator that admits them.

A circuit names its runtime dimensions (with planned bounds), its external inputs (dtype and
extent), the checkpoint tensors it reads as weights, its ops in blocks (a block may repeat,
as ALBERT's one shared layer runs 12 times), and its semantic X-Ray checkpoints. Validation
happens before lowering; every error names the JSON path of what is wrong.
"""
from __future__ import annotations

import json
from pathlib import Path

from kcc.ir import extent_value

SCHEMA = "kcc.circuit/1"
CIRCUIT_DIR = Path(__file__).parent
DTYPES = ("i32", "f32")
LAYOUTS = ("token_major", "channel_major", "time_major", "flat")


class CircuitError(Exception):
    """A circuit document is malformed; the message starts with the JSON path at fault."""


def circuit_path(name_or_path: str | Path) -> Path:
    """A bare name ('kokoro_embedding') means a circuit shipped in kcc/circuits."""
    p = Path(name_or_path)
    if p.suffix == ".json" and p.exists():
        return p
    shipped = CIRCUIT_DIR / f"{name_or_path}.json"
    if shipped.exists():
        return shipped
    raise CircuitError(f"{name_or_path}: no such circuit file, and no shipped circuit of that name "
                       f"(shipped: {', '.join(sorted(shipped_circuits()))})")


def shipped_circuits() -> list[str]:
    return [p.stem for p in CIRCUIT_DIR.glob("*.json")]


def load_circuit(name_or_path: str | Path) -> dict:
    path = circuit_path(name_or_path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CircuitError(f"{path}: not valid JSON: {exc}")
    except UnicodeDecodeError as exc:
        raise CircuitError(f"{path}: not UTF-8 text: {exc}")
    validate_circuit(doc, known_ops=_known_ops(), source=str(path))
    return doc


def _known_ops() -> set[str]:
    from kcc.ops import OPS
    return set(OPS)


def _need(cond: bool, where: str, msg: str) -> None:
    if not cond:
        raise CircuitError(f"{where}: {msg}")


def _keys(obj, where: str, required: set[str], optional: set[str] = frozenset()) -> None:
    _need(isinstance(obj, dict), where, f"expected an object, got {type(obj).__name__}")
    missing = required - obj.keys()
    _need(not missing, where, f"missing key(s) {', '.join(sorted(missing))}")
    extra = obj.keys() - required - optional
    _need(not extra, where, f"unknown key(s) {', '.join(sorted(extra))}")


def _name(value, where: str) -> str:
    _need(isinstance(value, str) and value and value.replace("_", "a").replace(".", "a").isalnum(),
          where, f"expected an identifier (letters, digits, '_', '.'), got {value!r}")
    return value


def validate_circuit(doc, known_ops: set[str], source: str = "circuit") -> None:
    """Raise CircuitError at the first problem; return None for a well-formed circuit."""
    _keys(doc, source, {"schema", "name", "dims", "inputs", "weights", "blocks", "outputs"},
          {"description", "capture"})
    _need(doc["schema"] == SCHEMA, f"{source}.schema", f"expected '{SCHEMA}', got {doc['schema']!r}")
    _name(doc["name"], f"{source}.name")

    dims = doc["dims"]
    _need(isinstance(dims, dict), f"{source}.dims", "expected an object of name -> {min, max}")
    for dname, bound in dims.items():
        where = f"{source}.dims.{dname}"
        _name(dname, where)
        _keys(bound, where, {"min", "max"})
        _need(all(isinstance(bound[k], int) and not isinstance(bound[k], bool) for k in ("min", "max")),
              where, "min and max must be integers")
        _need(1 <= bound["min"] <= bound["max"], where, f"need 1 <= min <= max, got {bound}")

    defined: set[str] = set()
    _need(isinstance(doc["inputs"], list), f"{source}.inputs", "expected a list")
    for i, inp in enumerate(doc["inputs"]):
        where = f"{source}.inputs[{i}]"
        _keys(inp, where, {"name", "dtype", "shape"})
        _name(inp["name"], f"{where}.name")
        _need(isinstance(inp["dtype"], str) and inp["dtype"] in DTYPES, f"{where}.dtype", f"expected one of {DTYPES}, got {inp['dtype']!r}")
        _check_shape(inp["shape"], dims, f"{where}.shape")
        _need(inp["name"] not in defined, f"{where}.name", f"'{inp['name']}' defined twice")
        defined.add(inp["name"])

    weights = doc["weights"]
    _need(isinstance(weights, dict), f"{source}.weights", "expected an object of name -> {ref}")
    for wname, spec in weights.items():
        where = f"{source}.weights.{wname}"
        _name(wname, where)
        _keys(spec, where, {"ref"}, {"fold"})
        _need(isinstance(spec["ref"], str) and spec["ref"], f"{where}.ref", "expected a checkpoint tensor name")
        _need(spec.get("fold", "none") in ("none", "weight_norm"), f"{where}.fold",
              f"expected 'none' or 'weight_norm', got {spec.get('fold')!r}")

    _need(isinstance(doc["blocks"], list) and doc["blocks"], f"{source}.blocks", "expected a non-empty list")
    checkpoint_names: set[str] = set()
    for b, block in enumerate(doc["blocks"]):
        _validate_block(block, f"{source}.blocks[{b}]", known_ops, weights, defined, checkpoint_names)

    _need(isinstance(doc["outputs"], list) and doc["outputs"], f"{source}.outputs", "expected a non-empty list")
    inputs = {i["name"] for i in doc["inputs"]}
    for i, out in enumerate(doc["outputs"]):
        _need(isinstance(out, str) and out in defined and out not in inputs, f"{source}.outputs[{i}]",
              f"'{out}' is not produced by any op")


def _check_shape(shape, dims, where: str) -> None:
    _need(isinstance(shape, list) and shape, where, "expected a non-empty list of extents")
    for j, ext in enumerate(shape):
        ok = (isinstance(ext, int) and not isinstance(ext, bool) and ext >= 1) or (isinstance(ext, str) and ext in dims)
        if not ok and isinstance(ext, str):
            # An integer expression over declared dims ('(2*F)'), checked against them at run time.
            try:
                ok = isinstance(extent_value(ext, {d: 1 for d in dims}), int)
            except Exception:  # noqa: BLE001 (any failure means: not an expression over dims)
                ok = False
        _need(ok, f"{where}[{j}]", f"extent {ext!r} is neither a positive integer, a declared dim, "
              "nor an integer expression over declared dims")


def _validate_block(block, where, known_ops, weights, defined: set[str], checkpoint_names: set[str]) -> None:
    _keys(block, where, {"name", "ops"}, {"repeat", "input", "output", "checkpoints"})
    bname = _name(block["name"], f"{where}.name")
    repeat = block.get("repeat", 1)
    _need(isinstance(repeat, int) and not isinstance(repeat, bool) and repeat >= 1, f"{where}.repeat",
          f"expected a positive integer, got {repeat!r}")
    local = set(defined)
    carry = block.get("input", {})
    if repeat > 1 or carry:
        _need(isinstance(carry, dict) and len(carry) == 1, f"{where}.input",
              "a repeated block carries exactly one tensor: {local_name: outer_tensor}")
        _need("output" in block, f"{where}.output", "a repeated block names the local tensor it carries forward")
        (cname, outer), = carry.items()
        _name(cname, f"{where}.input")
        _need(isinstance(outer, str) and outer in defined, f"{where}.input.{cname}", f"outer tensor '{outer}' is not defined before this block")
        local.add(cname)
    produced: set[str] = set()
    _need(isinstance(block["ops"], list) and block["ops"], f"{where}.ops", "expected a non-empty list")
    for o, op in enumerate(block["ops"]):
        ow = f"{where}.ops[{o}]"
        _keys(op, ow, {"op", "in", "out"}, {"w", "attrs"})
        _need(isinstance(op["op"], str), f"{ow}.op", "expected an op name")
        _need(op["op"] in known_ops, f"{ow}.op", f"unknown op '{op['op']}'; known: {', '.join(sorted(known_ops))}")
        _need(isinstance(op["in"], dict), f"{ow}.in", "expected an object of role -> tensor")
        for role, tensor in op["in"].items():
            _need(isinstance(tensor, str) and tensor in local, f"{ow}.in.{role}",
                  f"tensor '{tensor}' is used before it is defined")
        _need(isinstance(op.get("w", {}), dict), f"{ow}.w", "expected an object of role -> weight")
        for role, wname in op.get("w", {}).items():
            _need(isinstance(wname, str) and wname in weights, f"{ow}.w.{role}",
                  f"weight '{wname}' is not declared in weights")
        _need(isinstance(op.get("attrs", {}), dict), f"{ow}.attrs", "expected an object")
        out = _name(op["out"], f"{ow}.out")
        _need(out not in local, f"{ow}.out", f"tensor '{out}' is defined twice")
        local.add(out)
        produced.add(out)
    if "output" in block:
        _need(isinstance(block["output"], str) and block["output"] in produced, f"{where}.output", f"'{block['output']}' is not produced in this block")
    _need(isinstance(block.get("checkpoints", []), list), f"{where}.checkpoints", "expected a list")
    for c, ck in enumerate(block.get("checkpoints", [])):
        cw = f"{where}.checkpoints[{c}]"
        _keys(ck, cw, {"name", "tensor", "layout", "dtype", "axes"}, {"gate"})
        if "gate" in ck:
            _keys(ck["gate"], f"{cw}.gate", {"why"}, {"min_cosine", "max_rmse", "max_rel_rmse", "max_abs"})
            _need(isinstance(ck["gate"]["why"], str) and len(ck["gate"]["why"]) > 10, f"{cw}.gate.why",
                  "a loosened gate must say why")
            for key, value in ck["gate"].items():
                _need(key == "why" or (isinstance(value, (int, float)) and not isinstance(value, bool)
                                       and value >= 0), f"{cw}.gate.{key}", f"expected a number >= 0, got {value!r}")
        _need(isinstance(ck["name"], str) and ck["name"], f"{cw}.name", "expected a checkpoint name")
        _need(isinstance(ck["tensor"], str) and ck["tensor"] in produced, f"{cw}.tensor", f"'{ck['tensor']}' is not produced in this block")
        _need(isinstance(ck["layout"], str) and ck["layout"] in LAYOUTS, f"{cw}.layout", f"expected one of {LAYOUTS}")
        _need(ck["dtype"] == "f32", f"{cw}.dtype", "checkpoints are FP32")
        _need(isinstance(ck["axes"], list) and all(isinstance(a, str) for a in ck["axes"]), f"{cw}.axes",
              "expected a list of axis names")
        try:
            names = [ck["name"].format(i=i) for i in range(repeat)]
        except (KeyError, IndexError, ValueError) as exc:
            raise CircuitError(f"{cw}.name: bad placeholder in {ck['name']!r}: {exc}")
        for n in names:
            _need(n not in checkpoint_names, f"{cw}.name", f"checkpoint '{n}' declared twice")
            checkpoint_names.add(n)
    # Outside the block, only its result is visible: under the block's own name if it
    # carries, and every produced tensor of a single-pass block.
    if repeat > 1 or carry:
        defined.add(bname)
    else:
        defined.update(produced)
