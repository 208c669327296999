"""atheris: arbitrary bytes, or a shipped circuit with bytes overwritten, as a circuit document.
The validator may only accept it or raise a CircuitError naming a JSON path that exists in it
(fuzz/circuit_invariants.py); any other exception is a finding.
Run: python fuzz/fuzz_circuit_validator.py -max_total_time=30"""
import json
import sys

import atheris

with atheris.instrument_imports():
    from circuit_invariants import check_mutant
    from kcc.circuits import load_circuit, shipped_circuits

SEEDS = [json.dumps(load_circuit(name)).encode() for name in sorted(shipped_circuits())]


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    # Half the time mutate a shipped circuit's text, half the time take the bytes as they come.
    if fdp.ConsumeBool():
        raw = bytearray(SEEDS[fdp.ConsumeIntInRange(0, len(SEEDS) - 1)])
        for _ in range(fdp.ConsumeIntInRange(1, 8)):
            raw[fdp.ConsumeIntInRange(0, len(raw) - 1)] = fdp.ConsumeIntInRange(32, 126)
        text = bytes(raw)
    else:
        text = fdp.ConsumeBytes(fdp.remaining_bytes())
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return
    check_mutant(doc, "fuzz")


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
