"""A compiled model as an artifact on disk: stage libraries, one read-only weight blob, a manifest.

Compiling a model (import, lowering, weight packing into GEMM panels and DFT spectra, C builds)
takes seconds to minutes; loading its artifact takes milliseconds. An artifact directory holds

  manifest.json    the stages in order, each with its graph and memory plan (what the runtime
                   needs to call the entry point), its library's file name and SHA-256, and its
                   weights' offset, size and SHA-256 in the blob; the model id and build options
  manifest.sig     an HMAC-SHA256 of the manifest under the user's key, which lives outside the
                   cache (kcc.cache_trust: why a digest beside the manifest proves nothing)
  weights.bin      every stage's packed weights, each at a page-aligned offset; mapped read-only,
                   so processes that load the same artifact share its pages
  <stage>.so/.c    the stage libraries and their generated sources

Loading checks that the directory is the user's alone, the manifest's signature, the blob's size
and each library's SHA-256 (libraries are small) before any library is opened (dlopen runs its
constructors). The blob is checked against per-MiB SHA-256s in the manifest: all of them when
the blob's inode, size, mtime or ctime differ from what the manifest recorded at write time
(any write to it changes them; 351 ms for the 578 MB fp32 blob on a Sapphire Rapids core),
else BLOB_SAMPLES chunks chosen at random (~5 ms); `verify=True` checks all. Anything that fails
a check is an ArtifactError, and the caller rebuilds. A directory is written under a temporary
name and renamed into place whole, so concurrent builders never expose half an artifact.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import random
import shutil
from pathlib import Path

import numpy as np

from kcc.version import __version__
from kcc.cache_trust import check_private_dir, sign
from kcc.cache_trust import verify as signature_holds
from kcc.compiler.build import BuildOptions, Built, toolchain_identity
from kcc.ir import Checkpoint as IrCheckpoint
from kcc.ir import Graph, Op, Tensor, WeightRef
from kcc.compiler.plan import Buffer, MemoryPlan
from kcc.compiler.runtime import CompiledCircuit, KccRunError
from kcc.compiler.stamp_memo import file_stamp, remembered
from kcc.files import cache_subdir, file_sha256, temp_dir

ARTIFACT_VERSION = 2
PAGE = 4096
CHUNK = 1 << 20            # the blob is checked in chunks of this many bytes
BLOB_SAMPLES = 8           # chunks checked on a load whose blob is as written
_PKG = Path(__file__).resolve().parents[1]          # the kcc package
# Everything that decides what an artifact holds: a change to any of these rebuilds it.
_COMPILER_SOURCES = ("compiler/*.py", "model/pipeline.py", "weights/*.py", "weights/importers/*.py", "ops/*.py",
                     "kernels/*.py", "kernels/c/*", "circuits/*.json", "data/*.json")


class ArtifactError(Exception):
    """An artifact directory is missing, incomplete, or fails a digest check."""


@functools.lru_cache(maxsize=1)
def compiler_digest() -> str:
    """SHA-256 over the kcc sources that decide what a compiled model computes or how it is
    called: the compiler (lowering, passes, planning, emission, build flags), the ops and C
    kernels, the circuits, the checkpoint readers and the importer, the runtime's ABI. An edited
    compiler never loads an artifact that an older tree compiled; editing the speech product
    (G2P, server, batch) does not force a recompile."""
    files = sorted(p for pat in _COMPILER_SOURCES for p in _PKG.glob(pat) if p.is_file())

    def digest() -> str:
        h = hashlib.sha256(f"artifact {ARTIFACT_VERSION}".encode())
        for p in files:
            h.update(str(p.relative_to(_PKG)).encode())
            h.update(p.read_bytes())
        return h.hexdigest()
    # re-read (1 MB, 114 files) only when a file's stamp changed: a warm load stats them (1-2 ms)
    return remembered("compiler-digest", str(_PKG), [ARTIFACT_VERSION, *map(file_stamp, files)], digest)


def artifact_key(model_id: str, options: BuildOptions, max_frames: int, stages: list[str]) -> str:
    text = "\0".join([model_id, __version__, compiler_digest(), toolchain_identity(),
                      *options.flags(), f"precision={options.precision}", str(max_frames), *stages])
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _name_stem(model_id: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in model_id)[:80]


def artifact_dir(model_id: str, options: BuildOptions, max_frames: int, stages: list[str]) -> Path:
    return cache_subdir("models") / f"{_name_stem(model_id)}-{artifact_key(model_id, options, max_frames, stages)}"


def is_artifact_name(name: str, model_id: str) -> bool:
    """Whether `name` is what artifact_dir calls a directory of `model_id`'s (any key). Two ids
    can share a name stem: the manifest's model_id tells them apart."""
    stem = _name_stem(model_id)
    key = name[len(stem) + 1:]
    return (name.startswith(stem + "-") and len(key) == 24
            and all(c in "0123456789abcdef" for c in key))


