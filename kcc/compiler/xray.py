"""X-Ray: compare generated-C checkpoints with a pinned upstream capture, one by one.

A pinned capture is an .npz under fixtures/captures whose SHA-256 is recorded in MANIFEST.json;
`load_pinned` refuses to return data whose bytes drifted. `compare` applies the FP32 gate to
each checkpoint in circuit order (a one-checkpoint circuit compares as itself) and records the
worst element. `render` prints the table, the provenance of both sides, and the status of
every stage of the full Kokoro graph: a stage with no passing evidence is NOT_TESTED.
"""
from __future__ import annotations

import hashlib
import io
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "captures"


@dataclass(frozen=True)
class Gate:
    min_cosine: float = 0.99999
    max_rmse: float = 2e-5
    max_rel_rmse: float = 2e-5
    max_abs: float = 2e-5


FP32_GATE = Gate()

# The whole Kokoro graph in order, and the checkpoint that evidences each stage.
STAGES: list[tuple[str, str]] = [
    ("phoneme_encoder.embeddings", "kokoro.phoneme_encoder.embeddings"),
    ("complete_kokoro_encoder", "kokoro.phoneme_encoder.bert_encoder"),
    ("text_encoder", "kokoro.text_encoder.output"),
    ("duration_predictor", "kokoro.predictor.durations"),
    ("alignment_expansion", "kokoro.predictor.expanded"),
    ("prosody_f0_n", "kokoro.predictor.f0"),
    ("decoder", "kokoro.decoder.generator_input"),
    ("generator", "kokoro.generator.conv_post"),
    ("generated_waveform", "kokoro.waveform"),
]


class PinnedCaptureError(Exception):
    """A pinned capture is missing, unrecorded, or its bytes differ from the manifest."""


@dataclass
class PinnedCapture:
    file: Path
    meta: dict
    inputs: dict[str, np.ndarray]
    checkpoints: dict[str, np.ndarray]


def load_pinned(name: str, config: str, root: Path = FIXTURES) -> PinnedCapture:
    fname = f"{name}.{config}.npz"
    path = root / fname
    manifest_path = root / "MANIFEST.json"
    if not manifest_path.exists():
        raise PinnedCaptureError(f"{manifest_path}: capture manifest is missing")
    manifest = json.loads(manifest_path.read_text())
    if fname not in manifest:
        raise PinnedCaptureError(f"{fname}: not recorded in {manifest_path}")
    if not path.exists():
        raise PinnedCaptureError(f"{path}: pinned capture file is missing")
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != manifest[fname]["sha256"]:
        raise PinnedCaptureError(f"{path}: SHA-256 {digest} differs from the manifest's "
                                 f"{manifest[fname]['sha256']}: the fixture drifted; refusing to compare")
    with np.load(io.BytesIO(raw)) as z:
        inputs = {k[len("input/"):]: z[k] for k in z.files if k.startswith("input/")}
        checkpoints = {k[len("checkpoint/"):]: z[k] for k in z.files if k.startswith("checkpoint/")}
    return PinnedCapture(path, manifest[fname], inputs, checkpoints)


@dataclass
class CheckpointResult:
    name: str
    status: str                  # PASS | FAIL
    shape: tuple
    cosine: float
    rmse: float
    rel_rmse: float
    max_abs: float
    snr_db: float
    finite: bool
    worst_index: tuple
    worst_candidate: float
    worst_reference: float
    gate: Gate = field(default_factory=Gate)
    reason: str = ""


def _failed(name: str, shape: tuple, gate: Gate, reason: str) -> CheckpointResult:
    """A checkpoint that could not be compared at all: worst possible figures, and why."""
    return CheckpointResult(name, "FAIL", shape, math.nan, math.inf, math.inf, math.inf, -math.inf,
                            False, (), math.nan, math.nan, gate, reason)


