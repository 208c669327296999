"""Batch synthesis (`kcc batch`): a manifest of items -> audio files + JSON sidecars in OUTDIR,
resumable, on a local worker pool or Ray Data. The Python API is kcc.batch.api.Batch."""
from kcc.batch.api import Batch, BatchError, synthesize
from kcc.batch.item import Outcome
from kcc.batch.local_pool import SynthSpec
from kcc.batch.manifest import Defaults, Item, ManifestError, Rejected

__all__ = ["Batch", "BatchError", "Defaults", "Item", "ManifestError", "Outcome", "Rejected", "SynthSpec", "synthesize"]
