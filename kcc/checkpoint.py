"""Read a kokoro-v1_0.pth-layout checkpoint without torch and without running pickled code.

The file is a torch zip archive: `<root>/data.pkl` describes a dict of five state dicts
(bert, bert_encoder, predictor, text_encoder, decoder) whose tensors live in `<root>/data/<key>`.
The unpickler below admits only the handful of globals a state dict needs, so a pickle that
tries to import anything else (os.system, eval, ...) is refused with a named error.
"""
from __future__ import annotations

import hashlib
import pickle
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kcc.digest import file_sha256

SECTIONS = ("bert", "bert_encoder", "predictor", "text_encoder", "decoder")

_STORAGE_DTYPES = {
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


class CheckpointError(Exception):
    """A checkpoint file or a reference into it is unusable; the message says which and why."""


@dataclass(frozen=True)
class _StorageType:
    dtype: type


def _rebuild_tensor(storage, offset, size, stride, *_rest):
    data, dtype = storage
    count = 1
    for s in size:
        count *= s
    flat = np.frombuffer(data, dtype=dtype)
    if count == 0:
        return np.zeros(size, dtype=dtype)
    span = offset + sum((n - 1) * st for n, st in zip(size, stride)) + 1
    if span > flat.size:
        raise CheckpointError(f"tensor of shape {tuple(size)} reads past the end of its storage")
    itemsize = np.dtype(dtype).itemsize
    view = np.lib.stride_tricks.as_strided(
        flat[offset:], shape=tuple(size), strides=tuple(st * itemsize for st in stride))
    return np.ascontiguousarray(view)


def _rebuild_parameter(tensor, *_rest):
    return tensor


class _OrderedDict(dict):
    """Stands in for collections.OrderedDict; dicts keep insertion order already."""


class _RestrictedUnpickler(pickle.Unpickler):
    _ALLOWED = {
        ("collections", "OrderedDict"): _OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
        ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
        ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    }

    def __init__(self, file, archive: zipfile.ZipFile, root: str, path: Path):
        super().__init__(file)
        self._archive = archive
        self._root = root
        self._path = path
        self._storages: dict[str, tuple[bytes, type]] = {}

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return self._ALLOWED[(module, name)]
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(_STORAGE_DTYPES[name])
        raise CheckpointError(
            f"{self._path}: refusing pickle global {module}.{name}: a checkpoint holds only tensors")

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) >= 3 and pid[0] == "storage"):
            raise CheckpointError(f"{self._path}: unexpected persistent id {pid!r}")
        storage_type, key = pid[1], str(pid[2])
        if not isinstance(storage_type, _StorageType):
            raise CheckpointError(f"{self._path}: storage {key} has unsupported type {storage_type!r}")
        if key not in self._storages:
            name = f"{self._root}/data/{key}"
            try:
                raw = self._archive.read(name)
            except KeyError:
                raise CheckpointError(f"{self._path}: storage record {name} is missing (truncated file?)")
            except (zipfile.BadZipFile, OSError, EOFError) as exc:
                raise CheckpointError(f"{self._path}: storage record {name} is corrupt: {exc}")
            self._storages[key] = (raw, storage_type.dtype)
        return self._storages[key]


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


def load_torch_zip(path: str | Path, what: str = "checkpoint"):
    """Unpickle a torch zip file with the restricted unpickler: tensors come back as numpy."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path}: {what} file does not exist")
    if not path.is_file():
        raise CheckpointError(f"{path}: {what} path is not a regular file")
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise CheckpointError(f"{path}: not a torch zip {what} (truncated or corrupt): {exc}")
    with archive:
        pkl = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if len(pkl) != 1:
            raise CheckpointError(f"{path}: expected one data.pkl record, found {len(pkl)}")
        root = pkl[0].rsplit("/", 1)[0] if "/" in pkl[0] else ""
        try:
            with archive.open(pkl[0]) as fh:
                return _RestrictedUnpickler(fh, archive, root, path).load()
        except CheckpointError:
            raise
        except (pickle.UnpicklingError, EOFError, zipfile.BadZipFile, ValueError, TypeError,
                AttributeError, IndexError, KeyError, OSError) as exc:
            raise CheckpointError(f"{path}: corrupt {what} record {pkl[0]}: {exc}")


def load_checkpoint(path: str | Path, sha256: str | None = None) -> Checkpoint:
    """sha256: the file's expected SHA-256 (hex); a mismatch is refused before unpickling."""
    path = Path(path)
    if sha256 is not None and path.is_file():
        digest = file_sha256(path)
        if digest != sha256.lower():
            raise CheckpointError(f"{path}: SHA-256 {digest} differs from the expected {sha256}: "
                                  "wrong or modified file")
    obj = load_torch_zip(path)
    if not isinstance(obj, dict):
        raise CheckpointError(f"{path}: top level is {type(obj).__name__}, expected a dict of state dicts")
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
            if not isinstance(value, np.ndarray):
                raise CheckpointError(f"{path}: {section}.{name} is not a tensor")
            arr = value.astype(np.float32) if value.dtype.kind == "f" else value
            arr.setflags(write=False)
            tensors[f"{section}.{_strip_module_prefix(name)}"] = arr
    return Checkpoint(path=path, tensors=tensors)


def checkpoint_digest(ckpt: Checkpoint, prefix: str = "") -> str:
    """One SHA-256 over every tensor's name and digest (optionally only names under `prefix`)."""
    h = hashlib.sha256()
    for name in sorted(ckpt.tensors):
        if name.startswith(prefix):
            h.update(name.encode())
            h.update(ckpt.sha256(name).encode())
    return h.hexdigest()
