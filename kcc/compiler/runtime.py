"""Load a compiled circuit with ctypes and run it on caller-owned memory.

A `CompiledCircuit` is the loaded library, its plan, and the packed read-only weight blob
(kcc.compiler.driver makes one; kcc.compiler.artifact maps one back from disk). `run` infers
the runtime dims from the input shapes, checks them, and calls the generated entry point; a
nonzero status becomes a KccRunError carrying the C side's message.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import mmap
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kcc.compiler.abi import ABI_VERSION, WEIGHT_DONE_FN, bind, symbol_prefix
from kcc.compiler.build import Built
from kcc.compiler.plan import MemoryPlan
from kcc.compiler.threads import set_wait_policy
from kcc.ir import Graph, extent_value

NP_DTYPES = {"f32": np.float32, "i32": np.int32}


class KccRunError(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(f"status {status}: {message}")
        self.status = status


class WeightReleaseError(Exception):
    """A stage's weight pages cannot be released: they are not a read-only file mapping (an
    in-memory compile's blob would be lost, not dropped), or the platform has no madvise."""


def is_file_mapped(a: np.ndarray) -> bool:
    """Whether `a` is a view of a read-only np.memmap (an artifact's weight blob)."""
    while a is not None:
        if isinstance(a, np.memmap) and a.mode == "r":
            return True
        a = a.base if isinstance(a.base, np.ndarray) else None
    return False


def release_pages(a: np.ndarray) -> int:
    """Drops the whole pages of a read-only file-mapped array from this process's resident set
    (madvise MADV_DONTNEED). The file's pages stay in the page cache and fault back in on the
    next read, with the same bytes. Returns the bytes released."""
    if not is_file_mapped(a):
        raise WeightReleaseError("the weights are not a read-only file mapping; releasing their pages would lose them")
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is None:
        raise WeightReleaseError("this platform has no madvise(MADV_DONTNEED)")
    got = _release_range(a.ctypes.data, a.nbytes, advice)
    if got < 0:
        raise WeightReleaseError(f"madvise failed: errno {ctypes.get_errno()}")
    return got


