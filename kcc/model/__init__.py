"""The Kokoro model as Python: each upstream module written once, composed into the shipped
circuits. `python -m kcc.model.build_circuits` writes kcc/circuits/*.json from it (--check
fails if they drift); kcc.model.kokoro names the model's fixed numbers."""
