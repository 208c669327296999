"""Read a kokoro-v1_0.pth-layout checkpoint without torch and without running pickled code.

The file is a torch zip archive: `<root>/data.pkl` describes a dict of five state dicts
(bert, bert_encoder, predictor, text_encoder, decoder) whose tensors live in `<root>/data/<key>`.
The unpickler below admits only the handful of globals a state dict needs, so a pickle that
tries to import anything else (os.system, eval, ...) is refused with a named error. A `.npz`
with keys 'section.param' (kcc.weights.torch_zip.save_npz_checkpoint) loads the same way.

The file is hostile until proven otherwise. The archive, its records and every array are read
under the caps of kcc.weights.bounded_read (Limits: CHECKPOINT_LIMITS, or VOICE_LIMITS for a voice
pack); the pickle is walked opcode by opcode before it is unpickled, so a counted length
longer than the record is refused before the unpickler allocates it.

A tensor record is used only if its offset and strides are non-negative ints, its sizes are
non-negative ints, it has at most MAX_NDIM dims and MAX_TENSOR_ELEMENTS elements, and its
largest reachable element (offset + sum((size_i - 1) * stride_i)) lies inside its storage,
whose record must hold exactly the elements its persistent id declares. Non-string keys,
containers nested deeper than MAX_DEPTH, cycles, and anything but dicts and tensors where a
state dict is expected are refused. Every refusal is a CheckpointError naming the file and the
reason (CheckpointLimitError when a cap is what was hit).
"""
from __future__ import annotations

import hashlib
import io
import math
import pickle
import pickletools
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np

from kcc.weights.bounded_read import (CHECKPOINT_LIMITS, LIMITS, MAX_NDIM, MAX_TENSOR_ELEMENTS, VOICE_BANK_LIMITS,
                              VOICE_LIMITS, Budget, CheckpointError, CheckpointLimitError, Limits, guarded,
                              open_zip, read_member, read_npy, read_npz, short)
from kcc.files import file_sha256

__all__ = ["SECTIONS", "STORAGE_DTYPES", "MAX_DEPTH", "MAX_NDIM", "MAX_TENSOR_ELEMENTS", "Limits", "LIMITS",
           "CHECKPOINT_LIMITS", "VOICE_LIMITS", "VOICE_BANK_LIMITS", "CheckpointError", "CheckpointLimitError",
           "Checkpoint", "load_checkpoint", "load_torch_zip", "read_npz", "read_npy", "tensor_sha256",
           "checkpoint_digest", "file_sha256"]

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

MAX_DEPTH = 32                           # a state dict nests 4 deep (its _metadata included)
_STORAGE_KEY = re.compile(r"[A-Za-z0-9_.-]{1,64}")


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
        raise CheckpointError(f"{where}: {what} is {type(value).__name__} {short(value)}, expected an int")
    return value


def _int_tuple(value, what: str, where: str) -> tuple[int, ...]:
    if not isinstance(value, (tuple, list)):
        raise CheckpointError(f"{where}: {what} is {type(value).__name__}, expected a tuple of ints")
    if len(value) > MAX_NDIM:
        raise CheckpointLimitError(f"{where}: {what} has {len(value)} dims, more than {MAX_NDIM}")
    return tuple(_exact_int(v, f"{what} entry", where) for v in value)


def _rebuild_tensor(budget: Budget, storage, offset, size, stride, *_rest) -> np.ndarray:
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
    def __init__(self, file, archive: zipfile.ZipFile, root: str, budget: Budget):
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
            raise CheckpointError(f"{self._where}: unsupported storage type torch.{short(name)}")
        raise CheckpointError(
            f"{self._where}: refusing pickle global {short(module)}.{short(name)}: a checkpoint holds only tensors")

    def persistent_load(self, pid):
        where = self._where
        if not (type(pid) is tuple and len(pid) == 5 and pid[0] == "storage"):
            raise CheckpointError(f"{where}: unexpected persistent id {short(pid)}")
        _, storage_type, key, _location, numel = pid
        if not isinstance(storage_type, _StorageType):
            raise CheckpointError(f"{where}: storage {short(key)} has unsupported type {short(storage_type)}")
        if type(key) is not str or not _STORAGE_KEY.fullmatch(key):
            raise CheckpointError(f"{where}: storage key {short(key)} is not a short name")
        numel = _exact_int(numel, f"storage {key} element count", where)
        self._budget.reference()
        if key not in self._storages:
            self._storages[key] = read_member(self._archive, f"{self._prefix}data/{key}", where)
        data = self._storages[key]
        itemsize = np.dtype(storage_type.dtype).itemsize
        if numel < 0 or len(data) != numel * itemsize:
            raise CheckpointError(f"{where}: storage {key} declares {numel} {storage_type.name} elements "
                                  f"but its record holds {len(data)} bytes")
        return _Storage(key, data, storage_type.dtype)


