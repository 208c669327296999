"""A generator resblock of stage 1 (decoder.generator.resblocks.3 / .4 / .5: C=128, K=3 / 7 / 11,
dilations 1/3/5, T=7681): unfused (passes=[], op by op, direct convs), fusion only
(FUSION_PASSES: bit-identical) and the default passes (+ spectral_convs: K 7 / 11 convs as block
DFTs), portable -O2 and -O3 -march=native, 1 and 2 OpenMP threads, plus the X-Ray error of each
against upstream AdaINResBlock1.

    python bench/bench_resblock.py [--block 3|4|5] [--t 7681] [--reps 3] [--quick]

One process, one run; the three variants are timed interleaved, run by run, best of --reps
each. The ops are cut from kokoro_generator.json (the rb3_* ops that make up
resblocks.3, input s1_x), so the block is exactly what the generator emits.
"""
from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kcc.compiler.build import BuildOptions  # noqa: E402
from kcc.weights.checkpoint import load_checkpoint  # noqa: E402
from kcc.circuits import load_circuit  # noqa: E402
from kcc.compiler.passes import DEFAULT_PASSES, FUSION_PASSES  # noqa: E402
from kcc.compiler.driver import compile_circuit  # noqa: E402
from kcc.compiler.xray import compare_arrays  # noqa: E402

C = 128
KERNEL = {3: 3, 4: 7, 5: 11}          # resblocks.3 .. .5: kernel sizes 3, 7, 11
BLOCK, PREFIX = 3, "rb3_"             # set by main from --block


def resblock_circuit(t_max: int) -> dict:
    gen = load_circuit("kokoro_generator")
    ops = [o for b in gen["blocks"] for o in b["ops"] if o["out"].startswith(PREFIX)]
    used = {w for o in ops for w in o.get("w", {}).values()}
    return {"schema": "kcc.circuit/1", "name": "bench_resblock", "capture": "none",
            "dims": {"B": {"min": 1, "max": 1}, "T": {"min": 1, "max": t_max}},
            "inputs": [{"name": "s1_x", "dtype": "f32", "shape": ["B", "T", C]},
                       {"name": "style_dec", "dtype": "f32", "shape": ["B", 128]}],
            "weights": {k: v for k, v in gen["weights"].items() if k in used},
            "blocks": [{"name": "rb", "ops": copy.deepcopy(ops), "checkpoints": [
                {"name": "out", "tensor": f"{PREFIX}x2", "layout": "time_major", "dtype": "f32",
                 "axes": ["b", "t", "c"]}]}],
            "outputs": [f"{PREFIX}x2"]}


def torch_reference(x: np.ndarray, style: np.ndarray) -> np.ndarray:
    import torch
    from oracle.capture import load_kmodel
    block = load_kmodel("small", 0)[0].decoder.generator.resblocks[BLOCK]
    with torch.no_grad():
        y = block(torch.from_numpy(x).transpose(1, 2), torch.from_numpy(style))
    return y.transpose(1, 2).contiguous().numpy()


def timed(ccs: dict, ins, reps: int) -> tuple[dict[str, float], dict[str, np.ndarray]]:
    """Best of `reps` ms per variant, the variants interleaved run by run (a noisy neighbour
    slows all of them alike rather than one variant's whole series)."""
    arenas = {name: cc.new_arena() for name, cc in ccs.items()}
    outs = {name: cc.run(ins, arena=arenas[name]).outputs[f"{PREFIX}x2"] for name, cc in ccs.items()}  # warm-up
    best = dict.fromkeys(ccs, float("inf"))
    for _ in range(reps):
        for name, cc in ccs.items():
            t0 = time.perf_counter()      # the output array is reused too, like the arena
            cc.run(ins, arena=arenas[name], out={f"{PREFIX}x2": outs[name]})
            best[name] = min(best[name], time.perf_counter() - t0)
    return {k: v * 1e3 for k, v in best.items()}, outs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--block", type=int, default=3, choices=sorted(KERNEL))
    ap.add_argument("--t", type=int, default=7681)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="portable -O2, 1 thread only")
    args = ap.parse_args()
    global BLOCK, PREFIX
    BLOCK, PREFIX = args.block, f"rb{args.block}_"
    k = KERNEL[BLOCK]
    from oracle.checkpoints import test_checkpoint
    ckpt = load_checkpoint(test_checkpoint("small", 0))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, args.t, C)).astype(np.float32)
    style = rng.standard_normal((1, 128)).astype(np.float32)
    ins = {"s1_x": x, "style_dec": style}
    ref = torch_reference(x, style)
    circ = resblock_circuit(args.t)
    flops = 6 * 2 * args.t * C * C * k
    builds = [("portable -O2", BuildOptions(openmp=True))]
    if not args.quick:
        builds.append(("native -O3", BuildOptions(opt="-O3", native=True, openmp=True)))
    threads = (1,) if args.quick else (1, 2)
    print(f"resblocks.{BLOCK}: C={C} K={k} T={args.t}; direct conv work {flops / 1e9:.2f} GFLOP; best of {args.reps}")
    variants = (("unfused", []), ("fusion", FUSION_PASSES), ("default", DEFAULT_PASSES))
    for label, opts in builds:
        cc = {name: compile_circuit(circ, ckpt, options=opts, passes=p) for name, p in variants}
        n_ops = {k: len(v.graph.ops) for k, v in cc.items()}
        outs = {}
        for n in threads:
            for c in cc.values():
                c.set_threads(n)
            ms, got = timed(cc, ins, args.reps)
            outs.update({(name, n): o for name, o in got.items()})
            print(f"{label:13s} {n} thr: " + "  ".join(f"{v} {ms[v]:8.1f} ms ({n_ops[v]} ops)" for v, _ in variants)
                  + f"  unfused/fusion {ms['unfused'] / ms['fusion']:.2f}x  unfused/default "
                  f"{ms['unfused'] / ms['default']:.2f}x  default direct-conv-equiv {flops / ms['default'] / 1e6:.1f} GFLOP/s")
        for name, _ in variants:
            r = compare_arrays(name, ref, outs[name, 1])
            print(f"  X-Ray {name:7s} vs torch: {r.status} max_abs {r.max_abs:.3e} rel_rmse {r.rel_rmse:.3e} "
                  f"cos {r.cosine:.8f}")
        for name in ("fusion", "default"):
            d = np.abs(outs[name, 1].astype(np.float64) - outs["unfused", 1])
            print(f"  {name} vs unfused: max_abs {d.max():.3e}, bit-identical {bool((d == 0).all())}")
        print(f"  threads 1 vs {threads[-1]} bit-identical "
              f"{all(np.array_equal(outs[v, 1], outs[v, threads[-1]]) for v, _ in variants)}")


if __name__ == "__main__":
    main()
