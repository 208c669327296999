#!/usr/bin/env python3
"""Write kcc/data/kokoro_layout.json: every kokoro-v1_0.pth tensor ('section.key') and its shape.

The importer reads this table instead of building upstream's torch modules, so the runtime needs
no torch. It is made from the seeded upstream builder (the oracle, torch needed here only), and
tests/test_layout_table.py checks that the shipped table still equals what upstream builds.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from oracle.build_checkpoint import build_modules  # noqa: E402
from oracle.upstream import load_config  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "kcc" / "data" / "kokoro_layout.json"


def upstream_layout(config: str = "full") -> dict[str, list[int]]:
    parts = build_modules(load_config(config), 0)
    return {f"{sec}.{k}": list(v.shape) for sec, part in parts.items() for k, v in part.state_dict().items()}


def main() -> int:
    doc = {"about": "kokoro-v1_0.pth tensor layout (Kokoro-82M v1.0 config), made by scripts/make_layout_table.py",
           "tensors": upstream_layout("full")}
    rows = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in doc["tensors"].items())
    OUT.write_text(f'{{"about": {json.dumps(doc["about"])},\n "tensors": {{\n{rows}\n}}}}\n', encoding="utf-8")
    print(f"{OUT}: {len(doc['tensors'])} tensors")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