# -- graph and plan as JSON ---------------------------------------------------------------------
def _graph_to_json(g: Graph) -> dict:
    return dataclasses.asdict(g)


def _graph_from_json(d: dict) -> Graph:
    return Graph(
        name=d["name"], dims={k: (int(v[0]), int(v[1])) for k, v in d["dims"].items()},
        inputs=list(d["inputs"]), outputs=list(d["outputs"]),
        tensors={k: Tensor(v["name"], v["dtype"], tuple(v["shape"]), v["kind"]) for k, v in d["tensors"].items()},
        weights={k: WeightRef(v["name"], v["ref"], v["fold"], tuple(v["shape"]), v["sha256"], v["pack"])
                 for k, v in d["weights"].items()},
        ops=[Op(**o) for o in d["ops"]],
        checkpoints=[IrCheckpoint(**c) for c in d["checkpoints"]])


def _plan_from_json(d: dict) -> MemoryPlan:
    return MemoryPlan(alignment=d["alignment"], weights={k: Buffer(**v) for k, v in d["weights"].items()},
                      weights_bytes=d["weights_bytes"],
                      activations={k: Buffer(**v) for k, v in d["activations"].items()},
                      arena_bytes=d["arena_bytes"])


# -- write ----------------------------------------------------------------------------------------
def _blob_stamp(path: Path) -> dict:
    """What changes when anything writes the blob (ctime cannot be set back from user space)."""
    st = os.stat(path)
    return {"ino": st.st_ino, "size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}


def _chunk_digests(path: Path) -> list[str]:
    out = []
    with open(path, "rb", buffering=0) as fh:
        while chunk := fh.read(CHUNK):
            out.append(hashlib.sha256(chunk).hexdigest())
    return out


def save(path: Path, circuits: dict[str, CompiledCircuit], meta: dict) -> Path:
    """Write the artifact for `circuits` (in stage order) at `path`, atomically."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with temp_dir(path.parent, path.name) as tmp:
        stages, offset = [], 0
        with open(tmp / "weights.bin", "wb") as blob:
            for name, c in circuits.items():
                offset = -(-offset // PAGE) * PAGE
                blob.seek(offset)
                data = np.ascontiguousarray(c.weights).view(np.uint8).reshape(-1)
                blob.write(memoryview(data))
                lib = f"{name}.so"
                shutil.copyfile(c.library_path, tmp / lib)
                (tmp / f"{name}.c").write_text(c.source, encoding="utf-8")
                stages.append({"name": name, "library": lib, "library_sha256": file_sha256(tmp / lib),
                               "source": f"{name}.c", "flags": list(c.built.flags),
                               "weights_offset": offset, "weights_bytes": int(data.size),
                               "weights_sha256": c.weights_sha256,
                               "graph": _graph_to_json(c.graph), "plan": dataclasses.asdict(c.plan)})
                offset += data.size
            blob.truncate(max(offset, 1))
        manifest = {"artifact_version": ARTIFACT_VERSION, **meta, "blob": "weights.bin",
                    "blob_bytes": max(offset, 1), "blob_chunk_bytes": CHUNK,
                    "blob_chunks": _chunk_digests(tmp / "weights.bin"),
                    "blob_stamp": _blob_stamp(tmp / "weights.bin"), "stages": stages}
        text = json.dumps(manifest, indent=1) + "\n"
        (tmp / "manifest.json").write_text(text, encoding="utf-8")
        (tmp / "manifest.sig").write_text(sign(text.encode(), "artifact-manifest") + "\n")
        try:
            os.rename(tmp, path)
        except OSError:
            if not (path / "manifest.sig").is_file():   # not a concurrent builder's finished copy
                raise
    return path


# -- read -----------------------------------------------------------------------------------------
def read_manifest(path: Path) -> dict:
    manifest = signed_manifest(path)
    if manifest.get("artifact_version") != ARTIFACT_VERSION:
        raise ArtifactError(f"{path}: artifact version {manifest.get('artifact_version')} != {ARTIFACT_VERSION}")
    return manifest


def signed_manifest(path: Path) -> dict:
    """The manifest of the artifact at `path` if this user's kcc signed it (any artifact
    version: an older kcc's artifact is still kcc's own), else ArtifactError."""
    path = Path(path)
    try:
        text = (path / "manifest.json").read_text(encoding="utf-8")
        signature = (path / "manifest.sig").read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ArtifactError(f"{path}: no readable manifest ({exc})") from None
    if not signature_holds(text.encode(), "artifact-manifest", signature):
        raise ArtifactError(f"{path}/manifest.json: not signed with this user's key (modified, torn, or "
                            "made elsewhere)")
    try:
        manifest = json.loads(text)
    except ValueError as exc:
        raise ArtifactError(f"{path}/manifest.json: not JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise ArtifactError(f"{path}/manifest.json: not a JSON object")
    return manifest


def load(path: Path, verify: bool = False) -> tuple[dict[str, CompiledCircuit], dict]:
    """(stage name -> CompiledCircuit over the mapped blob, manifest). Whatever keeps it from
    loading is an ArtifactError, so the caller rebuilds it: a manifest missing a field, or a
    library with the recorded digest that the loader refuses (built against another libc), or
    one that lacks an entry point (AttributeError from ctypes)."""
    path = Path(path)
    check_private_dir(path)              # a CacheError: not ours to rebuild, the user must fix it
    try:
        return _load(path, verify)
    except (OSError, KccRunError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise ArtifactError(f"{path}: cannot be loaded: {type(exc).__name__}: {exc}") from None


def check_blob(blob_path: Path, manifest: dict, everything: bool) -> None:
    """ArtifactError unless the blob's chunks match the manifest: all of them when `everything`
    or the blob was written since the manifest recorded it, else BLOB_SAMPLES random ones."""
    chunks, size = manifest["blob_chunks"], int(manifest["blob_chunk_bytes"])
    if len(chunks) != -(-int(manifest["blob_bytes"]) // size):
        raise ArtifactError(f"{blob_path}: the manifest lists {len(chunks)} chunk digests for {manifest['blob_bytes']} bytes")
    if not everything and _blob_stamp(blob_path) == manifest["blob_stamp"]:
        which = sorted(random.sample(range(len(chunks)), min(BLOB_SAMPLES, len(chunks))))
    else:
        which = range(len(chunks))
    with open(blob_path, "rb", buffering=0) as fh:
        for i in which:
            if hashlib.sha256(os.pread(fh.fileno(), size, i * size)).hexdigest() != chunks[i]:
                raise ArtifactError(f"{blob_path}: bytes {i * size}..{(i + 1) * size} differ from the manifest's "
                                    "SHA-256 (damaged or modified)")


def _load(path: Path, verify: bool) -> tuple[dict[str, CompiledCircuit], dict]:
    manifest = read_manifest(path)
    blob_path = path / manifest["blob"]
    try:
        size = blob_path.stat().st_size
    except OSError as exc:
        raise ArtifactError(f"{blob_path}: {exc}") from None
    if size != manifest["blob_bytes"]:
        raise ArtifactError(f"{blob_path}: {size} bytes, the manifest says {manifest['blob_bytes']}")
    check_blob(blob_path, manifest, everything=verify)
    blob = np.memmap(blob_path, dtype=np.uint8, mode="r")
    for s in manifest["stages"]:        # every library checked before the first is opened
        if any("/" in s[k] or s[k].startswith(".") for k in ("library", "source")):
            raise ArtifactError(f"{path}: stage {s.get('name')!r} names a file outside the artifact")
        lib = path / s["library"]
        if not lib.is_file() or lib.is_symlink() or file_sha256(lib) != s["library_sha256"]:
            raise ArtifactError(f"{lib}: missing or its SHA-256 differs from the manifest")
    circuits: dict[str, CompiledCircuit] = {}
    for s in manifest["stages"]:
        lib = path / s["library"]
        weights = blob[s["weights_offset"]:s["weights_offset"] + s["weights_bytes"]]
        if verify and hashlib.sha256(weights).hexdigest() != s["weights_sha256"]:
            raise ArtifactError(f"{blob_path}: stage {s['name']}'s weights differ from the manifest's SHA-256")
        built = Built(lib, path / s["source"], s["library_sha256"], path.name, tuple(s["flags"]), True)
        circuits[s["name"]] = CompiledCircuit(_graph_from_json(s["graph"]), _plan_from_json(s["plan"]), built,
                                              weights, source_path=path / s["source"],
                                              weights_sha256=s["weights_sha256"])
    return circuits, manifest
