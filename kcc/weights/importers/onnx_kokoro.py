"""Import Kokoro-82M v1.0 weights from an ONNX export into the kokoro-v1_0.pth layout: the int8
export (kcc's default model), and the float graphs of kokoro-onnx's release (fp32; fp16, whose
half weights are widened to fp32), whose LSTMs are plain ONNX LSTM nodes.

Usage: kcc import-onnx kokoro-v1.0.int8.onnx -o kokoro.pth [--report report.json]

Every weight-bearing node (MatMulInteger, ConvInteger, DynamicQuantizeLSTM, quantised Gather,
float Conv/ConvTranspose/MatMul/LSTM) is dequantised to FP32 and placed by its node scope path
(`/decoder/decoder/generator/ups.0/ConvTranspose` -> `decoder.generator.ups.0`); every float
initialiser that still carries its parameter name (biases, norms, Snake alphas) is placed by
that name. Weight-normed layers arrive folded and are split back into weight_g / weight_v.
The target key set and shapes come from kcc/data/kokoro_layout.json (upstream's layout), so a tensor that lands
nowhere, a target that stays empty, or a shape that disagrees stops the import with its name.
Two groups are not in the ONNX at all and are recorded as such in the report:
  - the AdaIN InstanceNorm affine params (untrained: upstream keeps affine=True only for an old
    ONNX exporter bug, the export drops them): written as weight 1 / bias 0, which is exactly
    what the ONNX graph computes;
  - the ALBERT pooler (bert.pooler.*), which Kokoro never uses: left out of the file.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from kcc.weights.checkpoint import Checkpoint
from kcc.weights.importers.onnx_graph import (
    GraphIndex,
    OnnxImportError,
    dequant_conv_integer,
    dequant_gather,
    dequant_lstm,
    dequant_matmul_integer,
    float_lstm,
    quantised_gather,
    quantised_lstm,
    quantised_matmul_integer,
    weight_norm_split,
)
from kcc.weights.quantised import Quantised, check_exact
from kcc.weights.real_model import MODEL_LABEL as LABEL
from kcc.weights.torch_zip import save_torch_zip

# ONNX scope root -> state-dict section(.prefix). Longest first; F0/N/shared/*_proj are called
# directly under /encoder but live in the predictor.
_SCOPE_ROOTS = (
    ("encoder/bert_encoder", "bert_encoder"),
    ("encoder/bert", "bert"),
    ("encoder/text_encoder", "text_encoder"),
    ("encoder/predictor", "predictor"),
    ("encoder", "predictor"),
    ("decoder/decoder", "decoder"),
)
# Parameter-named initialisers: name prefix -> section.
_NAME_ROOTS = (
    ("encoder.bert_encoder.", "bert_encoder."),
    ("encoder.bert.", "bert."),
    ("encoder.text_encoder.", "text_encoder."),
    ("encoder.predictor.", "predictor."),
    ("decoder.decoder.", "decoder."),
)
# Export-only tensors (the export's own STFT bases), not model parameters.
_EXPORT_ONLY = re.compile(r"^decoder\.generator\.(stft|istft)\.")
_QUANT_SUFFIX = re.compile(r"_(quantized|scale|zero_point|quantized_reshape_shape)$")
# Targets the ONNX cannot provide, and what the import does about them.
_ADAIN_NORM = re.compile(r"^(.*)\.norm\.(weight|bias)$")  # AdaIN1d.norm, beside AdaIN1d.fc
_ABSENT = re.compile(r"^bert\.pooler\.")


@dataclass
class ImportReport:
    source: str
    label: str = LABEL
    n_target: int = 0
    n_mapped: int = 0
    params_target: int = 0
    params_mapped: int = 0
    defaulted: dict[str, str] = field(default_factory=dict)   # key -> value written and why
    absent: list[str] = field(default_factory=list)            # keys left out of the file
    export_only: list[str] = field(default_factory=list)       # ONNX tensors that are not parameters
    zero_channels: dict[str, int] = field(default_factory=dict)  # weight-normed key -> all-zero channels
    sources: dict[str, str] = field(default_factory=dict)      # key -> ONNX node / initialiser it came from

    @property
    def tensor_fraction(self) -> float:
        return self.n_mapped / self.n_target

    @property
    def param_fraction(self) -> float:
        return self.params_mapped / self.params_target

    def summary(self) -> str:
        zc = sum(self.zero_channels.values())
        return (f"{self.n_mapped} of {self.n_target} tensors mapped exactly "
                f"({100 * self.param_fraction:.2f}% of {self.params_target:,} parameters); "
                f"{len(self.defaulted)} defaulted (AdaIN InstanceNorm affine 1/0), {len(self.absent)} absent "
                f"(ALBERT pooler, unused); {zc} all-zero channels in {len(self.zero_channels)} weight-normed layers")

    def to_json(self) -> dict:
        d = asdict(self)
        d.update(tensor_fraction=self.tensor_fraction, param_fraction=self.param_fraction)
        return d


_LAYOUT_TABLE = Path(__file__).resolve().parents[2] / "data" / "kokoro_layout.json"


def target_layout() -> dict[str, tuple[int, ...]]:
    """'section.key' -> shape of the real kokoro-v1_0.pth layout, from the table shipped in the
    package (made from upstream by scripts/make_layout_table.py, checked by a test)."""
    doc = json.loads(_LAYOUT_TABLE.read_text(encoding="utf-8"))
    return {k: tuple(v) for k, v in doc["tensors"].items()}


_INT8_TABLE = Path(__file__).resolve().parents[2] / "data" / "kokoro_int8.json"


def int8_tensors() -> list[str]:
    """The tensors import_onnx_quantised records with int8 provenance from the real export (the
    table shipped in the package, made by scripts/make_int8_table.py, checked by a test)."""
    return json.loads(_INT8_TABLE.read_text(encoding="utf-8"))["int8"]


def skeleton() -> Checkpoint:
    """What import_onnx_quantised makes of the real export with every value zero: the same tensor
    names and shapes and the same int8 provenance. The generated C depends on those and the build
    options only (the values live in the weight blob), so this builds the default model's stage
    libraries without its weights (kcc.model.prebuilt_build, at wheel build time)."""
    tensors = {k: _frozen(np.zeros(shape, np.float32)) for k, shape in target_layout().items()
               if not _ABSENT.match(k)}
    quant = {k: Quantised(_frozen(np.zeros(tensors[k].shape, np.int8)),
                          _frozen(np.ones(tensors[k].shape[0], np.float32))) for k in int8_tensors()}
    return Checkpoint(path=_INT8_TABLE, tensors=tensors, quant=quant)


def _frozen(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def scope_module(node_name: str) -> str | None:
    """'/decoder/decoder/generator/resblocks.0/convs1.0/Conv_quant' -> 'decoder.generator.resblocks.0.convs1.0'."""
    path = node_name.strip("/")
    for root, section in _SCOPE_ROOTS:
        if path == root or path.startswith(root + "/"):
            segs = path[len(root):].strip("/").split("/")[:-1]  # drop the op's own name
            out: list[str] = []
            for s in segs:
                s = re.sub(r"_\d+$", "", s)  # query_3: the 4th call of a shared module
                if out and s.startswith(out[-1] + "."):
                    out[-1] = s  # 'cnn.0/cnn.0.0': the child scope repeats its parent's path
                else:
                    out.append(s)
            return ".".join([section] + out)
    return None


def name_key(init_name: str) -> str | None:
    for prefix, section in _NAME_ROOTS:
        if init_name.startswith(prefix):
            return section + _QUANT_SUFFIX.sub("", init_name[len(prefix):])
    return None


class _Builder:
    def __init__(self, targets: dict[str, tuple[int, ...]], report: ImportReport):
        self.targets = targets
        self.report = report
        self.out: dict[str, np.ndarray] = {}
        self.quant: dict[str, Quantised] = {}     # key -> the int8 values + scales it is exactly

    def put(self, key: str, value: np.ndarray, source: str, quant: Quantised | None = None) -> None:
        if key not in self.targets:
            raise OnnxImportError(f"{source}: maps to '{key}', which is not a kokoro-v1_0.pth tensor")
        want = self.targets[key]
        if tuple(value.shape) != want:
            if int(np.prod(value.shape)) == int(np.prod(want)) and \
                    tuple(d for d in value.shape if d != 1) == tuple(d for d in want if d != 1):
                value = value.reshape(want)  # e.g. a bias stored [1, C, 1]
            else:
                raise OnnxImportError(f"{source}: '{key}' has shape {tuple(value.shape)}, the layout wants {want}")
        if not np.all(np.isfinite(value)):
            raise OnnxImportError(f"{source}: '{key}' holds non-finite values")
        if key in self.out:
            if not np.array_equal(self.out[key], value):  # a shared weight used by many nodes
                raise OnnxImportError(f"{source}: '{key}' already set from {self.report.sources[key]} "
                                      "with different values")
            return
        self.out[key] = np.ascontiguousarray(value, dtype=np.float32)
        self.report.sources[key] = source
        if quant is not None and quant.q.shape == tuple(value.shape):
            check_exact(key, quant, self.out[key])
            self.quant[key] = quant

    def put_weight(self, module: str, w: np.ndarray, source: str, quant: Quantised | None = None) -> None:
        """A dense weight for `module`: stored as .weight, or split when the layer is weight-normed
        (the split halves are not int8 * scale, so `quant` is then not recorded)."""
        if f"{module}.weight_v" in self.targets:
            g, v, zeros = weight_norm_split(w)
            self.put(f"{module}.weight_g", g, source)
            self.put(f"{module}.weight_v", v, source)
            if zeros:
                self.report.zero_channels[module] = zeros
        else:
            self.put(f"{module}.weight", w, source, quant)


def _check_name(node, init_name: str, module: str) -> None:
    """Where the weight initialiser keeps its parameter name, it must agree with the node scope."""
    k = name_key(init_name)
    if k is not None and k.rsplit(".", 1)[0] != module:
        raise OnnxImportError(f"node {node.name}: scope says '{module}' but its weight is named '{init_name}'")


def _map_nodes(g: GraphIndex, b: _Builder) -> set[str]:
    """Dequantise and place every weight-bearing node; returns the initialisers consumed."""
    used: set[str] = set()
    for node in g.nodes:
        op = node.op_type
        weight_slot = {"MatMulInteger": 1, "ConvInteger": 1, "Conv": 1, "ConvTranspose": 1,
                       "MatMul": 1, "Gather": 0, "DynamicQuantizeLSTM": 1, "LSTM": 1}.get(op)
        if weight_slot is None or len(node.input) <= weight_slot or node.input[weight_slot] not in g.init:
            continue
        wname = node.input[weight_slot]
        if op == "Gather" and g.init[wname].dtype not in (np.int8, np.uint8):
            continue  # shape/index bookkeeping, not an embedding
        module = scope_module(node.name)
        if module is None:
            raise OnnxImportError(f"node {node.name} ({op}) holds weight '{wname}' outside any known scope")
        nk = name_key(wname)
        if _EXPORT_ONLY.match(module) or (nk and _EXPORT_ONLY.match(nk)):
            b.report.export_only.append(wname)
            used.add(wname)
            continue
        _check_name(node, wname, module)
        src = f"{op} {node.name}"
        if op == "MatMulInteger":
            b.put_weight(module, dequant_matmul_integer(g, node), src, quantised_matmul_integer(g, node))
        elif op == "ConvInteger":
            b.put_weight(module, dequant_conv_integer(g, node), src)
        elif op in ("Conv", "ConvTranspose"):
            b.put_weight(module, g.init[wname].astype(np.float32), src)
        elif op == "MatMul":
            b.put_weight(module, g.init[wname].astype(np.float32).T, src)
        elif op == "Gather":
            b.put_weight(module, dequant_gather(g, node), src, quantised_gather(g, node))
        elif op == "LSTM":  # the fp32 / fp16 export's; its bias is a node input too
            for leaf, v in float_lstm(g, node).items():
                b.put(f"{module}.{leaf}", v, src)
            if len(node.input) > 3 and node.input[3]:
                used.add(node.input[3])
        else:  # DynamicQuantizeLSTM; its bias is a node input, not parameter-named
            quant = quantised_lstm(g, node)
            for leaf, v in dequant_lstm(g, node).items():
                b.put(f"{module}.{leaf}", v, src, quant.get(leaf))
            used.add(node.input[3])
        used.add(wname)
    return used


def _map_named(g: GraphIndex, b: _Builder, used: set[str]) -> None:
    """Place every float initialiser that still carries its parameter name."""
    for name, arr in g.init.items():
        if name in used or _QUANT_SUFFIX.search(name) or arr.dtype not in (np.float32, np.float16):
            continue
        key = name_key(name)
        if key is None:
            continue  # graph constants (shapes, folded 1/alpha, pi, ...): not parameters
        if _EXPORT_ONLY.match(key):
            b.report.export_only.append(name)
            continue
        b.put(key, arr, f"initialiser {name}")


def import_onnx(onnx_path, targets: dict | None = None,
                graph: GraphIndex | None = None) -> tuple[dict[str, dict[str, np.ndarray]], ImportReport]:
    """Return ({section: {'module.'+key: fp32 array}}, report) in the builder's key order.

    `targets` ('section.key' -> shape) defaults to target_layout(); `graph` to the
    loaded ONNX (both injectable so a caller can reuse them).
    """
    sections, _quant, report = import_onnx_quantised(onnx_path, targets, graph)
    return sections, report


def import_onnx_quantised(onnx_path, targets: dict | None = None, graph: GraphIndex | None = None
                          ) -> tuple[dict[str, dict[str, np.ndarray]], dict[str, Quantised], ImportReport]:
    """import_onnx's (sections, report) plus the int8 provenance side table: 'section.key' ->
    Quantised for every tensor that is exactly int8 * per-row scale (kcc.weights.quantised):
    the Linear (MatMulInteger), LSTM and embedding weights; not the weight-normed convs."""
    g = GraphIndex.load(onnx_path) if graph is None else graph
    targets = target_layout() if targets is None else targets
    report = ImportReport(source=str(onnx_path))
    b = _Builder(targets, report)
    try:
        _map_named(g, b, _map_nodes(g, b))
    except OnnxImportError:
        raise
    except (ValueError, TypeError, IndexError, KeyError, AttributeError, MemoryError, RecursionError) as exc:
        # a node or initializer not shaped as the Kokoro export's (a missing attribute, a 1-D weight...)
        raise OnnxImportError(f"{onnx_path}: not the Kokoro export's graph: {type(exc).__name__}: {exc}") from None
    missing = []
    for key, shape in targets.items():
        if key in b.out:
            continue
        if _ABSENT.match(key):
            report.absent.append(key)
        elif (m := _ADAIN_NORM.match(key)) and f"{m.group(1)}.fc.weight" in targets:
            fill = 1.0 if key.endswith(".weight") else 0.0
            b.out[key] = np.full(shape, fill, np.float32)
            report.defaulted[key] = f"{fill:g} (InstanceNorm affine, not in the ONNX export)"
        else:
            missing.append(key)
    if missing:
        raise OnnxImportError(f"{onnx_path}: {len(missing)} kokoro-v1_0.pth tensor(s) found no ONNX source: "
                              + ", ".join(missing[:12]) + (" ..." if len(missing) > 12 else ""))
    report.n_target = len(targets)
    report.n_mapped = len(report.sources)
    report.params_target = int(sum(np.prod(s) for s in targets.values()))
    report.params_mapped = int(sum(np.prod(targets[k]) for k in report.sources))
    sections: dict[str, dict[str, np.ndarray]] = {}
    for key in targets:
        if key in b.out:
            sec, rest = key.split(".", 1)
            sections.setdefault(sec, {})[f"module.{rest}"] = b.out[key]
    return sections, b.quant, report


def save_checkpoint(sections: dict[str, dict[str, np.ndarray]], out_path) -> Path:
    """Write the dict of state dicts as upstream's loader expects (a torch zip, written by
    kcc.weights.torch_zip without torch; torch.load(weights_only=True) reads it), atomically."""
    return save_torch_zip(sections, out_path)


def main(onnx_path, out_path, report_path=None) -> ImportReport:
    sections, report = import_onnx(onnx_path)
    save_checkpoint(sections, out_path)
    if report_path:
        Path(report_path).write_text(json.dumps(report.to_json(), indent=1) + "\n")
    return report
