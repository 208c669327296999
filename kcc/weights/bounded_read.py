"""Read untrusted zip archives and .npy arrays under stated resource caps.

Every number in a file that sizes an allocation or a read is checked, before that allocation
or read, against a `Limits` (CHECKPOINT_LIMITS, VOICE_LIMITS, VOICE_BANK_LIMITS):

  file size, zip members and central-directory bytes (from the end record, before zipfile
  parses the directory), declared unpacked bytes (whatever the compression), the inflate ratio
  of compressed members over BOMB_FLOOR, the pickle record's bytes and opcodes and the storage
  references of a torch zip (kcc.weights.checkpoint), each array's output bytes and all arrays' output
  bytes together (a zero-stride tensor counts in full: its contiguous copy would).

Duplicate member names are refused (which copy is meant is ambiguous), members are read no
further than their declared size, and a .npy header's shape is checked against the caps and
against the bytes that follow it before its data is read. Every refusal is a CheckpointError
naming the file and the reason (CheckpointLimitError when a cap is what was hit), MemoryError
and RecursionError included.
"""
from __future__ import annotations

import math
import reprlib
import zipfile
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MIB = 1 << 20
MAX_NDIM = 16
MAX_TENSOR_ELEMENTS = 2**31 - 1          # generated C indexes a tensor with an int
BOMB_FLOOR = MIB                         # the inflate ratio is checked on members larger than this


@dataclass(frozen=True)
class Limits:
    """Resource caps for one kind of file; each is checked before what it guards is allocated."""
    max_file_bytes: int
    max_members: int
    max_unpacked_bytes: int              # sum of the members' declared (inflated) sizes
    max_ratio: int                       # inflated / compressed size of one member over BOMB_FLOOR
    max_pickle_bytes: int
    max_pickle_ops: int
    max_storage_refs: int
    max_tensor_bytes: int                # one tensor's output array
    max_total_bytes: int                 # all tensors' output arrays together


# The kokoro-v1_0.pth layout: 327 MB, 694 members, one 86 KB pickle of 21,825 opcodes, 688
# storage references, 327 MB of tensors, the largest 13.4 MB. The caps leave 3x (file and
# tensor bytes) to 50x (pickle) of headroom; a float64 copy of the model still fits.
CHECKPOINT_LIMITS = Limits(max_file_bytes=1024 * MIB, max_members=8192, max_unpacked_bytes=1024 * MIB,
                           max_ratio=100, max_pickle_bytes=4 * MIB, max_pickle_ops=500_000,
                           max_storage_refs=8192, max_tensor_bytes=512 * MIB, max_total_bytes=1024 * MIB)
# A voice pack is one 510 x 1 x 256 tensor: 522 KB as float32 (1 MB as float64).
VOICE_LIMITS = Limits(max_file_bytes=8 * MIB, max_members=16, max_unpacked_bytes=8 * MIB, max_ratio=100,
                      max_pickle_bytes=64 * 1024, max_pickle_ops=10_000, max_storage_refs=16,
                      max_tensor_bytes=8 * MIB, max_total_bytes=8 * MIB)
# A voices .npz holds many packs (the 54 English voices: 28 MB).
VOICE_BANK_LIMITS = Limits(max_file_bytes=256 * MIB, max_members=1024, max_unpacked_bytes=256 * MIB,
                           max_ratio=100, max_pickle_bytes=0, max_pickle_ops=0, max_storage_refs=0,
                           max_tensor_bytes=8 * MIB, max_total_bytes=256 * MIB)
LIMITS = {"checkpoint": CHECKPOINT_LIMITS, "voice": VOICE_LIMITS, "voices": VOICE_BANK_LIMITS}


class CheckpointError(Exception):
    """A checkpoint file or a reference into it is unusable; the message says which and why."""


class CheckpointLimitError(CheckpointError):
    """The file asks for more than a stated resource cap (kcc.weights.checkpoint.Limits) allows."""


def short(value, limit: int = 80) -> str:
    """A hostile value, printable in a message: strings bare (escaped, cut), anything else by
    reprlib, which bounds depth as well as length (an object may be nested a million deep)."""
    if isinstance(value, str):
        text = value.encode("unicode_escape").decode("ascii")
        return text if len(text) <= limit else text[:limit] + "..."
    r = reprlib.Repr()
    r.maxlevel, r.maxstring, r.maxother = 3, limit, limit
    return r.repr(value)


