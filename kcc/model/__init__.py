"""The Kokoro model as Python: each upstream module written once, composed into the shipped
circuits. `python -m kcc.model.build_circuits` writes kcc/circuits/*.json from it (--check
fails if they drift); kcc.model.kokoro names the model's fixed numbers.

`kcc.model.load(checkpoint=None, precision=, threads=, max_frames=)` is the one way to get a
ready Synthesizer (kcc.model.loader); it is imported on first use, so `import kcc.model.kokoro`
stays free of the compiler."""


def __getattr__(name: str):
    if name in ("load", "ModelOptionsError"):
        from kcc.model import loader
        return getattr(loader, name)
    raise AttributeError(f"module 'kcc.model' has no attribute {name!r}")
