"""Batch synthesis (`kcc batch`): a manifest of items -> audio files + JSON sidecars in OUTDIR,
resumable, on a local worker pool or Ray Data. The Python API is kcc.speech.batch.api.Batch.

Names are imported on first use, so `kcc say` (whose parser lists `kcc batch`) does not pay
for the batch machinery's imports."""
from __future__ import annotations

import importlib

# One item's text: ~25 min of speech, a few minutes of synthesis. Here, not in item.py, so that
# the command line shows it as --max-chars' default without importing the batch machinery.
DEFAULT_MAX_CHARS = 20_000
# The files batch writes (a subset of kcc.speech.audio.formats.FORMATS), here for the same reason.
FORMATS = ("wav", "flac", "mp3", "opus")

_WHERE = {"Batch": "api", "BatchError": "api", "synthesize": "api", "Outcome": "item", "SynthSpec": "local_pool",
          "Defaults": "manifest", "Item": "manifest", "ManifestError": "manifest", "Rejected": "manifest"}
__all__ = sorted(_WHERE)


def __getattr__(name: str):
    if name not in _WHERE:
        raise AttributeError(f"module 'kcc.speech.batch' has no attribute {name!r}")
    return getattr(importlib.import_module(f"kcc.speech.batch.{_WHERE[name]}"), name)
