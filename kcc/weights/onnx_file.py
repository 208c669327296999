"""A Kokoro ONNX export given by path (kokoro-onnx's `kokoro-v1.0.onnx`, `.int8.onnx`, `.fp16.onnx`)
as a model kcc compiles: its identity is the file's SHA-256 plus the importer's version, so a
compile is cached by content, whatever the file is called or wherever it lies; the very bytes
of kcc's default model (the int8 export) share the default model's artifact."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from kcc.weights import real_model
from kcc.weights.checkpoint import Checkpoint
from kcc.weights.importers.onnx_kokoro import import_onnx_quantised

ONNX_MAGIC_SUFFIXES = (".onnx",)


def is_onnx(path: str | Path) -> bool:
    """A path kcc reads as an ONNX export (by its name: a .pth is a zip, an .onnx a protobuf)."""
    return Path(path).suffix.lower() in ONNX_MAGIC_SUFFIXES


def onnx_model_id(digest: str) -> str:
    """The artifact key of an export with this SHA-256; kcc's default export keeps its own key."""
    default = _default_digest()
    if default is not None and digest == default:
        return f"kokoro-82m-v1.0-int8onnx-{digest[:16]}-import{real_model.IMPORTER_VERSION}"
    return f"onnx-{digest[:24]}-import{real_model.IMPORTER_VERSION}"


def _default_digest() -> str | None:
    """The default export's SHA-256 when it is in the cache (its checked stamp), else None."""
    stamp = real_model.default_cache() / f"{real_model.ONNX_NAME}.sha256"
    try:
        return stamp.read_text().split()[0]
    except (OSError, IndexError):
        return None


def import_onnx_checkpoint(path: str | Path) -> Checkpoint:
    """The export's weights in kcc's checkpoint layout (fp32; int8 provenance kept where exact)."""
    sections, quant, _report = import_onnx_quantised(path)
    tensors = {}
    for sec, sd in sections.items():
        for key, arr in sd.items():
            arr = np.asarray(arr, dtype=np.float32)
            arr.setflags(write=False)
            tensors[f"{sec}.{key.removeprefix('module.')}"] = arr
    return Checkpoint(path=Path(path), tensors=tensors, quant=quant)
