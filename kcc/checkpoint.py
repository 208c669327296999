"""Read a kokoro-v1_0.pth-layout checkpoint without torch and without running pickled code.

The file is a torch zip archive: `<root>/data.pkl` describes a dict of five state dicts
(bert, bert_encoder, predictor, text_encoder, decoder) whose tensors live in `<root>/data/<key>`.
The unpickler below admits only the handful of globals a state dict needs, so a pickle that
tries to import anything else (os.system, eval, ...) is refused with a named error. A `.npz`
with keys 'section.param' (kcc.torch_zip.save_npz_checkpoint) loads the same way.

The file is hostile until proven otherwise. Every number in it that sizes an allocation or a
read is checked, before that allocation or read, against `Limits` (CHECKPOINT_LIMITS, or
VOICE_LIMITS for a voice pack):

  file size, zip members, declared unpacked bytes (whatever the compression), the inflate ratio
  of compressed members over 1 MiB, the pickle record's bytes and opcodes, storage references,
  each tensor's output bytes and all tensors' output bytes together (a zero-stride tensor counts
  in full: its contiguous copy would), and container nesting depth (MAX_DEPTH).

A tensor record is used only if its offset and strides are non-negative ints, its sizes are
non-negative ints, it has at most MAX_NDIM dims and MAX_TENSOR_ELEMENTS elements, and its
largest reachable element (offset + sum((size_i - 1) * stride_i)) lies inside its storage,
whose record must hold exactly the elements its persistent id declares. Duplicate zip members,
non-string keys, cycles and anything but dicts and tensors where a state dict is expected are
refused. Every refusal is a CheckpointError naming the file and the reason
(CheckpointLimitError when a cap is what was hit); MemoryError and RecursionError included.
"""
from __future__ import annotations

import hashlib
import io
import math
import pickle
import pickletools
import re
import zipfile
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from kcc.digest import file_sha256

SECTIONS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")

STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}

MIB = 1 << 20
MAX_NDIM = 16
MAX_TENSOR_ELEMENTS = 2**31 - 1          # generated C indexes a tensor with an int
MAX_DEPTH = 32                           # a state dict nests 4 deep (its _metadata included)
BOMB_FLOOR = MIB                         # the inflate ratio is checked on members larger than this
_STORAGE_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


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
    """The file asks for more than a stated resource cap (kcc.checkpoint.Limits) allows."""


def _short(value, limit: int = 80) -> str:
    """A hostile value, printable in a message: strings bare (escaped, cut), anything else by
    reprlib, which bounds depth as well as length (an object may be nested a million deep)."""
    import reprlib
    if isinstance(value, str):
        text = value.encode("unicode_escape").decode("ascii")
        return text if len(text) <= limit else text[:limit] + "..."
    r = reprlib.Repr()
    r.maxlevel, r.maxstring, r.maxother = 3, limit, limit
    return r.repr(value)


class _StorageType(NamedTuple):
    # A named tuple: the BUILD opcode finds no __dict__, no __setstate__ and no settable field
    # on it (a frozen dataclass has a __setstate__, which BUILD would call).
    name: str
    dtype: type


class _Storage(NamedTuple):
    """A storage record's bytes. Only persistent_load makes these, so a pickle cannot forge one,
    and as a named tuple it cannot rewrite one with BUILD either."""
    key: str
    data: bytes
    dtype: type

    @property
    def numel(self) -> int:
        return len(self.data) // np.dtype(self.dtype).itemsize


def _exact_int(value, what: str, where: str) -> int:
    if type(value) is not int:       # bool is an int subclass: refused, as are floats and the rest
        raise CheckpointError(f"{where}: {what} is {type(value).__name__} {_short(value)}, expected an int")
    return value


def _int_tuple(value, what: str, where: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)):
        raise CheckpointError(f"{where}: {what} is {type(value).__name__}, expected a tuple of ints")
    if len(value) > MAX_NDIM:
        raise CheckpointLimitError(f"{where}: {what} has {len(value)} dims, more than {MAX_NDIM}")
    return tuple(_exact_int(v, f"{what} entry", where) for v in value)


class _Budget:
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


