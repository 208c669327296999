"""Stage libraries compiled when the wheel was built, so that a machine without a C compiler speaks.

An installed wheel carries kcc/prebuilt/<machine>/ (platform.machine(): x86_64, aarch64): the
default model's stage libraries for the default build options (kcc.model.prebuilt_build compiles
them from the model's structure, without its weights) and table.json, which names each library
by the key of the C it was compiled from and holds its SHA-256. The key is the build cache's key
(kcc.compiler.build) without the compiler's identity: SHA-256 over the generated source and the
compiler flags. The source is the whole input to the compiler (emit inlines kcc's headers) and
the weights never enter it (they are a blob mapped at run time), so a source and flags that the
table names are exactly the code that library was compiled from; anything else compiles.

build_library asks here before it compiles. A listed library whose bytes differ from the table
is a PrebuiltError (a damaged install: reinstall), never loaded. KCC_PREBUILT=0 turns the
prebuilt libraries off (everything compiles, as in a checkout, which has none).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import shutil
from dataclasses import dataclass
from pathlib import Path

from kcc.files import file_sha256

ROOT = Path(__file__).resolve().parents[1] / "prebuilt"
TABLE = "table.json"
TABLE_VERSION = 1


class PrebuiltError(Exception):
    """A prebuilt library of this install is missing or differs from its table: reinstall kcc."""


@dataclass(frozen=True)
class Prebuilt:
    path: Path
    sha256: str
    key: str


def source_key(source: str, flags: list[str] | tuple[str, ...]) -> str:
    """What a prebuilt library is found by: the generated C and the flags it was compiled with."""
    return hashlib.sha256("\0".join([source, *flags]).encode()).hexdigest()[:32]


def machine() -> str:
    return platform.machine().lower()


def enabled() -> bool:
    return os.environ.get("KCC_PREBUILT", "1") != "0"


@functools.lru_cache(maxsize=4)
def _table(machine_name: str) -> dict | None:
    path = ROOT / machine_name / TABLE
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        table = json.loads(text)
        if table["table_version"] != TABLE_VERSION:
            raise PrebuiltError(f"{path}: table version {table['table_version']} != {TABLE_VERSION}")
        table["digest"] = hashlib.sha256(text.encode()).hexdigest()
        return table
    except (ValueError, KeyError, TypeError) as exc:
        raise PrebuiltError(f"{path}: not a prebuilt table ({exc}); reinstall kcc") from None


def table() -> dict | None:
    """This machine's table, or None where the install has none (a checkout, another machine)."""
    return _table(machine()) if enabled() else None


def identity() -> str:
    """The table's digest ('none' without one): part of every artifact key, so libraries taken
    from one install are never mapped by another's artifact."""
    t = table()
    return "none" if t is None else t["digest"]


def covers(flags: list[str]) -> bool:
    """Whether the prebuilt libraries were compiled with these flags (the default build's)."""
    t = table()
    return t is not None and list(t["flags"]) == list(flags)


def find(source: str, flags: list[str]) -> Prebuilt | None:
    """The prebuilt library compiled from `source` with `flags`, its digest checked; None when
    the table lists none."""
    t = table()
    if t is None or not covers(flags):
        return None
    key = source_key(source, flags)
    entry = t["libraries"].get(key)
    if entry is None:
        return None
    path = ROOT / machine() / entry["file"]
    if "/" in entry["file"] or not path.is_file() or file_sha256(path) != entry["sha256"]:
        raise PrebuiltError(f"{path}: missing or its SHA-256 differs from {ROOT / machine() / TABLE} "
                            "(a damaged install); reinstall kcc, or set KCC_PREBUILT=0 to compile instead")
    return Prebuilt(path, entry["sha256"], key)


def write(out: Path, machine_name: str, compiler: str, flags: list[str],
          libraries: list[tuple[str, str, Path]]) -> Path:
    """Copy (stage, source, compiled library) into out/<machine_name>/ under its table."""
    where = Path(out) / machine_name
    where.mkdir(parents=True, exist_ok=True)
    entries = {}
    for stage, source, lib in libraries:
        name = f"{stage}.so"
        shutil.copyfile(lib, where / name)
        entries[source_key(source, flags)] = {"stage": stage, "file": name, "sha256": file_sha256(where / name)}
    doc = {"table_version": TABLE_VERSION, "machine": machine_name, "compiler": compiler, "flags": list(flags),
           "libraries": entries}
    (where / TABLE).write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")   # a build tree: nobody reads it yet
    return where