def compare_arrays(name: str, reference: np.ndarray, candidate: np.ndarray, gate: Gate = FP32_GATE) -> CheckpointResult:
    ref = np.asarray(reference, dtype=np.float64)
    cand = np.asarray(candidate, dtype=np.float64)
    if ref.shape != cand.shape:
        return _failed(name, cand.shape, gate, f"shape {cand.shape} differs from reference {ref.shape}")
    finite = bool(np.isfinite(cand).all() and np.isfinite(ref).all())
    diff = cand - ref
    rmse = float(np.sqrt(np.mean(diff * diff))) if diff.size else 0.0
    ref_rms = float(np.sqrt(np.mean(ref * ref))) if ref.size else 0.0
    rel = rmse / ref_rms if ref_rms > 0 else (0.0 if rmse == 0 else math.inf)
    denom = float(np.linalg.norm(ref) * np.linalg.norm(cand))
    cosine = float(np.sum(ref * cand) / denom) if denom > 0 else (1.0 if rmse == 0 else 0.0)
    absdiff = np.abs(diff)
    flat = int(np.nanargmax(absdiff)) if absdiff.size and finite else 0
    idx = tuple(int(i) for i in np.unravel_index(flat, ref.shape)) if ref.size else ()
    max_abs = float(absdiff.reshape(-1)[flat]) if absdiff.size else 0.0
    if not finite:
        max_abs = math.inf
    noise = float(np.sum(diff * diff))
    snr = math.inf if noise == 0 else 10 * math.log10(float(np.sum(ref * ref)) / noise) if np.sum(ref * ref) > 0 else -math.inf
    failures = []
    if not finite:
        failures.append("non-finite values")
    if cosine < gate.min_cosine:
        failures.append(f"cosine {cosine:.7f} < {gate.min_cosine}")
    if rmse > gate.max_rmse:
        failures.append(f"rmse {rmse:.3e} > {gate.max_rmse}")
    if rel > gate.max_rel_rmse:
        failures.append(f"rel_rmse {rel:.3e} > {gate.max_rel_rmse}")
    if max_abs > gate.max_abs:
        failures.append(f"max_abs {max_abs:.3e} > {gate.max_abs}")
    return CheckpointResult(name, "FAIL" if failures else "PASS", ref.shape, cosine, rmse, rel, max_abs, snr,
                            finite, idx, float(cand.reshape(-1)[flat]) if cand.size else math.nan,
                            float(ref.reshape(-1)[flat]) if ref.size else math.nan, gate, "; ".join(failures))


def side_manifest(backend: str, source: str, checkpoint_order: list[str], **extra) -> dict:
    return {"backend": backend, "source": source, "checkpoint_order": list(checkpoint_order), **extra}


@dataclass
class XrayReport:
    circuit: str
    results: list[CheckpointResult]
    candidate: dict
    reference: dict

    @property
    def passed(self) -> bool:
        return all(r.status in ("PASS", "INJECTED") for r in self.results) \
            and any(r.status == "PASS" for r in self.results)

    def result(self, name: str) -> CheckpointResult:
        return next(r for r in self.results if r.name == name)

    def stage_status(self) -> list[tuple[str, str, str]]:
        by_name = {r.name: r for r in self.results}
        rows = []
        for stage, ck in STAGES:
            r = by_name.get(ck)
            if r is None:
                rows.append((stage, "NOT_TESTED", "no checkpoint in this report"))
            else:
                rows.append((stage, r.status, f"max_abs {r.max_abs:.3e}, {r.snr_db:.1f} dB"))
        return rows

    def to_json(self) -> dict:
        return {"circuit": self.circuit, "passed": self.passed,
                "candidate": self.candidate, "reference": self.reference,
                "results": [{**asdict(r), "gate": asdict(r.gate)} for r in self.results],
                "stages": [dict(zip(("stage", "status", "evidence"), s)) for s in self.stage_status()]}


def compare(circuit: str, reference: dict[str, np.ndarray], candidate: dict[str, np.ndarray],
            order: list[str], candidate_manifest: dict, reference_manifest: dict,
            gates: dict[str, Gate] | None = None) -> XrayReport:
    """Compare every checkpoint in `order`; a checkpoint missing from either side FAILs."""
    gates = gates or {}
    results = []
    for name in order:
        gate = gates.get(name, FP32_GATE)
        if name not in reference:
            results.append(_failed(name, (), gate, "absent from the pinned capture"))
        elif name not in candidate:
            results.append(_failed(name, (), gate, "not produced by the candidate"))
        else:
            results.append(compare_arrays(name, reference[name], candidate[name], gate))
    return XrayReport(circuit, results, candidate_manifest, reference_manifest)


