"""atheris: arbitrary ids, type ids and dims into a generated C entry point (kokoro_embedding).
Invariant: status 0 -> every output finite; status != 0 -> the -777 canary untouched. Anything
else (a crash, a violated invariant) is a finding. Run: python fuzz/fuzz_c_entry.py -max_total_time=30"""
import sys

import atheris
import numpy as np

from kcc.compiler.driver import compile_circuit
from oracle.checkpoints import test_checkpoint

CIRCUIT = compile_circuit("kokoro_embedding", test_checkpoint("small", 0))
ARENA = CIRCUIT.new_arena()
CANARY = np.float32(-777.0)


def one_input(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    b = fdp.ConsumeIntInRange(0, 5)          # planned range is [1, 4]: 0 and 5 must be refused
    t = fdp.ConsumeIntInRange(0, 520)        # planned range is [1, 512]
    n = max(b, 1) * max(t, 1)
    ids = np.array(fdp.ConsumeIntListInRange(n, -2, 181) or [0], dtype=np.int32)
    types = np.array(fdp.ConsumeIntListInRange(n, -1, 2) or [0], dtype=np.int32)
    ids = np.resize(ids, n)
    types = np.resize(types, n)
    out = np.full(n * 128, CANARY, dtype=np.float32)
    status, _ = CIRCUIT.call([ids, types], [b, t], [out], ARENA)
    if status == 0:
        assert 1 <= b <= 4 and 1 <= t <= 512, (b, t)
        assert np.isfinite(out).all()
    else:
        assert np.all(out == CANARY), "output written on a refused call"


if __name__ == "__main__":
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