def _prescan(record: bytes, where: str, limits: Limits) -> None:
    """Walk the opcodes without building anything: counts them, and a declared string or bytes
    length longer than what is left of the record fails here (pickletools reads it from a
    BytesIO, which returns what is there) instead of the C unpickler allocating it first. So
    does a memo index past the opcodes before it: a pickler numbers its memo 0, 1, 2... one PUT
    at a time, while the C unpickler grows its memo table to twice any index it is given (a
    9-byte record naming index 2^32 - 1 would have it write 64 GiB)."""
    n = 0
    try:
        for op, arg, pos in pickletools.genops(io.BytesIO(record)):
            n += 1
            if n > limits.max_pickle_ops:
                raise CheckpointLimitError(f"{where}: pickle has more than {limits.max_pickle_ops} opcodes")
            if op.name == "FRAME" and arg > len(record) - pos - 9:
                raise CheckpointError(f"{where}: malformed pickle record: a {arg}-byte frame at byte {pos} "
                                      "runs past the record's end")
            if op.name in ("PUT", "BINPUT", "LONG_BINPUT") and not 0 <= arg < n:
                raise CheckpointError(f"{where}: malformed pickle record: memo index {arg} at byte {pos} "
                                      f"after {n - 1} opcodes")
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


def load_torch_zip(path: str | Path, what: str = "checkpoint", limits: Limits | None = None):
    """Unpickle a torch zip file with the restricted unpickler: tensors come back as read-only numpy.

    `what` ('checkpoint' or 'voice') names the file in errors and picks the caps (LIMITS)."""
    path = Path(path)
    limits = limits or LIMITS.get(what, CHECKPOINT_LIMITS)
    with open_zip(path, what, limits) as archive:
        pkl = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pkl) != 1:
            raise CheckpointError(f"{path}: expected one data.pkl record, found {len(pkl)}")
        root = pkl[0].rsplit("/", 1)[0] if "/" in pkl[0] else ""
        where = f"{path}: {what} record {pkl[0]}"
        byteorder = f"{root}/byteorder" if root else "byteorder"
        if byteorder in archive.namelist():
            order = read_member(archive, byteorder, where, limit=16)
            if order != b"little":
                raise CheckpointError(f"{path}: {what} stores tensors in byte order {short(order)}; "
                                      "only little-endian files are read")
        record = read_member(archive, pkl[0], where, limit=limits.max_pickle_bytes)
        _prescan(record, where, limits)
        budget = Budget(limits, where)
        obj = guarded(where, lambda: _RestrictedUnpickler(io.BytesIO(record), archive, root, budget).load())
        guarded(where, lambda: _check_depth(obj, where))
        return obj


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
    # ref -> its int8 values + per-row scales, for tensors that are exactly that (the int8 ONNX
    # import, kcc.weights.quantised); lowering packs those as int8. Empty: FP32 everywhere.
    quant: dict = field(default_factory=dict, repr=False)

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
                              f"{short(name)}; state dict keys are strings")
    if not isinstance(value, np.ndarray):
        raise CheckpointError(f"{path}: {section}.{short(name)} is {type(value).__name__}, not a tensor")
    if value.dtype.kind not in "fiub":
        raise CheckpointError(f"{path}: {section}.{short(name)} has dtype {value.dtype}, not a number type")
    key = f"{section}.{_strip_module_prefix(name)}"
    if key in tensors:
        raise CheckpointError(f"{path}: two tensors are named '{short(key)}' (one with a 'module.' prefix)")
    arr = value.astype(np.float32, copy=False) if value.dtype.kind == "f" else value
    if arr.flags.writeable:
        arr.setflags(write=False)
    tensors[key] = arr


def _sections_from_npz(path: Path, limits: Limits | None) -> dict[str, dict[str, np.ndarray]]:
    sections: dict[str, dict[str, np.ndarray]] = {}
    for key, arr in read_npz(path, "checkpoint", limits).items():
        section, dot, name = key.partition(".")
        if not dot or section not in SECTIONS:
            raise CheckpointError(f"{path}: npz key {short(key)} is not 'section.param' with a section "
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
    # float16 / float64 tensors are converted here: a copy, so out of memory is possible too.
    return Checkpoint(path=path, tensors=guarded(str(path), lambda: _state_tensors(obj, path)))


def _state_tensors(obj, path: Path) -> dict[str, np.ndarray]:
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: top level is {type(obj).__name__}, expected a dict of state dicts")
    odd = [k for k in obj if type(k) is not str]
    if odd:
        raise CheckpointError(f"{path}: top level has a {type(odd[0]).__name__} key {short(odd[0])}; "
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
    return tensors


def checkpoint_digest(ckpt: Checkpoint, prefix: str = "") -> str:
    """One SHA-256 over every tensor's name and digest (optionally only names under `prefix`)."""
    h = hashlib.sha256()
    for name in sorted(ckpt.tensors):
        if name.startswith(prefix):
            h.update(name.encode())
            h.update(ckpt.sha256(name).encode())
    return h.hexdigest()