class Budget:
    """Running totals of one load against its Limits."""

    def __init__(self, limits: Limits, where: str):
        self.limits, self.where = limits, where
        self.refs = 0
        self.out_bytes = 0

    def reference(self) -> None:
        self.refs += 1
        if self.refs > self.limits.max_storage_refs:
            raise CheckpointLimitError(
                f"{self.where}: more than {self.limits.max_storage_refs} storage references")

    def output(self, shape: tuple[int, ...], dtype) -> None:
        count = math.prod(shape)
        if count > MAX_TENSOR_ELEMENTS:
            raise CheckpointLimitError(
                f"{self.where}: tensor of shape {shape} has {count} elements, more than {MAX_TENSOR_ELEMENTS}")
        nbytes = count * np.dtype(dtype).itemsize
        if nbytes > self.limits.max_tensor_bytes:
            raise CheckpointLimitError(f"{self.where}: tensor of shape {shape} needs {nbytes} bytes, "
                                       f"more than the {self.limits.max_tensor_bytes}-byte cap per tensor")
        self.out_bytes += nbytes
        if self.out_bytes > self.limits.max_total_bytes:
            raise CheckpointLimitError(f"{self.where}: tensors need more than the "
                                       f"{self.limits.max_total_bytes}-byte cap in all")