def _release_range(address: int, nbytes: int, advice: int) -> int:
    """madvise the whole pages inside [address, address + nbytes): bytes released, -1 on failure."""
    page = mmap.PAGESIZE
    start = -(-address // page) * page
    end = (address + nbytes) // page * page
    if end <= start:
        return 0
    return end - start if _libc().madvise(ctypes.c_void_p(start), ctypes.c_size_t(end - start), advice) == 0 else -1


# The weight blobs whose pages are released as used: start address -> end. A library is loaded
# once per path, so every CompiledCircuit over it shares its hook; only bytes inside a blob listed
# here (a read-only file mapping that asked for it) are ever released.
_RELEASING: dict[int, int] = {}


@WEIGHT_DONE_FN
def _weight_done(address, nbytes):
    """What a stage calls after the last op reading a weight (release_weights_as_used). A failure
    here cannot raise through C: those pages stay resident until the stage's own release_pages,
    which does raise."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    if advice is None or not address:
        return
    if any(start <= address and address + nbytes <= end for start, end in list(_RELEASING.items())):
        _release_range(address, nbytes, advice)


@functools.cache
def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.madvise.restype, libc.madvise.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


def aligned_empty(nbytes: int, alignment: int = 64, offset: int = 0) -> np.ndarray:
    """A uint8 array whose data pointer is `offset` bytes past an `alignment` boundary."""
    raw = np.empty(nbytes + 2 * alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment + offset
    return raw[start:][:nbytes]   # (a zero-length raw[a:a] would drop the offset)


def trim_scratch(a: np.ndarray, keep: int) -> int:
    """Drop the whole pages of scratch array `a` (an arena: anonymous, private, its bytes dead
    between runs) past its first `keep` bytes from the resident set (madvise MADV_DONTNEED:
    they read as zeros and fault in again when next used). Returns the bytes dropped (0 where
    the platform has no madvise: the arena then keeps its pages, as before)."""
    advice = getattr(mmap, "MADV_DONTNEED", None)
    keep = max(0, min(int(keep), a.nbytes))
    if advice is None or is_file_mapped(a) or keep >= a.nbytes:
        return 0
    return max(0, _release_range(a.ctypes.data + keep, a.nbytes - keep, advice))


@dataclass
class RunResult:
    outputs: dict[str, np.ndarray]
    checkpoints: dict[str, np.ndarray] = field(default_factory=dict)


def _as_dtype(what: str, value, want) -> np.ndarray:
    """`value` as a C-contiguous array of dtype `want`: another dtype of the same kind is converted,
    but integers only where every value fits (int64 ids past int32 would wrap into valid rows and
    pass the C's range checks); another kind is refused."""
    arr = np.asarray(value)
    want = np.dtype(want)
    if arr.dtype != want:
        if arr.dtype.kind != want.kind:
            raise ValueError(f"{what}: dtype {arr.dtype}, expected {want}")
        if want.kind in "iu" and arr.size:
            info = np.iinfo(want)
            lo, hi = arr.min(), arr.max()
            if lo < info.min or hi > info.max:
                raise ValueError(f"{what}: values {lo}..{hi} do not fit {want}")
        arr = arr.astype(want)
    return np.ascontiguousarray(arr)


class CompiledCircuit:
    """A loaded stage library with its graph, plan and read-only weight blob. `source` is the
    generated C text, or `source_path` names the file it is read from when asked for (a model
    loaded from an artifact never reads it). `weights_sha256`, when the caller knows it (an
    artifact's manifest), saves hashing the blob."""

    def __init__(self, graph: Graph, plan: MemoryPlan, built: Built, weights: np.ndarray, source: str | None = None,
                 source_path: Path | None = None, weights_sha256: str | None = None):
        self.graph, self.plan, self.built, self.weights = graph, plan, built, weights
        self._source, self._source_path = source, source_path
        if weights_sha256 is not None:
            self.weights_sha256 = weights_sha256
        self.library_path = str(built.library)
        set_wait_policy()                # before libgomp is loaded with the first stage library
        self.lib = ctypes.CDLL(self.library_path)
        self.prefix = symbol_prefix(graph.name)
        entry = bind(self.lib, self.prefix)
        self._run, self._set_threads, self._op_seconds = entry["run"], entry["set_threads"], entry["op_seconds"]
        self._set_weight_done = entry["set_weight_done"]
        if entry["abi_version"]() != ABI_VERSION:
            raise KccRunError(-100, f"{self.library_path}: ABI version differs from {ABI_VERSION}")

    @property
    def source(self) -> str:
        if self._source is None:
            self._source = Path(self._source_path or self.built.source).read_text(encoding="utf-8")
        return self._source

    @functools.cached_property
    def weights_sha256(self) -> str:
        return hashlib.sha256(self.weights).hexdigest()

    def op_seconds(self) -> dict[str, float]:
        """Each op's wall time in the last run (op name -> s): needs BuildOptions(profile=True)."""
        out = np.zeros(len(self.graph.ops), dtype=np.float64)
        if self._op_seconds(out.ctypes.data, out.size) == 0:
            raise KccRunError(-101, f"{self.library_path}: not built with profile=True (-DKCC_PROFILE)")
        return {op.name: float(t) for op, t in zip(self.graph.ops, out)}

    def release_weights(self) -> int:
        """Drop this stage's weight pages from the resident set (release_pages): for a process
        that will not run the stage again soon. A later run faults them back in, bit for bit."""
        return release_pages(self.weights)

    def release_weights_as_used(self, on: bool = True, hook=None) -> None:
        """During each run, drop each weight's pages from the resident set once the last op
        reading it has run (emit.weights_done_after), so the stage peaks with about one op's
        weights resident instead of all of them; the next run faults them back in, bit for bit.
        For a one-shot process. Refused (WeightReleaseError) unless the weights are a read-only
        file mapping. hook: a WEIGHT_DONE_FN to call instead (tests; the blob's registration with
        _weight_done is left as it is)."""
        start = self.weights.ctypes.data
        if on and hook is None:
            if self.weights.nbytes and not is_file_mapped(self.weights):
                raise WeightReleaseError("the weights are not a read-only file mapping; releasing their pages "
                                         "would lose them")
            _RELEASING[start] = start + self.weights.nbytes
        elif not on:
            _RELEASING.pop(start, None)
        self._weight_done_hook = hook              # (kept alive while the library may call it)
        self._set_weight_done(ctypes.cast(hook or _weight_done, ctypes.c_void_p) if on else None)

    def set_threads(self, n: int) -> int:
        """Use n threads in kernels (OpenMP builds); returns the count in effect (1 if serial)."""
        return int(self._set_threads(int(n)))

    # -- shapes ---------------------------------------------------------------------------
    def infer_dims(self, inputs: dict[str, np.ndarray], given: dict[str, int] | None = None) -> dict[str, int]:
        """given: values for dims no input carries (e.g. a frame count the caller computed)."""
        g = self.graph
        missing = [n for n in g.inputs if n not in inputs]
        if missing:
            raise ValueError(f"circuit '{g.name}': missing input(s) {missing}")
        extra = [n for n in inputs if n not in g.inputs]
        if extra:
            raise ValueError(f"circuit '{g.name}': unknown input(s) {extra}; inputs are {g.inputs}")
        dims: dict[str, int] = {}
        derived: list[tuple[str, str, int]] = []
        for name in g.inputs:
            t, arr = g.tensors[name], np.asarray(inputs[name])
            if arr.ndim != len(t.shape):
                raise ValueError(f"input '{name}': expected {len(t.shape)} axes {list(t.shape)}, got shape {arr.shape}")
            for ext, n in zip(t.shape, arr.shape):
                if isinstance(ext, int):
                    if n != ext:
                        raise ValueError(f"input '{name}': extent {n} where {ext} is fixed")
                elif ext not in g.dims:
                    derived.append((name, ext, n))      # an expression such as '(2*F)': checked below
                elif dims.setdefault(ext, n) != n:
                    raise ValueError(f"input '{name}': dim {ext} is {n} here but {dims[ext]} in another input")
        for d, n in (given or {}).items():
            if d not in g.dims:
                raise ValueError(f"circuit '{g.name}': no runtime dim {d}; dims are {list(g.dims)}")
            if dims.setdefault(d, int(n)) != int(n):
                raise ValueError(f"dim {d} = {n} was given but the inputs make it {dims[d]}")
        for d, (lo, hi) in g.dims.items():
            if d not in dims:
                raise ValueError(f"circuit '{g.name}': dim {d} is not set by any input")
            if not lo <= dims[d] <= hi:
                raise ValueError(f"dim {d} = {dims[d]} is outside the planned range [{lo}, {hi}] "
                                 f"of circuit '{g.name}' (recompile with a larger max)")
        for name, ext, n in derived:
            if extent_value(ext, dims) != n:
                raise ValueError(f"input '{name}': extent {n} where {ext} = {extent_value(ext, dims)} "
                                 f"for dims {dims}")
        return dims

    def shape_of(self, tensor: str, dims: dict[str, int]) -> tuple[int, ...]:
        return tuple(extent_value(e, dims) for e in self.graph.tensors[tensor].shape)

    def new_arena(self) -> np.ndarray:
        return aligned_empty(self.plan.arena_bytes, self.plan.alignment)

    # -- calls ----------------------------------------------------------------------------
    def call(self, inputs: list[np.ndarray], dims: list[int], outputs: list[np.ndarray],
             arena: np.ndarray, weights: np.ndarray | None = None, arena_bytes: int | None = None,
             checkpoints: list[np.ndarray | None] | None = None,
             inject: list[np.ndarray | None] | None = None) -> tuple[int, str]:
        """Raw entry point: returns (status, message) and never raises on a C-side refusal."""
        weights = self.weights if weights is None else weights
        err = ctypes.create_string_buffer(512)
        vp = ctypes.c_void_p
        c_in = (vp * max(1, len(inputs)))(*[a.ctypes.data for a in inputs])
        c_out = (vp * max(1, len(outputs)))(*[a.ctypes.data for a in outputs])
        c_dims = (ctypes.c_int64 * max(1, len(dims)))(*dims)
        c_ck = None
        if checkpoints is not None:
            c_ck = (vp * max(1, len(checkpoints)))(*[None if a is None else a.ctypes.data for a in checkpoints])
        c_inj = None
        if inject is not None:
            c_inj = (vp * max(1, len(inject)))(*[None if a is None else a.ctypes.data for a in inject])
        status = self._run(weights.ctypes.data, weights.nbytes, arena.ctypes.data,
                           arena.nbytes if arena_bytes is None else arena_bytes,
                           c_dims, c_in, c_out, c_ck, c_inj, err, len(err))
        return status, err.value.decode(errors="replace")

    def _output_arrays(self, dims: dict[str, int], ins: list[np.ndarray], given: dict) -> list[np.ndarray]:
        """The output arrays: `given` ones checked (and against `ins`: inputs and the arena), fresh ones else."""
        g = self.graph
        unknown = sorted(set(given) - set(g.outputs))
        if unknown:
            raise ValueError(f"circuit '{g.name}': out {unknown}: not outputs of this circuit (outputs: {g.outputs})")
        outs = []
        for name in g.outputs:
            shape, dtype = self.shape_of(name, dims), np.dtype(NP_DTYPES[g.tensors[name].dtype])
            arr = given.get(name)
            if arr is None:
                outs.append(np.empty(shape, dtype=dtype))
                continue
            if not isinstance(arr, np.ndarray) or arr.dtype != dtype or arr.shape != shape:
                got = f"{arr.dtype} {arr.shape}" if isinstance(arr, np.ndarray) else type(arr).__name__
                raise ValueError(f"out '{name}': {got}, expected {dtype} {shape}")
            if not arr.flags.c_contiguous or not arr.flags.writeable:
                raise ValueError(f"out '{name}': must be C-contiguous and writeable")
            if any(np.shares_memory(arr, other) for other in ins + outs):
                raise ValueError(f"out '{name}': shares memory with an input, the arena or another output")
            outs.append(arr)
        return outs

    def run(self, inputs: dict[str, np.ndarray], arena: np.ndarray | None = None,
            with_checkpoints: bool = False, dims: dict[str, int] | None = None,
            inject: dict[str, np.ndarray] | None = None, out: dict[str, np.ndarray] | None = None) -> RunResult:
        """dims: values of runtime dims that no input's shape carries (see infer_dims).
        inject: checkpoint name -> array that replaces that tensor once produced (teacher forcing).
        out: output name -> caller-owned array the run writes (exact shape and dtype, C-contiguous,
        writeable, sharing no memory with an input or another output), as the arena is caller-owned;
        outputs not named get a fresh array. (Reusing them measured no faster here.)"""
        g = self.graph
        dims = self.infer_dims(inputs, dims)
        ins = [_as_dtype(f"input '{name}'", inputs[name], NP_DTYPES[g.tensors[name].dtype]) for name in g.inputs]
        if arena is not None and (not isinstance(arena, np.ndarray) or not arena.flags.c_contiguous
                                  or not arena.flags.writeable):
            raise ValueError(f"circuit '{g.name}': the arena must be a C-contiguous, writeable ndarray")
        outs = self._output_arrays(dims, ins + ([] if arena is None else [arena]), out or {})
        cks = None
        if with_checkpoints:
            cks = [np.empty(self.shape_of(c.tensor, dims), dtype=NP_DTYPES[g.tensors[c.tensor].dtype])
                   for c in g.checkpoints]
        inj = None
        if inject:
            names = [c.name for c in g.checkpoints]
            unknown = sorted(set(inject) - set(names))
            if unknown:
                raise ValueError(f"circuit '{g.name}': cannot inject {unknown}: not checkpoints of this circuit")
            inj = []
            for c in g.checkpoints:
                if c.name not in inject:
                    inj.append(None)
                    continue
                want = self.shape_of(c.tensor, dims)
                arr = _as_dtype(f"inject '{c.name}'", inject[c.name], NP_DTYPES[g.tensors[c.tensor].dtype])
                if arr.shape != want:
                    raise ValueError(f"inject '{c.name}': shape {arr.shape}, expected {want}")
                inj.append(arr)
        status, msg = self.call(ins, [dims[d] for d in g.dims], outs,
                                self.new_arena() if arena is None else arena, checkpoints=cks, inject=inj)
        if status != 0:
            raise KccRunError(status, f"circuit '{g.name}': {msg}")
        result = RunResult(dict(zip(g.outputs, outs)))
        if cks is not None:
            result.checkpoints = {c.name: a for c, a in zip(g.checkpoints, cks)}
        return result
