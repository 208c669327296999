"""Builders of hostile checkpoint and voice files, shared by tests/test_hostile_files.py and
fuzz/fuzz_checkpoint.py. Everything here writes exactly what it is told (kcc.weights.torch_zip's
unchecked layer, or raw zip entries), so a test can name the one field that is wrong."""
from __future__ import annotations

import dataclasses
import struct
import zipfile
from pathlib import Path

import numpy as np

from kcc.weights.checkpoint import SECTIONS
from kcc.weights.torch_zip import TensorRef, pickle_bytes, write_torch_zip

STORAGE = np.arange(6, dtype=np.float32)           # storage record '0'
GOOD = TensorRef("0", "FloatStorage", 6, 0, (2, 3), (3, 1))


def ref(**changes) -> TensorRef:
    """The good 2 x 3 tensor on storage '0' with some fields changed."""
    return dataclasses.replace(GOOD, **changes)


def checkpoint_obj(bad=None, name: str = "bad") -> dict:
    """Five sections holding one good tensor each; `bad` (if given) goes in as bert.<name>."""
    obj = {s: {"w": GOOD} for s in SECTIONS}
    if bad is not None:
        obj["bert"][name] = bad
    return obj


def write_pth(path: Path, obj, storages: dict[str, bytes] | None = None, records: dict[str, bytes] | None = None,
              pickle: bytes | None = None) -> Path:
    """A torch zip: data.pkl from `obj` (or the raw `pickle`), the storages (default: '0' ->
    STORAGE), then `records` (extra or replacing ones)."""
    storages = {"0": STORAGE.tobytes()} if storages is None else storages
    out = {"data.pkl": pickle if pickle is not None else pickle_bytes(obj), "byteorder": b"little"}
    out.update({f"data/{k}": v for k, v in storages.items()})
    out["version"] = b"3\n"
    out.update(records or {})
    return write_torch_zip(path, out)


def raw_zip(path: Path, members: list[tuple[str, bytes]], compression: int = zipfile.ZIP_STORED) -> Path:
    """Members written as listed: duplicates included (zipfile only warns about those)."""
    import warnings
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w", compression) as z:
        warnings.simplefilter("ignore")
        for name, data in members:
            z.writestr(name, data)
    return path


def pth_members(obj, storages: dict[str, bytes] | None = None) -> list[tuple[str, bytes]]:
    storages = {"0": STORAGE.tobytes()} if storages is None else storages
    return ([("archive/data.pkl", pickle_bytes(obj))] + [(f"archive/data/{k}", v) for k, v in storages.items()]
            + [("archive/version", b"3\n")])


def patch_directory(path: Path, member: str, file_size: int | None = None, entries: int | None = None) -> Path:
    """Rewrite, in place, one member's declared uncompressed size in the central directory, or
    the end record's entry counts: the lies a hostile zip tells its reader."""
    raw = bytearray(path.read_bytes())
    if file_size is not None:
        at = raw.find(b"PK\x01\x02")
        name = member.encode()
        while at >= 0:
            n = struct.unpack_from("<H", raw, at + 28)[0]
            if raw[at + 46:at + 46 + n] == name:
                struct.pack_into("<I", raw, at + 24, file_size)
                break
            at = raw.find(b"PK\x01\x02", at + 4)
        else:
            raise ValueError(f"{member} not in {path}")
    if entries is not None:
        end = raw.rfind(b"PK\x05\x06")
        struct.pack_into("<HH", raw, end + 8, entries, entries)
    path.write_bytes(bytes(raw))
    return path


def npy_bytes(header: dict, data: bytes) -> bytes:
    """A version 1.0 .npy with the given header dict, as written (shape and dtype unchecked)."""
    text = repr(header).encode("latin1")
    pad = -(10 + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(text)) + text + data


def npz_members(tensors: dict[str, np.ndarray]) -> list[tuple[str, bytes]]:
    return [(f"{k}.npy", npy_bytes({"descr": v.dtype.str, "fortran_order": False, "shape": v.shape}, v.tobytes()))
            for k, v in tensors.items()]


def good_npz_tensors() -> dict[str, np.ndarray]:
    return {f"{s}.w": STORAGE.reshape(2, 3) for s in SECTIONS}