def read_member(archive: zipfile.ZipFile, name: str, where: str, limit: int | None = None) -> bytes:
    """A member's bytes, never more than its declared size (already checked against the caps)."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise CheckpointError(f"{where}: record {short(name)} is missing (truncated file?)") from None
    if limit is not None and info.file_size > limit:
        raise CheckpointLimitError(f"{where}: record {name} declares {info.file_size} bytes, "
                                   f"more than the {limit}-byte cap")
    try:
        with archive.open(info) as fh:
            data = fh.read(info.file_size)
    except Exception as exc:  # hostile bytes reach zlib, CRC checks, encryption flags: all name the record
        raise CheckpointError(f"{where}: record {name} is corrupt: {type(exc).__name__}: {exc}") from None
    if len(data) != info.file_size:
        raise CheckpointError(f"{where}: record {name} holds {len(data)} of its {info.file_size} bytes (truncated)")
    return data


@contextmanager
def open_zip(path: Path, what: str, limits: Limits):
    """The archive, once its size, directory, member names and declared sizes pass the caps."""
    if not path.exists():
        raise CheckpointError(f"{path}: {what} file does not exist")
    if not path.is_file():
        raise CheckpointError(f"{path}: {what} path is not a regular file")
    size = path.stat().st_size
    if size > limits.max_file_bytes:
        raise CheckpointLimitError(f"{path}: {what} file is {size} bytes, more than the "
                                   f"{limits.max_file_bytes}-byte cap")
    with open(path, "rb") as fh:
        try:
            # zipfile parses the whole central directory up front, one object per entry: bound
            # the entry count and the directory's size from the end record before it does.
            end = zipfile._EndRecData(fh)
            if end is None:
                raise zipfile.BadZipFile("no end-of-central-directory record")
            entries, directory = end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]
            if entries > limits.max_members or directory > limits.max_members * 1024:
                raise CheckpointLimitError(f"{path}: {what} zip declares {entries} members in a {directory}-byte "
                                           f"directory, more than the cap of {limits.max_members}")
            archive = zipfile.ZipFile(fh)
        except CheckpointError:
            raise
        except Exception as exc:
            raise CheckpointError(f"{path}: not a torch zip {what} (truncated or corrupt): "
                                  f"{type(exc).__name__}: {exc}") from None
        with archive:
            _check_members(archive.infolist(), path, what, limits)
            yield archive


def _check_members(infos: list[zipfile.ZipInfo], path: Path, what: str, limits: Limits) -> None:
    if len(infos) > limits.max_members:
        raise CheckpointLimitError(f"{path}: {what} zip has {len(infos)} members, more than {limits.max_members}")
    dupes = [n for n, c in Counter(i.filename for i in infos).items() if c > 1]
    if dupes:
        raise CheckpointError(f"{path}: {what} zip has duplicate member(s) {short(dupes[:3])}: "
                              "which copy is meant is ambiguous")
    total = sum(i.file_size for i in infos)
    if total > limits.max_unpacked_bytes:
        raise CheckpointLimitError(f"{path}: {what} zip unpacks to {total} bytes, more than the "
                                   f"{limits.max_unpacked_bytes}-byte cap")
    for i in infos:
        if i.compress_type != zipfile.ZIP_STORED and i.file_size > BOMB_FLOOR \
                and i.file_size > limits.max_ratio * max(i.compress_size, 1):
            raise CheckpointLimitError(f"{path}: member {short(i.filename)} inflates {i.compress_size} bytes to "
                                       f"{i.file_size} (more than {limits.max_ratio}x): a zip bomb")


def guarded(where: str, load):
    """load(), with whatever a hostile file provokes in it turned into a CheckpointError."""
    try:
        return load()
    except CheckpointError:
        raise
    except MemoryError:
        raise CheckpointLimitError(f"{where}: out of memory while loading") from None
    except RecursionError:
        raise CheckpointLimitError(f"{where}: nested too deeply to load") from None
    except Exception as exc:  # anything the hostile record provokes is a corrupt file, named
        raise CheckpointError(f"{where}: corrupt record: {type(exc).__name__}: {short(str(exc), 200)}") from None


def _npy_array(fh, size: int, where: str, budget: Budget) -> np.ndarray:
    """One .npy stream of `size` bytes: its header is parsed and the shape checked against the
    caps and against `size` before any data is read (numpy's own reader allocates from the
    header first)."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    if version not in ((1, 0), (2, 0), (3, 0)):
        raise CheckpointError(f"{where}: unsupported .npy version {version}")
    reader = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
    shape, fortran, dtype = reader(fh, max_header_size=10_000)
    if dtype.hasobject or dtype.kind not in "fiub" or dtype.fields is not None or dtype.subdtype is not None:
        raise CheckpointError(f"{where}: dtype {dtype} is not a plain number type")
    if len(shape) > MAX_NDIM:
        raise CheckpointLimitError(f"{where}: {len(shape)} dims, more than {MAX_NDIM}")
    if any(n < 0 for n in shape):
        raise CheckpointError(f"{where}: header declares a negative dim in shape {shape}")
    budget.output(tuple(shape), dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    header = fh.tell()
    if header + nbytes != size:
        raise CheckpointError(f"{where}: header declares shape {shape} ({nbytes} bytes) but "
                              f"{size - header} bytes follow it")
    data = fh.read(nbytes)
    if len(data) != nbytes:
        raise CheckpointError(f"{where}: holds {len(data)} of its {nbytes} bytes (truncated)")
    arr = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
    if not arr.dtype.isnative:
        arr = arr.astype(arr.dtype.newbyteorder("="))
    arr.setflags(write=False)
    return arr


def read_npz(path: str | Path, what: str = "checkpoint", limits: Limits | None = None,
             members: list[str] | None = None) -> dict[str, np.ndarray]:
    """The arrays of a .npz (no pickles), under the same caps as a torch zip; `members`
    (names without '.npy') reads only those, refusing an absent one."""
    path = Path(path)
    limits = limits or LIMITS.get(what, CHECKPOINT_LIMITS)
    budget = Budget(limits, str(path))
    out: dict[str, np.ndarray] = {}
    with open_zip(path, what, limits) as archive:
        infos = {i.filename[:-4]: i for i in archive.infolist() if i.filename.endswith(".npy")}
        odd = [i.filename for i in archive.infolist() if not i.filename.endswith(".npy")]
        if odd:
            raise CheckpointError(f"{path}: {what} .npz member {short(odd[0])} is not a .npy array")
        wanted = list(infos) if members is None else members
        for name in wanted:
            if name not in infos:
                raise CheckpointError(f"{path}: {what} .npz has no member {short(name)} "
                                      f"(has {short(sorted(infos)[:8])})")
            where = f"{path}: {what} member {name}"
            info = infos[name]

            def one():
                with archive.open(info) as fh:
                    return _npy_array(fh, info.file_size, where, budget)
            out[name] = guarded(where, one)
    return out


def npz_members(path: str | Path, what: str = "voices", limits: Limits | None = None) -> list[str]:
    """The array names of a .npz (its central directory read under the caps, no data read)."""
    path = Path(path)
    with open_zip(path, what, limits or LIMITS.get(what, CHECKPOINT_LIMITS)) as archive:
        return sorted(i.filename[:-4] for i in archive.infolist() if i.filename.endswith(".npy"))


def read_npy(path: str | Path, what: str = "voice", limits: Limits | None = None) -> np.ndarray:
    """One .npy file under the caps (the header is checked before any data is read)."""
    path = Path(path)
    limits = limits or LIMITS.get(what, CHECKPOINT_LIMITS)
    if not path.is_file():
        raise CheckpointError(f"{path}: {what} file does not exist or is not a regular file")
    size = path.stat().st_size
    if size > limits.max_file_bytes:
        raise CheckpointLimitError(f"{path}: {what} file is {size} bytes, more than the {limits.max_file_bytes}-byte cap")

    where = f"{path}: {what}"

    def one():
        with open(path, "rb") as fh:
            return _npy_array(fh, size, where, Budget(limits, where))
    return guarded(where, one)


