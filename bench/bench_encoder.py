"""Compiled phoneme encoder vs upstream torch eager (KModel.bert + bert_encoder), full config.

One run: python bench/bench_encoder.py [--reps N]. Both sides single-threaded (our C is not
threaded, so torch gets torch.set_num_threads(1)); inputs are the pinned ids tiled to 36 and
256 tokens with boundary 0s. Prints the median ms of each side and the ratio ours / torch,
for the portable build (-O2) and the native one (-O3 -march=native).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _ids(n: int) -> np.ndarray:
    from oracle.captures.phoneme_encoder import PINNED_IDS_36
    body = [i for i in PINNED_IDS_36 if i != 0]
    reps = (body * (n // len(body) + 1))[:n - 2]
    return np.array([[0, *reps, 0]], dtype=np.int32)


def _median_ms(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    import torch
    from kcc.compiler.build import BuildOptions
    from kcc.compiler.driver import compile_circuit
    from oracle.capture import load_kmodel
    torch.set_num_threads(1)
    kmodel, path = load_kmodel("full", 0)
    builds = {"O2": BuildOptions(), "O3-native": BuildOptions(opt="-O3", native=True)}
    compiled = {k: compile_circuit("kokoro_phoneme_encoder", path, o) for k, o in builds.items()}
    print(f"phoneme encoder, full config, 1 thread, median of {args.reps}")
    print(f"{'tokens':>6s} {'torch ms':>9s} " + " ".join(f"{k + ' ms':>13s} {'ratio':>6s}" for k in builds))
    for n in (36, 256):
        ids = _ids(n)
        inputs = {"input_ids": ids, "token_type_ids": np.zeros_like(ids), "lengths": np.array([n], dtype=np.int32)}
        ids_t, mask = torch.from_numpy(ids).long(), torch.ones(1, n, dtype=torch.int32)

        def upstream():
            with torch.no_grad():
                return kmodel.bert_encoder(kmodel.bert(ids_t, attention_mask=mask))
        ref = upstream().numpy()
        t_torch = _median_ms(upstream, args.reps)
        row = f"{n:6d} {t_torch:9.1f} "
        for k, c in compiled.items():
            arena = c.new_arena()
            out = c.run(inputs, arena=arena).outputs["d_en"]
            worst = float(np.abs(out - ref).max())
            t = _median_ms(lambda: c.run(inputs, arena=arena), args.reps)
            row += f"{t:13.1f} {t / t_torch:6.2f} "
            row += f"(max_abs {worst:.1e}) "
        print(row)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
