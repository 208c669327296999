"""Where the default model's weight blob goes, int8 storage on and off (no build, lowering only).

For every pipeline stage: the bytes of its packed weights by storage (int8 packs, DFT spectra,
other FP32), and the FP32 bytes of weights that have int8 provenance but an op with no int8
twin (so they stay FP32), by op type. `--fp32` drops the provenance (today's blob).
Usage: python bench/int8_storage_tally.py [--fp32]
"""
from __future__ import annotations

import dataclasses
import sys
from collections import Counter

from kcc.circuits import load_circuit
from kcc.compiler.lower import lower_circuit, resolve_quant
from kcc.compiler.passes import DEFAULT_PASSES
from kcc.compiler.plan import align_up
from kcc.model.pipeline import BACK, FRONT
from kcc.weights import real_model


def main(argv: list[str]) -> None:
    ckpt = real_model.import_checkpoint(real_model.fetch(offline=True))
    if "--fp32" in argv:
        ckpt = dataclasses.replace(ckpt, quant={})
    kinds, left = Counter(), Counter()
    for stage in FRONT + BACK:
        doc = load_circuit(stage)
        quant = resolve_quant(doc, ckpt)
        g, _ = lower_circuit(doc, ckpt, DEFAULT_PASSES)
        for w in g.weights.values():
            kind = "int8" if w.pack.startswith("q8") else "dft" if "spec" in w.pack or "dft" in w.pack else "fp32"
            kinds[kind] += align_up(w.nbytes)
        for op in g.ops:
            for role, w in op.weights.items():
                base = w.split(".")[0]
                if base in quant and not g.weights[w].pack.startswith("q8"):
                    left[op.type] += g.weights[w].nbytes
    total = sum(kinds.values())
    print(f"blob {total / 1e6:.1f} MB: " + ", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in kinds.most_common()))
    print("int8-provenance weights still FP32, by op: "
          + (", ".join(f"{k} {v / 1e6:.1f} MB" for k, v in left.most_common()) or "none"))


if __name__ == "__main__":
    main(sys.argv[1:])
