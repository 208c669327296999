"""The checks every reduced-precision (bf16, int8) conv test makes of its compiled op, in one place."""
from __future__ import annotations

import numpy as np


def assert_reduced_precision(cc, feeds: dict, ref: np.ndarray, f64_ref: np.ndarray, taps: int) -> None:
    """cc's output "y" equals `ref` (float64 on the precision's own rounded inputs) to f32 summation
    error over `taps` products, differs from the unrounded `f64_ref` by that precision's rounding
    (far above f32's, far below a wrong result), and is bit-identical at 1 and 3 threads."""
    got = cc.run(feeds).outputs["y"]
    scale = np.abs(ref).max()
    assert np.abs(got - ref).max() <= 2e-6 * scale * np.sqrt(taps), np.abs(got - ref).max()
    f32_err = np.abs(got - f64_ref).max()
    assert 1e-4 * scale < f32_err < 3e-2 * scale, f32_err / scale
    cc.set_threads(1)
    one = cc.run(feeds).outputs["y"]
    cc.set_threads(3)
    assert np.array_equal(one, cc.run(feeds).outputs["y"])
