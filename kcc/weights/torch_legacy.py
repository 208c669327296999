"""Read a torch file in the legacy (pre-1.6, non-zip) serialisation without torch.

Resemblyzer's pretrained.pt is such a file: five pickles back to back (magic number, protocol
version, system info, the object, the sorted storage keys), then each storage's raw bytes
preceded by its element count (int64, little-endian). The object pickle names storages by
key before their bytes appear, so it is read twice: once to learn where the storages start,
then again with their bytes in hand. The same restricted unpickler as the zip format admits
only tensors, dicts and plain values (kcc.weights.checkpoint), under CHECKPOINT_LIMITS.
"""
from __future__ import annotations

import io
import pickle
from pathlib import Path

import numpy as np

from kcc.weights.bounded_read import CHECKPOINT_LIMITS, Budget, CheckpointError, Limits, guarded, short
from kcc.weights.checkpoint import _STORAGE_KEY, _exact_int, _RestrictedUnpickler, _Storage, _StorageType

MAGIC_NUMBER = 0x1950A86A20F9469CFC6C
PROTOCOL_VERSION = 1001


class _PlainUnpickler(pickle.Unpickler):
    """The header pickles hold only ints, bools, strings and dicts: no global at all."""

    def find_class(self, module, name):
        raise CheckpointError(f"legacy torch header names a global {short(module)}.{short(name)}")


class _LegacyUnpickler(_RestrictedUnpickler):
    """The object pickle, with persistent ids of the legacy form
    ('storage', type, key, location, numel, view_metadata) resolved from `storages`
    (None on the first pass: every storage is then an empty placeholder of the right dtype)."""

    def __init__(self, file, storages: dict[str, bytes] | None, budget: Budget):
        super().__init__(file, archive=None, root="", budget=budget)
        self._legacy = storages
        self.seen: dict[str, tuple[type, int]] = {}

    def persistent_load(self, pid):
        where = self._where
        if not (type(pid) is tuple and len(pid) == 6 and pid[0] == "storage"):
            raise CheckpointError(f"{where}: unexpected persistent id {short(pid)}")
        _, storage_type, key, _location, numel, view = pid
        if not isinstance(storage_type, _StorageType):
            raise CheckpointError(f"{where}: storage {short(key)} has unsupported type {short(storage_type)}")
        if type(key) is not str or not _STORAGE_KEY.fullmatch(key):
            raise CheckpointError(f"{where}: storage key {short(key)} is not a short name")
        if view is not None:
            raise CheckpointError(f"{where}: storage {key} is a storage view, which this reader does not take")
        numel = _exact_int(numel, f"storage {key} element count", where)
        self._budget.reference()
        self.seen[key] = (storage_type.dtype, numel)
        itemsize = np.dtype(storage_type.dtype).itemsize
        data = bytes(numel * itemsize) if self._legacy is None else self._legacy.get(key)
        if data is None or len(data) != numel * itemsize:
            raise CheckpointError(f"{where}: storage {key} declares {numel} elements; its bytes do not match")
        return _Storage(key, data, storage_type.dtype)


def load_legacy_torch(path: str | Path, limits: Limits = CHECKPOINT_LIMITS):
    """The object a legacy torch file holds, tensors as read-only numpy arrays."""
    path = Path(path)
    size = path.stat().st_size
    if size > limits.max_file_bytes:
        raise CheckpointError(f"{path}: {size} bytes, over the {limits.max_file_bytes} allowed")
    blob = path.read_bytes()
    where = f"{path}: legacy torch file"

    def parse():
        f = io.BytesIO(blob)
        if _PlainUnpickler(f).load() != MAGIC_NUMBER:
            raise CheckpointError(f"{where}: not a legacy torch file (magic number differs)")
        if _PlainUnpickler(f).load() != PROTOCOL_VERSION:
            raise CheckpointError(f"{where}: unknown legacy protocol version")
        _PlainUnpickler(f).load()                               # sys_info: byte order, type sizes
        start = f.tell()
        first = _LegacyUnpickler(f, None, Budget(limits, where))
        first.load()
        keys = _PlainUnpickler(f).load()
        if not isinstance(keys, list) or sorted(first.seen) != sorted(keys):
            raise CheckpointError(f"{where}: storage key list differs from the storages the object names")
        storages = {}
        for key in keys:
            dtype, numel = first.seen[key]
            count = int.from_bytes(f.read(8), "little", signed=True)
            nbytes = numel * np.dtype(dtype).itemsize
            if count != numel:
                raise CheckpointError(f"{where}: storage {key} holds {count} elements, the object says {numel}")
            storages[key] = f.read(nbytes)
            if len(storages[key]) != nbytes:
                raise CheckpointError(f"{where}: storage {key} is truncated")
        f.seek(start)
        return _LegacyUnpickler(f, storages, Budget(limits, where)).load()

    return guarded(where, parse)
