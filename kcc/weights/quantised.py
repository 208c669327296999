"""Int8 provenance of a checkpoint weight: the int8 values and per-row scales it is made of.

A checkpoint imported from the int8 ONNX export knows, for many of its FP32 tensors, that the
tensor is exactly `float32(q * scale[row])` with `q` int8 and one f32 scale per row (axis 0: a
Linear's output channel, an LSTM gate row, an embedding row). Lowering then packs `q` and the
scales instead of the FP32 copy (4x fewer bytes) for kernels that dequantise in registers.

Why this stays bit-exact: an int8 (8 significant bits) times an f32 scale (24 bits) is exact in
f64, so rounding that product to f32 once (the importer's path, in f64) and multiplying
`(float)q * scale` in f32 (the kernels' path, one rounding) give the same f32 number; the
kernels then run the FP32 path's accumulation on the same weights.

Only symmetric quantisation (zero point 0) is recorded: that is every MatMulInteger, LSTM and
embedding of the export; its ConvIntegers (uint8, zero point != 0) keep the FP32 path.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


class QuantisedError(ValueError):
    """A claimed int8 provenance does not reproduce its FP32 tensor; the message names it."""


@dataclass(frozen=True)
class Quantised:
    q: np.ndarray          # int8, the FP32 tensor's shape and layout
    scale: np.ndarray      # float32 [q.shape[0]], one scale per row

    def dequantise(self) -> np.ndarray:
        """The FP32 tensor: float32(q * scale[row]), the product exact in f64 and rounded once."""
        s = self.scale.astype(np.float64).reshape((-1,) + (1,) * (self.q.ndim - 1))
        return (self.q.astype(np.float64) * s).astype(np.float32)

    @property
    def nbytes(self) -> int:
        return self.q.nbytes + self.scale.nbytes


def symmetric(q: np.ndarray, zero_point: np.ndarray, scale: np.ndarray) -> Quantised | None:
    """Quantised(q, per-row scale) when q is int8 with zero point 0 everywhere, else None.

    `scale` is one value per row or one for the whole tensor (broadcast to every row)."""
    if q.dtype != np.int8 or np.any(np.asarray(zero_point) != 0):
        return None
    rows = q.shape[0]
    s = np.asarray(scale, dtype=np.float32).reshape(-1)
    if s.size == 1:
        s = np.full(rows, s[0], np.float32)
    if s.size != rows:
        raise QuantisedError(f"{s.size} scales for an int8 tensor of {rows} rows")
    q = np.ascontiguousarray(q)
    q.setflags(write=False)
    s.setflags(write=False)
    return Quantised(q, s)


def check_exact(name: str, quant: Quantised, value: np.ndarray) -> None:
    """Refuse a provenance that does not give back `value` bit for bit."""
    if quant.q.shape != value.shape or not np.array_equal(quant.dequantise(), value):
        raise QuantisedError(f"'{name}': its int8 values and scales do not reproduce the FP32 tensor")


def from_exact(name: str, w: np.ndarray) -> Quantised:
    """The int8 provenance of a weight given without one (an int8 op lowered by name, as the op
    harness does): scale = max|row| / 127 per row, accepted only if it reproduces `w` exactly."""
    w = np.asarray(w, dtype=np.float32)
    if w.ndim < 1 or w.shape[0] < 1:
        raise QuantisedError(f"'{name}': an int8 weight needs at least one row, got shape {w.shape}")
    top = np.abs(w.reshape(w.shape[0], -1).astype(np.float64)).max(axis=1)
    scale = (top / 127.0).astype(np.float32)
    s = scale.astype(np.float64).reshape((-1,) + (1,) * (w.ndim - 1))
    q = np.rint(np.divide(w, s, out=np.zeros(w.shape), where=s > 0))
    if np.any(np.abs(q) > 127):
        raise QuantisedError(f"'{name}': not int8 * a per-row scale")
    quant = Quantised(q.astype(np.int8), scale)
    check_exact(name, quant, w)
    return quant