def render(report: XrayReport) -> str:
    L = [f"X-Ray: circuit {report.circuit}",
         f"  candidate: backend {report.candidate.get('backend')}, source {report.candidate.get('source')}, "
         f"library {report.candidate.get('library_path', '?')} sha256 {report.candidate.get('library_sha256', '?')[:16]}",
         f"  reference: backend {report.reference.get('backend')}, source {report.reference.get('source')}, "
         f"{report.reference.get('file', '?')} sha256 {str(report.reference.get('sha256', '?'))[:16]} "
         f"versions {report.reference.get('versions', {})}",
         f"  {'checkpoint':58s} {'status':6s} {'cosine':>10s} {'rmse':>9s} {'rel_rmse':>9s} {'max_abs':>9s} {'snr_dB':>7s}  worst"]
    for r in report.results:
        worst = (f"{list(r.worst_index)} cand {r.worst_candidate:.7g} ref {r.worst_reference:.7g}"
                 if r.worst_index else "")
        L.append(f"  {r.name:58s} {r.status:6s} {r.cosine:10.7f} {r.rmse:9.2e} {r.rel_rmse:9.2e} "
                 f"{r.max_abs:9.2e} {r.snr_db:7.1f}  {worst}" + (f"  [{r.reason}]" if r.reason else ""))
    L.append(f"  overall: {'PASS' if report.passed else 'FAIL'}")
    L.append("  full-model stages:")
    for stage, status, evidence in report.stage_status():
        L.append(f"    {stage:30s} {status:10s} {evidence}")
    return "\n".join(L)


def find_capture(capture: str, checkpoint_digest: str, root: Path = FIXTURES) -> str:
    """The config whose pinned `capture` was made from the checkpoint with this digest."""
    manifest_path = root / "MANIFEST.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
    for fname, meta in sorted(manifest.items()):
        if meta.get("capture") == capture and meta.get("checkpoint_digest") == checkpoint_digest:
            return meta["config"]
    raise PinnedCaptureError(
        f"no pinned '{capture}' capture was made from a checkpoint with digest {checkpoint_digest[:16]}...; "
        f"make one with: python -m oracle.capture {capture} --config ...")


def _dims_from_checkpoints(g, pinned: PinnedCapture) -> dict[str, int]:
    """Dims no input's shape carries (a frame count the caller computes from durations) are
    read from the reference checkpoints' shapes; the C side still checks them (e.g. sum == F)."""
    carried = {e for n in g.inputs for e in g.tensors[n].shape if isinstance(e, str)}
    dims: dict[str, int] = {}
    for c in g.checkpoints:
        ref = pinned.checkpoints.get(c.name)
        shape = g.tensors[c.tensor].shape
        if ref is None or ref.ndim != len(shape):
            continue
        for e, n in zip(shape, ref.shape):
            if isinstance(e, str) and e in g.dims and e not in carried:
                dims.setdefault(e, int(n))
    return dims


def xray_compiled(compiled, pinned: PinnedCapture, gates: dict[str, Gate] | None = None,
                  inject: list[str] = ()) -> XrayReport:
    """Run the compiled circuit on the capture's inputs and compare every checkpoint.

    inject: checkpoints whose reference values replace ours as soon as they are produced
    (teacher forcing), so the stages after an ill-conditioned tensor are judged on their own;
    those checkpoints are reported as INJECTED, never as evidence."""
    g = compiled.graph
    if gates is None:
        gates = {c.name: Gate(**{k: v for k, v in c.gate.items() if k != "why"}) for c in g.checkpoints if c.gate}
    inputs = {k: v for k, v in pinned.inputs.items() if k in g.inputs}
    absent = [n for n in inject if n not in pinned.checkpoints]
    if absent:
        raise PinnedCaptureError(f"{pinned.file.name}: cannot inject {absent}: not in the capture")
    result = compiled.run(inputs, with_checkpoints=True, dims=_dims_from_checkpoints(g, pinned),
                          inject={n: pinned.checkpoints[n] for n in inject})
    order = [c.name for c in g.checkpoints]
    cand = side_manifest("kcc", "generated_native", order, library_path=compiled.library_path,
                         library_sha256=compiled.built.sha256, flags=list(compiled.built.flags),
                         weights_sha256=compiled.weights_sha256)
    ref = side_manifest(pinned.meta.get("backend", "pytorch"), pinned.meta.get("source", "pinned_capture"),
                        pinned.meta.get("checkpoint_order", []), file=pinned.file.name,
                        sha256=pinned.meta["sha256"], versions=pinned.meta.get("versions", {}))
    cand["injected"] = list(inject)
    report = compare(g.name, pinned.checkpoints, result.checkpoints, order, cand, ref, gates)
    for r in report.results:
        if r.name in inject:
            r.status, r.reason = "INJECTED", "reference value injected (teacher forcing)"
    return report