def _rebuild_tensor(budget: _Budget, storage, offset, size, stride, *_rest) -> np.ndarray:
    where = budget.where
    if not isinstance(storage, _Storage):
        raise CheckpointError(f"{where}: tensor storage is {type(storage).__name__}, not a storage record")
    where = f"{where}: tensor on storage {storage.key}"
    offset = _exact_int(offset, "storage offset", where)
    size = _int_tuple(size, "size", where)
    stride = _int_tuple(stride, "stride", where)
    if len(size) != len(stride):
        raise CheckpointError(f"{where}: size {size} and stride {stride} differ in length")
    if offset < 0 or any(n < 0 for n in size) or any(s < 0 for s in stride):
        raise CheckpointError(f"{where}: negative offset, size or stride (offset {offset}, size {size}, "
                              f"stride {stride})")
    if any(n > MAX_TENSOR_ELEMENTS for n in size):
        raise CheckpointLimitError(f"{where}: size {size} has a dim over {MAX_TENSOR_ELEMENTS}")
    budget.output(size, storage.dtype)
    if 0 in size:
        return np.zeros(size, dtype=storage.dtype)
    last = offset + sum((n - 1) * s for n, s in zip(size, stride))
    if last >= storage.numel:
        raise CheckpointError(f"{where}: shape {size}, stride {stride} at offset {offset} reaches element "
                              f"{last}, past the storage's {storage.numel}")
    flat = np.frombuffer(storage.data, dtype=storage.dtype)
    itemsize = flat.itemsize
    contiguous = all(s == math.prod(size[i + 1:]) for i, s in enumerate(stride) if size[i] > 1)
    if contiguous:
        # A read-only view of the record: no copy however often the storage is referenced.
        return flat[offset:offset + math.prod(size)].reshape(size)
    # A size-1 dim's stride is never stepped: zero it so no stray huge number reaches numpy.
    strides = tuple(s * itemsize if n > 1 else 0 for n, s in zip(size, stride))
    view = np.lib.stride_tricks.as_strided(flat[offset:], shape=size, strides=strides, writeable=False)
    out = np.ascontiguousarray(view)
    out.setflags(write=False)
    return out


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file, archive: zipfile.ZipFile, root: str, budget: _Budget):
        super().__init__(file)
        self._archive = archive
        self._prefix = f"{root}/" if root else ""
        self._budget = budget
        self._where = budget.where
        self._storages: dict[str, bytes] = {}
        # Everything a pickle can name is made for this load alone: the BUILD opcode can set
        # attributes on what GLOBAL returns, and a shared class or function would carry that
        # into every later load in the process. Bound methods take no attributes at all.
        ordered = type("OrderedDict", (dict,), {"__doc__": "collections.OrderedDict: dicts keep order"})
        self._allowed = {
            ("collections", "OrderedDict"): ordered,
            ("torch._utils", "_rebuild_tensor_v2"): self._rebuild_tensor,
            ("torch._utils", "_rebuild_tensor"): self._rebuild_tensor,
            ("torch._utils", "_rebuild_parameter"): self._rebuild_parameter,
        }

    def _rebuild_tensor(self, *args):
        return _rebuild_tensor(self._budget, *args)

    def _rebuild_parameter(self, tensor, *_rest):
        return tensor

    def find_class(self, module, name):
        if (module, name) in self._allowed:
            return self._allowed[(module, name)]
        if module == "torch" and name in STORAGE_DTYPES:
            return _StorageType(name, STORAGE_DTYPES[name])
        if module == "torch" and name.endswith("Storage"):
            raise CheckpointError(f"{self._where}: unsupported storage type torch.{_short(name)}")
        raise CheckpointError(
            f"{self._where}: refusing pickle global {_short(module)}.{_short(name)}: a checkpoint holds only tensors")

    def persistent_load(self, pid):
        where = self._where
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage"):
            raise CheckpointError(f"{where}: unexpected persistent id {_short(pid)}")
        _, storage_type, key, _location, numel = pid
        if not isinstance(storage_type, _StorageType):
            raise CheckpointError(f"{where}: storage {_short(key)} has unsupported type {_short(storage_type)}")
        if type(key) is not str or not _STORAGE_KEY.fullmatch(key):
            raise CheckpointError(f"{where}: storage key {_short(key)} is not a short name")
        numel = _exact_int(numel, f"storage {key} element count", where)
        self._budget.reference()
        if key not in self._storages:
            self._storages[key] = _read_member(self._archive, f"{self._prefix}data/{key}", where)
        data = self._storages[key]
        itemsize = np.dtype(storage_type.dtype).itemsize
        if numel < 0 or len(data) != numel * itemsize:
            raise CheckpointError(f"{where}: storage {key} declares {numel} {storage_type.name} elements "
                                  f"but its record holds {len(data)} bytes")
        return _Storage(key, data, storage_type.dtype)


