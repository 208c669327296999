#!/usr/bin/env python3
"""Write kcc/data/kokoro_int8.json: the tensors the int8 ONNX import of the real weights records
with int8 provenance (kcc.weights.quantised), in sorted order.

With the layout table (kcc/data/kokoro_layout.json) it is the real model's whole structure:
onnx_kokoro.skeleton() rebuilds the imported checkpoint from the two with zero values, which is
what the wheel's prebuilt stage libraries are compiled from (no weights at build time).
tests/test_prebuilt.py checks that the shipped table is still what the import records.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kcc.weights import real_model  # noqa: E402
from kcc.weights.importers.onnx_kokoro import _INT8_TABLE, import_onnx_quantised  # noqa: E402

ABOUT = ("the kokoro-v1_0.pth tensors the int8 ONNX import records as int8 * per-row scale "
         "(kcc.weights.quantised), made by scripts/make_int8_table.py")


def recorded_int8() -> list[str]:
    _sections, quant, _report = import_onnx_quantised(real_model.fetch(log=sys.stderr)["onnx"])
    return sorted(quant)


def main() -> int:
    rows = ",\n".join(f"  {json.dumps(k)}" for k in recorded_int8())
    _INT8_TABLE.write_text(f'{{"about": {json.dumps(ABOUT)},\n "int8": [\n{rows}\n]}}\n', encoding="utf-8")
    print(f"{_INT8_TABLE}: written")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
