"""Write kcc/circuits/*.json from the model builder, or (--check) fail if they differ from it.

    python -m kcc.model.build_circuits [--check] [--dir DIR]

The JSON files are generated artifacts: edit kcc/model/, then run this. --check exits 1 and
names every file that is stale or missing (CI runs it through tests/test_model_builder.py).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from kcc.circuits import CIRCUIT_DIR, validate_circuit
from kcc.model.circuit import Circuit, serialise
from kcc.model.decoder import decoder
from kcc.model.encoder import embedding, phoneme_encoder, text_encoder
from kcc.model.generator import generator, source_noise
from kcc.model.predictor import duration, prosody
from kcc.ops import OPS

CIRCUITS: dict[str, Callable[[], Circuit]] = {
    "kokoro_embedding": embedding,
    "kokoro_phoneme_encoder": phoneme_encoder,
    "kokoro_text_encoder": text_encoder,
    "kokoro_duration": duration,
    "kokoro_prosody": prosody,
    "kokoro_decoder": decoder,
    "kokoro_source_noise": source_noise,
    "kokoro_generator": generator,
}


def built_texts() -> dict[str, str]:
    """Every circuit's JSON text as the builder makes it, validated first."""
    texts = {}
    for name, make in CIRCUITS.items():
        doc = make().document()
        if doc["name"] != name:
            raise AssertionError(f"builder for {name} made a circuit named {doc['name']!r}")
        validate_circuit(doc, known_ops=set(OPS), source=f"kcc.model:{name}")
        texts[name] = serialise(doc)
    return texts


def stale(directory: Path = CIRCUIT_DIR) -> list[str]:
    """Names of circuits whose file in `directory` is missing or differs from the builder's."""
    out = []
    for name, text in built_texts().items():
        path = directory / f"{name}.json"
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            out.append(name)
    return out


def write(directory: Path = CIRCUIT_DIR) -> list[str]:
    """Rewrite the files that differ; return their names."""
    changed = []
    for name, text in built_texts().items():
        path = directory / f"{name}.json"
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(name)
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kcc.model.build_circuits", description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="fail if a committed circuit differs from the builder")
    ap.add_argument("--dir", type=Path, default=CIRCUIT_DIR, help="circuit directory (default: kcc/circuits)")
    args = ap.parse_args(argv)
    if args.check:
        bad = stale(args.dir)
        for name in bad:
            print(f"{args.dir / (name + '.json')}: differs from kcc/model's build "
                  "(run python -m kcc.model.build_circuits)", file=sys.stderr)
        return 1 if bad else 0
    for name in write(args.dir):
        print(f"wrote {args.dir / (name + '.json')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