def _read_member(archive: zipfile.ZipFile, name: str, where: str, limit: int | None = None) -> bytes:
    """A member's bytes, never more than its declared size (already checked against the caps)."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise CheckpointError(f"{where}: record {_short(name)} is missing (truncated file?)") from None
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
def _open_zip(path: Path, what: str, limits: Limits):
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
        raise CheckpointError(f"{path}: {what} zip has duplicate member(s) {_short(dupes[:3])}: "
                              "which copy is meant is ambiguous")
    total = sum(i.file_size for i in infos)
    if total > limits.max_unpacked_bytes:
        raise CheckpointLimitError(f"{path}: {what} zip unpacks to {total} bytes, more than the "
                                   f"{limits.max_unpacked_bytes}-byte cap")
    for i in infos:
        if i.compress_type != zipfile.ZIP_STORED and i.file_size > BOMB_FLOOR \
                and i.file_size > limits.max_ratio * max(i.compress_size, 1):
            raise CheckpointLimitError(f"{path}: member {_short(i.filename)} inflates {i.compress_size} bytes to "
                                       f"{i.file_size} (more than {limits.max_ratio}x): a zip bomb")


def _prescan(record: bytes, where: str, limits: Limits) -> None:
    """Walk the opcodes without building anything: counts them, and a declared string or bytes
    length longer than what is left of the record fails here (pickletools reads it from a
    BytesIO, which returns what is there) instead of the C unpickler allocating it first."""
    n = 0
    try:
        for op, arg, pos in pickletools.genops(io.BytesIO(record)):
            n += 1
            if n > limits.max_pickle_ops:
                raise CheckpointLimitError(f"{where}: pickle has more than {limits.max_pickle_ops} opcodes")
            if op.name == "FRAME" and arg > len(record) - pos - 9:
                raise CheckpointError(f"{where}: malformed pickle record: a {arg}-byte frame at byte {pos} "
                                      "runs past the record's end")
    except CheckpointError:
        raise
    except Exception as exc:
        raise CheckpointError(f"{where}: malformed pickle record: {type(exc).__name__}: {exc}") from None


def _children(item) -> list:
    kids = list(item.values()) if isinstance(item, dict) else list(item)
    if isinstance(item, dict) and getattr(item, "__dict__", None):   # an OrderedDict's _metadata
        kids.extend(vars(item).values())
    return [k for k in kids if isinstance(k, (dict, list, tuple))]


def _check_depth(obj, where: str) -> None:
    """Refuse containers nested deeper than MAX_DEPTH, and cycles. Iterative depth-first walk;
    each container's height is remembered, so shared sub-structures are walked once (a pickle
    can share a list into both halves of its parent, 30 times over)."""
    height: dict[int, int] = {}
    open_ids: set[int] = set()           # containers on the current path
    stack = [(obj, 0, False)] if isinstance(obj, (dict, list, tuple)) else []
    while stack:
        item, depth, done = stack.pop()
        key = id(item)
        if done:
            open_ids.discard(key)
            height[key] = 1 + max((height[id(k)] for k in _children(item)), default=0)
        elif key in height:
            if depth + height[key] > MAX_DEPTH:
                raise CheckpointLimitError(f"{where}: containers nest deeper than {MAX_DEPTH}")
        elif key in open_ids:
            raise CheckpointError(f"{where}: a container contains itself")
        elif depth >= MAX_DEPTH:
            raise CheckpointLimitError(f"{where}: containers nest deeper than {MAX_DEPTH}")
        else:
            open_ids.add(key)
            stack.append((item, depth, True))
            stack.extend((k, depth + 1, False) for k in _children(item))


def _guarded(where: str, load):
    try:
        return load()
    except CheckpointError:
        raise
    except MemoryError:
        raise CheckpointLimitError(f"{where}: out of memory while loading") from None
    except RecursionError:
        raise CheckpointLimitError(f"{where}: nested too deeply to load") from None
    except Exception as exc:  # anything the hostile record provokes is a corrupt file, named
        raise CheckpointError(f"{where}: corrupt record: {type(exc).__name__}: {_short(str(exc), 200)}") from None


def load_torch_zip(path: str | Path, what: str = "checkpoint", limits: Limits | None = None):
    """Unpickle a torch zip file with the restricted unpickler: tensors come back as read-only numpy.

    `what` ('checkpoint' or 'voice') names the file in errors and picks the caps (LIMITS)."""
    path = Path(path)
    limits = limits or LIMITS.get(what, CHECKPOINT_LIMITS)
    with _open_zip(path, what, limits) as archive:
        pkl = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pkl) != 1:
            raise CheckpointError(f"{path}: expected one data.pkl record, found {len(pkl)}")
        root = pkl[0].rsplit("/", 1)[0] if "/" in pkl[0] else ""
        where = f"{path}: {what} record {pkl[0]}"
        byteorder = f"{root}/byteorder" if root else "byteorder"
        if byteorder in archive.namelist():
            order = _read_member(archive, byteorder, where, limit=16)
            if order != b"little":
                raise CheckpointError(f"{path}: {what} stores tensors in byte order {_short(order)}; "
                                      "only little-endian files are read")
        record = _read_member(archive, pkl[0], where, limit=limits.max_pickle_bytes)
        _prescan(record, where, limits)
        budget = _Budget(limits, where)
        obj = _guarded(where, lambda: _RestrictedUnpickler(io.BytesIO(record), archive, root, budget).load())
        _guarded(where, lambda: _check_depth(obj, where))
        return obj


def _npy_array(fh, size: int, where: str, budget: _Budget) -> np.ndarray:
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
    budget = _Budget(limits, str(path))
    out: dict[str, np.ndarray] = {}
    with _open_zip(path, what, limits) as archive:
        infos = {i.filename[:-4]: i for i in archive.infolist() if i.filename.endswith(".npy")}
        odd = [i.filename for i in archive.infolist() if not i.filename.endswith(".npy")]
        if odd:
            raise CheckpointError(f"{path}: {what} .npz member {_short(odd[0])} is not a .npy array")
        wanted = list(infos) if members is None else members
        for name in wanted:
            if name not in infos:
                raise CheckpointError(f"{path}: {what} .npz has no member {_short(name)} "
                                      f"(has {_short(sorted(infos)[:8])})")
            where = f"{path}: {what} member {name}"
            info = infos[name]

            def one():
                with archive.open(info) as fh:
                    return _npy_array(fh, info.file_size, where, budget)
            out[name] = _guarded(where, one)
    return out


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
            return _npy_array(fh, size, where, _Budget(limits, where))
    return _guarded(where, one)


def tensor_sha256(array: np.ndarray) -> str:
    """SHA-256 over dtype, shape and the contiguous bytes: equal digests mean equal tensors."""
    arr = np.ascontiguousarray(array)
    h = hashlib.sha256()
    h.update(f"{arr.dtype.str}{arr.shape}".encode())
    h.update(arr.tobytes())
    return h.hexdigest()


@dataclass
class Checkpoint:
    """Named, read-only FP32 views of every tensor, keyed 'section.param.path'."""
    path: Path
    tensors: dict[str, np.ndarray] = field(repr=False)

    def __contains__(self, ref: str) -> bool:
        return ref in self.tensors

    def names(self) -> list[str]:
        return list(self.tensors)

    def get(self, ref: str, shape: tuple[int, ...] | None = None) -> np.ndarray:
        if ref not in self.tensors:
            near = [n for n in self.tensors if n.split(".")[-1] == ref.split(".")[-1]][:3]
            hint = f"; similar names: {', '.join(near)}" if near else ""
            raise CheckpointError(f"{self.path}: no tensor named '{ref}'{hint}")
        arr = self.tensors[ref]
        if shape is not None and tuple(arr.shape) != tuple(shape):
            raise CheckpointError(
                f"{self.path}: tensor '{ref}' has shape {tuple(arr.shape)}, expected {tuple(shape)}")
        return arr

    def sha256(self, ref: str) -> str:
        return tensor_sha256(self.get(ref))

    def weight_norm(self, ref: str) -> np.ndarray:
        """Fold weight norm: W = g * v / ||v|| over every axis but 0 (torch's dim=0 default).

        `ref` names the module ('decoder.generator.conv_post'); a plain '.weight' is returned
        as is, so callers need not know which layers were weight-normed. A zero channel
        (||v|| = 0) folds to zero rather than 0/0 = NaN.
        """
        if f"{ref}.weight_v" in self.tensors:
            v = self.get(f"{ref}.weight_v").astype(np.float64)
            g = self.get(f"{ref}.weight_g").astype(np.float64)
            axes = tuple(range(1, v.ndim))
            norm = np.sqrt(np.sum(v * v, axis=axes, keepdims=True))
            scale = np.divide(g.reshape(norm.shape), norm, out=np.zeros_like(norm), where=norm > 0)
            return (v * scale).astype(np.float32)
        return self.get(f"{ref}.weight")


def _strip_module_prefix(name: str) -> str:
    # Checkpoints saved from nn.DataParallel prefix every key with 'module.'.
    return name[7:] if name.startswith("module.") else name


def _add_tensor(tensors: dict[str, np.ndarray], path: Path, section: str, name, value) -> None:
    if type(name) is not str:
        raise CheckpointError(f"{path}: section '{section}' has a {type(name).__name__} key "
                              f"{_short(name)}; state dict keys are strings")
    if not isinstance(value, np.ndarray):
        raise CheckpointError(f"{path}: {section}.{_short(name)} is {type(value).__name__}, not a tensor")
    if value.dtype.kind not in "fiub":
        raise CheckpointError(f"{path}: {section}.{_short(name)} has dtype {value.dtype}, not a number type")
    key = f"{section}.{_strip_module_prefix(name)}"
    if key in tensors:
        raise CheckpointError(f"{path}: two tensors are named '{_short(key)}' (one with a 'module.' prefix)")
    arr = value.astype(np.float32, copy=False) if value.dtype.kind == "f" else value
    if arr.flags.writeable:
        arr.setflags(write=False)
    tensors[key] = arr


def _sections_from_npz(path: Path, limits: Limits | None) -> dict[str, dict[str, np.ndarray]]:
    sections: dict[str, dict[str, np.ndarray]] = {}
    for key, arr in read_npz(path, "checkpoint", limits).items():
        section, dot, name = key.partition(".")
        if not dot or section not in SECTIONS:
            raise CheckpointError(f"{path}: npz key {_short(key)} is not 'section.param' with a section "
                                  f"in {', '.join(SECTIONS)}")
        sections.setdefault(section, {})[name] = arr
    return sections


def load_checkpoint(path: str | Path, sha256: str | None = None, limits: Limits | None = None) -> Checkpoint:
    """A torch zip (.pth) or a .npz checkpoint. sha256: the file's expected SHA-256 (hex); a
    mismatch is refused before anything is parsed. limits: CHECKPOINT_LIMITS unless given."""
    path = Path(path)
    if sha256 is not None and path.is_file():
        digest = file_sha256(path)
        if digest != sha256.lower():
            raise CheckpointError(f"{path}: SHA-256 {digest} differs from the expected {sha256}: "
                                  "wrong or modified file")
    obj = _sections_from_npz(path, limits) if path.suffix == ".npz" else load_torch_zip(path, limits=limits)
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: top level is {type(obj).__name__}, expected a dict of state dicts")
    odd = [k for k in obj if type(k) is not str]
    if odd:
        raise CheckpointError(f"{path}: top level has a {type(odd[0]).__name__} key {_short(odd[0])}; "
                              "section names are strings")
    missing = [s for s in SECTIONS if s not in obj]
    if missing:
        raise CheckpointError(
            f"{path}: missing section(s) {', '.join(missing)}; a kokoro checkpoint has {', '.join(SECTIONS)}")
    tensors: dict[str, np.ndarray] = {}
    for section in SECTIONS:
        state = obj[section]
        if not isinstance(state, dict):
            raise CheckpointError(f"{path}: section '{section}' is {type(state).__name__}, expected a state dict")
        for name, value in state.items():
            _add_tensor(tensors, path, section, name, value)
    return Checkpoint(path=path, tensors=tensors)


def checkpoint_digest(ckpt: Checkpoint, prefix: str = "") -> str:
    """One SHA-256 over every tensor's name and digest (optionally only names under `prefix`)."""
    h = hashlib.sha256()
    for name in sorted(ckpt.tensors):
        if name.startswith(prefix):
            h.update(name.encode())
            h.update(ckpt.sha256(name).encode())
    return h.hexdigest()
