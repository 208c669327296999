"""Write checkpoints without torch: a torch zip (.pth) that torch.load(weights_only=True) and
kcc.weights.checkpoint read, and the .npz form kcc.weights.checkpoint also reads.

A .pth is a zip of `<root>/data.pkl` (a protocol-2 pickle), one `<root>/data/<key>` record per
tensor (its raw little-endian bytes, 64-byte aligned as torch writes them) and the small
`version`, `byteorder`, `.format_version`, `.storage_alignment` records. The pickle names each
tensor as torch does: torch._utils._rebuild_tensor_v2((persistent id ('storage',
torch.FloatStorage, key, 'cpu', numel)), offset, size, stride, False, OrderedDict()). Those
globals are written as opcodes, not pickled objects, so torch need not be installed.

`pickle_bytes` and `write_torch_zip` write whatever they are given (TensorRef records with any
numbers in them): the fuzzer and the hostile-file tests build bad files with them.
`save_torch_zip` and `save_npz_checkpoint` accept only well-formed input and write atomically:
a refused input or a failed write leaves the destination as it was.
"""
from __future__ import annotations

import io
import math
import os
import struct
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kcc.weights.checkpoint import CHECKPOINT_LIMITS, MAX_DEPTH, SECTIONS, STORAGE_DTYPES, CheckpointError
from kcc.files import AtomicFile

STORAGE_NAMES = {np.dtype(v): k for k, v in STORAGE_DTYPES.items()}
ALIGNMENT = 64                           # torch aligns record data so it can mmap tensors
_DATE = (1980, 1, 1, 0, 0, 0)            # fixed: the same tensors give the same bytes


class CheckpointWriteError(CheckpointError):
    """The object cannot be written as a checkpoint; nothing was written."""


@dataclass(frozen=True)
class TensorRef:
    """One tensor record as data.pkl spells it; written as given, checked by nobody."""
    storage: str                         # record name under <root>/data/
    storage_type: str                    # 'FloatStorage', ...
    numel: int                           # the storage's element count in the persistent id
    offset: int
    size: tuple
    stride: tuple


class _Opcodes:
    """Protocol-2 pickle opcodes for dicts, lists, tuples, scalars, strings and TensorRefs."""

    def __init__(self):
        self.out = io.BytesIO()

    def emit(self, obj) -> None:
        w = self.out.write
        if obj is None:
            w(b"N")
        elif obj is True or obj is False:
            w(b"\x88" if obj else b"\x89")
        elif isinstance(obj, int):
            self._int(obj)
        elif isinstance(obj, float):
            w(b"G" + struct.pack(">d", obj))
        elif isinstance(obj, str):
            raw = obj.encode("utf-8", "surrogatepass")
            w(b"X" + struct.pack("<I", len(raw)) + raw)
        elif isinstance(obj, bytes):
            w(b"C" + struct.pack("<B", len(obj)) + obj if len(obj) < 256 else b"B" + struct.pack("<I", len(obj)) + obj)
        elif isinstance(obj, TensorRef):
            self._tensor(obj)
        elif isinstance(obj, dict):
            w(b"}(")
            for k, v in obj.items():
                self.emit(k)
                self.emit(v)
            w(b"u")
        elif isinstance(obj, list):
            w(b"](")
            for v in obj:
                self.emit(v)
            w(b"e")
        elif isinstance(obj, tuple):
            self._tuple(obj)
        else:
            raise CheckpointWriteError(f"cannot pickle a {type(obj).__name__} into a checkpoint")

    def _int(self, n: int) -> None:
        w = self.out.write
        if 0 <= n < 256:
            w(b"K" + struct.pack("<B", n))
        elif 0 <= n < 65536:
            w(b"M" + struct.pack("<H", n))
        elif -2**31 <= n < 2**31:
            w(b"J" + struct.pack("<i", n))
        else:
            raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
            w(b"\x8a" + struct.pack("<B", len(raw)) + raw)

    def _tuple(self, items) -> None:
        self.out.write(b"(")
        for v in items:
            self.emit(v)
        self.out.write(b"t")

    def _global(self, module: str, name: str) -> None:
        self.out.write(b"c" + f"{module}\n{name}\n".encode())

    def _tensor(self, t: TensorRef) -> None:
        w = self.out.write
        self._global("torch._utils", "_rebuild_tensor_v2")
        w(b"(")                                              # the argument tuple
        w(b"(")                                              # the persistent id
        self.emit("storage")
        self._global("torch", t.storage_type)
        self.emit(t.storage)
        self.emit("cpu")
        self.emit(t.numel)
        w(b"tQ")                                             # TUPLE, BINPERSID
        self.emit(t.offset)
        self.emit(t.size)
        self.emit(t.stride)
        w(b"\x89")                                           # requires_grad=False
        self._global("collections", "OrderedDict")
        w(b")R")                                             # OrderedDict() backward hooks
        w(b"tR")                                             # the call


