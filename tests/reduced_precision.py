"""The checks every reduced-precision (bf16, int8) conv test makes of its compiled op, in one place.
No tolerance is chosen: both bounds are computed from the operands.

  - the kernel's own arithmetic (f32 sums of `taps` products of the rounded operands, then bias,
    activation and residual) is within Higham's recursive-summation bound (taps + 3) u32 of the
    magnitudes it adds, elementwise;
  - its difference from the unrounded float64 conv is within the operands' rounding as the
    triangle inequality gives it exactly, x^w^ - xw = (x^ - x) w^ + x (w^ - w), summed in
    absolute value over the taps (the leaky activation is 1-Lipschitz), plus that summation bound;
  - it did round: it sits 10x closer to the reference on rounded operands than the two references
    are to each other."""
from __future__ import annotations

import numpy as np

U32 = 2.0 ** -24


def assert_reduced_precision(cc, feeds: dict, conv, x, w, x_rounded, w_rounded, b, res, taps: int) -> None:
    """cc's output "y" against conv(x, w, bias, slope, res) (float64; the op's slope 0.1, if it has
    an activation) on the rounded and on the unrounded operands; bit-identical at 1 and 3 threads.
    res None: the op has no residual (and `feeds` none)."""
    ref = conv(x_rounded, w_rounded, b, 0.1, res)
    exact = conv(x.astype(np.float64), w.astype(np.float64), b, 0.1, res)
    zero = np.zeros_like(b, dtype=np.float64)
    magnitude = conv(np.abs(x_rounded), np.abs(w_rounded), zero, 1.0, None) + np.abs(b) + (0 if res is None else np.abs(res))
    rounding = (conv(np.abs(x_rounded - x), np.abs(w_rounded), zero, 1.0, None)
                + conv(np.abs(x.astype(np.float64)), np.abs(w_rounded - w), zero, 1.0, None))
    summation = (taps + 3) * U32 * magnitude
    got = cc.run(feeds).outputs["y"]
    kernel = np.abs(got - ref)
    assert np.all(kernel <= summation), float((kernel / summation).max())
    assert np.all(np.abs(got - exact) <= rounding + summation), float((np.abs(got - exact) / (rounding + summation)).max())
    assert 10 * kernel.max() < np.abs(ref - exact).max(), (kernel.max(), np.abs(ref - exact).max())
    cc.set_threads(1)
    one = cc.run(feeds).outputs["y"]
    cc.set_threads(3)
    assert np.array_equal(one, cc.run(feeds).outputs["y"])
