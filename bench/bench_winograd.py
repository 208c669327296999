"""One AdaIN + Snake + K = 3 conv, direct fused (adain_conv1d) vs Winograd (winograd_conv1d with
the norm fused, m = 2 and 3), at the synthesis's geometries: the generator's resblock convs
(C = 128, T = 15241; C = 256, T = 2540; dilations 1, 3, 5) and the decoder's (C = 1024, T = 127).
Portable build (the product's: AVX-512 clones here), OpenMP, 1 and 2 threads, interleaved, best of
--reps, each run gated on quiet cores (up to --quiet-wait s), wall time and process CPU time (at 1
thread the CPU time is what a run costs even beside a busy neighbour); each line prints the cost
model's direct / Winograd ratio (kcc.ops.winograd_conv.choose) next to the measured one, and both outputs' max-abs error against float64.

    python bench/bench_winograd.py [--reps 5] [--threads 2]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_short as bs  # noqa: E402  (wait_quiet: each timed run waits for quiet cores)

from kcc.compiler.build import BuildOptions  # noqa: E402
from kcc.compiler.driver import compile_circuit  # noqa: E402
from kcc.ops.adain import adain_weights  # noqa: E402
from kcc.ops.conv import conv_reference  # noqa: E402
from kcc.ops.adain import adain_reference  # noqa: E402
from kcc.ops.winograd_conv import direct_cost, winograd_cost  # noqa: E402
from kcc.weights.checkpoint import Checkpoint  # noqa: E402

CASES = ((128, 1, 15241), (128, 5, 15241), (256, 1, 2540), (256, 3, 2540), (1024, 1, 127), (512, 1, 254))
NORM_W = ("norm_w", "norm_b", "fc_w", "fc_b", "alpha")


def circuit(c, d, t, m):
    norm_w = {r: r for r in NORM_W}
    common = {"padding": d, "dilation": d, "norm_act": "snake"}
    if m:
        op = {"op": "winograd_conv1d", "in": {"x": "x", "style": "s"}, "w": {"weight": "w", "bias": "b", **norm_w},
              "attrs": {**common, "m": m, "c_out": c}, "out": "y"}
    else:
        op = {"op": "adain_conv1d", "in": {"x": "x", "style": "s"}, "w": {"weight": "w", "bias": "b", **norm_w},
              "attrs": common, "out": "y"}
    return {"schema": "kcc.circuit/1", "name": "bench_winograd", "capture": "none",
            "dims": {"B": {"min": 1, "max": 1}, "T": {"min": 1, "max": t}},
            "inputs": [{"name": "x", "dtype": "f32", "shape": ["B", "T", c]},
                       {"name": "s", "dtype": "f32", "shape": ["B", 128]}],
            "weights": {"w": {"ref": "t.w"}, "b": {"ref": "t.b"}, **{r: {"ref": f"t.{r}"} for r in NORM_W}},
            "blocks": [{"name": "b", "ops": [op]}], "outputs": ["y"]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--quiet-wait", type=float, default=20.0, help="seconds to wait for quiet cores before each run")
    args = ap.parse_args()
    bs.QUIET["max_wait_s"] = args.quiet_wait
    print(f"load {' '.join(bs.load())} at the start", flush=True)
    opts = BuildOptions(openmp=True)
    for c, d, t in CASES:
        rng = np.random.default_rng(c + d)
        w = (rng.standard_normal((c, c, 3)) / np.sqrt(3 * c)).astype(np.float32)
        b = (0.1 * rng.standard_normal(c)).astype(np.float32)
        nw = adain_weights(rng, c, 128, True)
        ck = Checkpoint(Path("<memory>"), {"t.w": w, "t.b": b, **{f"t.{r}": v for r, v in nw.items()}})
        x = rng.standard_normal((1, t, c)).astype(np.float32)
        s = rng.standard_normal((1, 128)).astype(np.float32)
        a = {"padding": d, "dilation": d}
        ref = conv_reference(adain_reference(x, s, nw, 1e-5, "snake", 0.01), w, b, a).astype(np.float64)
        ccs = {name: compile_circuit(circuit(c, d, t, m), ck, options=opts, passes=[])
               for name, m in (("direct", 0), ("m2", 2), ("m3", 3))}
        arenas = {name: cc.new_arena() for name, cc in ccs.items()}
        model = {f"m{m}": direct_cost(c, c) / winograd_cost(m, c, c, d, True) for m in (2, 3)}
        for threads in args.threads:
            best, err, cpu = {}, {}, {}
            for name, cc in ccs.items():
                cc.set_threads(threads)
                y = cc.run({"x": x, "s": s}, arena=arenas[name]).outputs["y"]
                err[name] = float(np.abs(y - ref).max())
            for _ in range(args.reps):
                for name, cc in ccs.items():
                    bs.wait_quiet()
                    t0, c0 = time.perf_counter(), time.process_time()
                    cc.run({"x": x, "s": s}, arena=arenas[name])
                    best[name] = min(best.get(name, 1e9), time.perf_counter() - t0)
                    cpu[name] = min(cpu.get(name, 1e9), time.process_time() - c0)
            print(f"C={c:4d} d={d} T={t:5d} {threads} thr: direct {best['direct'] * 1e3:6.2f} ms wall, "
                  f"{cpu['direct'] * 1e3:6.2f} ms cpu (err {err['direct']:.1e})"
                  + "".join(f" | {k} {best[k] * 1e3:6.2f} / {cpu[k] * 1e3:6.2f} ms x{best['direct'] / best[k]:.2f} wall "
                            f"x{cpu['direct'] / cpu[k]:.2f} cpu (model x{model[k]:.2f}, err {err[k] / err['direct']:.2f}x)"
                            for k in ("m2", "m3")), flush=True)
    print(f"load {' '.join(bs.load())} at the end; {bs.quiet_note()}")


if __name__ == "__main__":
    main()