def pickle_bytes(obj) -> bytes:
    """data.pkl for `obj` (dicts, lists, tuples, scalars, strings, TensorRefs), as written."""
    ops = _Opcodes()
    ops.out.write(b"\x80\x02")
    ops.emit(obj)
    ops.out.write(b".")
    return ops.out.getvalue()


def _atomic(path: Path, write) -> Path:
    """write(fileobj) into kcc.files' AtomicFile beside `path` (the umask's mode, removed on
    failure or on a signal), synced, then renamed over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with AtomicFile(path) as out:
        write(out.fh)
        out.fh.flush()
        os.fsync(out.fh.fileno())
        out.commit()
    return path


def _write_records(fh, root: str, records: dict[str, bytes]) -> None:
    with zipfile.ZipFile(fh, "w", zipfile.ZIP_STORED) as z:
        for name, data in records.items():
            info = zipfile.ZipInfo(f"{root}/{name}", date_time=_DATE)
            arcname = info.filename.encode("utf-8")
            # Pad the local header's extra field so the data starts on an ALIGNMENT boundary
            # (torch's own writer does the same; zipfile writes `extra` unchanged).
            start = fh.tell() + 30 + len(arcname) + 4
            pad = -start % ALIGNMENT
            info.extra = b"FB" + struct.pack("<H", pad) + b"Z" * pad
            z.writestr(info, data)


def write_torch_zip(path: str | Path, records: dict[str, bytes], root: str = "archive") -> Path:
    """A zip of `records` ('data.pkl', 'data/0', 'version', ...) under `root/`, atomically."""
    return _atomic(Path(path), lambda fh: _write_records(fh, root, records))


def torch_zip_bytes(records: dict[str, bytes], root: str = "archive") -> bytes:
    """The bytes write_torch_zip would write (for callers that make many small files)."""
    buf = io.BytesIO()
    _write_records(buf, root, records)
    return buf.getvalue()


def _collect(obj, storages: dict[str, memoryview], where: str, depth: int):
    """obj with every array replaced by a TensorRef to a new storage record."""
    if depth > MAX_DEPTH:
        raise CheckpointWriteError(f"{where}: nested deeper than {MAX_DEPTH}")
    if isinstance(obj, np.ndarray):
        name = STORAGE_NAMES.get(obj.dtype.newbyteorder("="))
        if name is None:
            raise CheckpointWriteError(f"{where}: dtype {obj.dtype} has no torch storage type "
                                       f"(supported: {', '.join(str(d) for d in STORAGE_NAMES)})")
        arr = np.asarray(obj, dtype=obj.dtype.newbyteorder("<"), order="C")  # keeps 0-d as 0-d
        key = str(len(storages))
        storages[key] = memoryview(arr.reshape(-1).view(np.uint8))   # the array's own bytes, not a copy
        stride = tuple(math.prod(arr.shape[i + 1:]) for i in range(arr.ndim))
        return TensorRef(key, name, arr.size, 0, tuple(arr.shape), stride)
    if isinstance(obj, dict):
        bad = [k for k in obj if type(k) is not str]
        if bad:
            raise CheckpointWriteError(f"{where}: key {bad[0]!r} is a {type(bad[0]).__name__}; keys must be strings")
        return {k: _collect(v, storages, f"{where}.{k}" if where else k, depth + 1) for k, v in obj.items()}
    raise CheckpointWriteError(f"{where or 'top level'}: {type(obj).__name__} is neither a numpy array "
                               "nor a dict of them")


def _arrays(obj, depth: int = 0):
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, dict) and depth <= MAX_DEPTH:      # deeper: _collect names the error
        for v in obj.values():
            yield from _arrays(v, depth + 1)


def _check_caps(arrays, path: Path) -> None:
    """Refuse to write what load_checkpoint would refuse to read (CHECKPOINT_LIMITS)."""
    caps = CHECKPOINT_LIMITS
    arrays = list(arrays)
    if len(arrays) > min(caps.max_storage_refs, caps.max_members - 8):
        raise CheckpointWriteError(f"{path}: {len(arrays)} tensors, more than a checkpoint may hold")
    big = next((a for a in arrays if a.nbytes > caps.max_tensor_bytes), None)
    if big is not None:
        raise CheckpointWriteError(f"{path}: a {big.nbytes}-byte tensor, more than the "
                                   f"{caps.max_tensor_bytes}-byte cap per tensor")
    total = sum(a.nbytes for a in arrays)
    if total > min(caps.max_total_bytes, caps.max_unpacked_bytes):
        raise CheckpointWriteError(f"{path}: {total} bytes of tensors, more than the "
                                   f"{caps.max_total_bytes}-byte cap")


def save_torch_zip(obj, path: str | Path) -> Path:
    """Write `obj` (a numpy array, or dicts of str -> dicts ... -> numpy arrays) as a torch zip
    checkpoint, atomically. Each array gets its own storage record, contiguous, little-endian."""
    path = Path(path)
    storages: dict[str, memoryview] = {}
    _check_caps(_arrays(obj), path)            # before any array is made contiguous (a copy)
    refs = _collect(obj, storages, "", 0)
    records = {"data.pkl": pickle_bytes(refs), ".format_version": b"1", ".storage_alignment": b"64",
               "byteorder": b"little"}
    records.update({f"data/{k}": v for k, v in storages.items()})
    records["version"] = b"3\n"
    return write_torch_zip(path, records, root=path.stem or "archive")


def save_npz_checkpoint(tensors: dict[str, np.ndarray], path: str | Path) -> Path:
    """Write {'section.param': array} as an uncompressed .npz that load_checkpoint reads,
    atomically. Every section of SECTIONS must be present; keys may not contain '/'."""
    path = Path(path)
    if path.suffix != ".npz":
        raise CheckpointWriteError(f"{path}: an npz checkpoint's name must end in .npz (load_checkpoint "
                                   "picks the reader by suffix)")
    for key, arr in tensors.items():
        section = key.partition(".")[0] if isinstance(key, str) else None
        if section not in SECTIONS or "." not in key or "/" in key:
            raise CheckpointWriteError(f"{path}: key {key!r} is not 'section.param' with a section in "
                                       f"{', '.join(SECTIONS)} (and no '/')")
        if not isinstance(arr, np.ndarray) or arr.dtype.kind not in "fiub":
            raise CheckpointWriteError(f"{path}: {key} is {type(arr).__name__} "
                                       f"{getattr(arr, 'dtype', '')}, not a numeric numpy array")
    missing = [s for s in SECTIONS if not any(k.startswith(f"{s}.") for k in tensors)]
    if missing:
        raise CheckpointWriteError(f"{path}: no tensors for section(s) {', '.join(missing)}")
    _check_caps(tensors.values(), path)
    return _atomic(path, lambda fh: np.savez(fh, **tensors))
