"""One conv1d, direct (shifted GEMMs) vs block DFT (dft_conv1d), at the generator's geometries:
K 7 / 11 with dilations 3 / 5 at C = 128 (stage 1, T = 30000 ~ 250 frames) and C = 256 (stage 0,
T = 10000), -O3 -march=native, 1 and 2 threads; runs interleaved, best of --reps. Also the
max-abs difference of the DFT output from the direct one and both against float64 torch. The DFT
length is the cost model's (kcc.ops.dft_conv.choose, what kcc.compiler.passes.spectral_convs picks)
unless --n forces one; each line prints the model's direct / DFT ratio next to the measured one.

    python bench/bench_dft_conv.py [--reps 5] [--n 32]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kcc.compiler.build import BuildOptions  # noqa: E402
from kcc.weights.checkpoint import Checkpoint  # noqa: E402
from kcc.compiler.driver import compile_circuit  # noqa: E402
from kcc.ops.dft_conv import choose, direct_cost, dft_cost  # noqa: E402

CASES = ((128, 11, 5, 30000), (128, 7, 3, 30000), (256, 11, 5, 10000), (256, 7, 3, 10000))


def _circuit(ops, c, t_max):
    return {"schema": "kcc.circuit/1", "name": "bench_dft_conv", "capture": "none",
            "dims": {"B": {"min": 1, "max": 1}, "T": {"min": 1, "max": t_max}},
            "inputs": [{"name": "x", "dtype": "f32", "shape": ["B", "T", c]}],
            "weights": {"w": {"ref": "t.w"}, "b": {"ref": "t.b"}},
            "blocks": [{"name": "b", "ops": ops}], "outputs": ["y"]}


def circuits(c, k, d, n, t_max):
    pad = d * (k - 1) // 2
    direct = [{"op": "conv1d", "in": {"x": "x"}, "w": {"weight": "w", "bias": "b"},
               "attrs": {"padding": pad, "dilation": d}, "out": "y"}]
    common = {"n": n, "k_size": k, "c_out": c, "min_rows": 0}
    dft = [{"op": "dft_conv1d", "in": {"x": "x"}, "w": {"weight": "w", "spectrum": "w", "bias": "b"},
            "attrs": {**common, "padding": pad, "dilation": d}, "out": "y"}]
    return _circuit(direct, c, t_max), _circuit(dft, c, t_max)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--n", type=int, default=0, help="DFT length (default: the cost model's)")
    args = ap.parse_args()
    opts = BuildOptions(opt="-O3", native=True, openmp=True)
    print(f"conv1d direct vs dft_conv1d (spectrum packed at lowering), -O3 -march=native; best of {args.reps}")
    for c, k, d, t in CASES:
        choice = choose(c, c, k)
        n = args.n or (choice.n if choice else 32)
        model = direct_cost(c, c, k) / dft_cost(c, c, k, n)
        print(f"C={c} K={k}: n={n}, model x{model:.2f} (the pass: "
              f"{f'n={choice.n}, min_rows={choice.min_rows}' if choice else 'direct'})")
        rng = np.random.default_rng(c + k)
        w = (rng.standard_normal((c, c, k)) / np.sqrt(c * k)).astype(np.float32)
        ck = Checkpoint(Path("<memory>"), {"t.w": w, "t.b": (0.1 * rng.standard_normal(c)).astype(np.float32)})
        x = rng.standard_normal((1, t, c)).astype(np.float32)
        ccs = dict(zip(("direct", "dft"), (compile_circuit(doc, ck, options=opts, passes=[])   # as declared
                                           for doc in circuits(c, k, d, n, t))))
        arenas = {name: cc.new_arena() for name, cc in ccs.items()}
        flops = 2 * t * c * c * k
        for threads in (1, 2):
            best, out = {}, {}
            for name, cc in ccs.items():
                cc.set_threads(threads)
                out[name] = cc.run({"x": x}, arena=arenas[name]).outputs["y"]      # warm-up
            for _ in range(args.reps):
                for name, cc in ccs.items():
                    t0 = time.perf_counter()
                    cc.run({"x": x}, arena=arenas[name])
                    best[name] = min(best.get(name, 1e9), time.perf_counter() - t0)
            print(f"C={c:3d} K={k:2d} d={d} T={t}: {threads} thr direct {best['direct'] * 1e3:7.1f} ms "
                  f"({flops / best['direct'] / 1e9:5.1f} GFLOP/s)  dft {best['dft'] * 1e3:7.1f} ms  "
                  f"x{best['direct'] / best['dft']:.2f}")
        import torch
        ref = torch.nn.functional.conv1d(torch.from_numpy(x).transpose(1, 2).double(), torch.from_numpy(w).double(),
                                         torch.from_numpy(np.array(ck.get("t.b"))).double(), 1, d * (k - 1) // 2, d)
        ref = ref.transpose(1, 2).numpy()
        print(f"   max-abs vs float64 torch: direct {np.abs(out['direct'] - ref).max():.2e}, "
              f"dft {np.abs(out['dft'] - ref).max():.2e}")


if __name__ == "__main__":
    main()
