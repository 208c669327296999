"""atheris: arbitrary bytes as a circuit document. The validator may only accept it or raise
CircuitError; any other exception is a finding. Run: python fuzz/fuzz_circuit_validator.py -max_total_time=30"""
import json
import sys

import atheris

with atheris.instrument_imports():
    from kcc.circuits import CircuitError, load_circuit, validate_circuit
    from kcc.ops import OPS

SEED = json.dumps(load_circuit("kokoro_embedding")).encode()
KNOWN = set(OPS)


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    # Half the time mutate the real circuit's text, half the time take the bytes as they come.
    if fdp.ConsumeBool():
        raw = bytearray(SEED)
        for _ in range(fdp.ConsumeIntInRange(1, 8)):
            raw[fdp.ConsumeIntInRange(0, len(raw) - 1)] = fdp.ConsumeIntInRange(32, 126)
        text = bytes(raw)
    else:
        text = fdp.ConsumeBytes(fdp.remaining_bytes())
    try:
        doc = json.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return
    try:
        validate_circuit(doc, known_ops=KNOWN, source="fuzz")
    except CircuitError:
        pass


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
