"""Short syntheses, 1 vs 2 kernel threads: where the time goes per op, and A/B of a kernel change.

Short inputs are what a listener waits for (the server's first chunk, `kcc say` of a sentence),
and there a second thread bought only x1.2. Two modes, both interleaved in one process (the
cores are shared: a neighbour's load then slows both sides alike), best of --rounds:

    python bench/bench_short.py profile [--model seeded|real] [--lengths 16,26] [--chunks 5,16]
    python bench/bench_short.py ab --before DIR [--model seeded|real] ...
    python bench/bench_short.py contend [--model seeded|real] [--lengths 16] [--chunks ""]

`profile` builds the stages with BuildOptions(profile=True) and prints, per op kind (stage, op
type, kernel, output shape), the best per-op time at 1 and 2 threads, its scaling and its share;
then the fixed costs: each stage's wall time around its C call (Python, argument checks, output
arrays) and the synthesis's time outside the stages. `ab` builds the stages twice, once from the
kernels in DIR (a copy of kcc/kernels/c from before a change) and once from the working tree,
times both at 1 and 2 threads and asserts that all four outputs are bit-identical. `contend`
times 1 thread, 2, and 2 through kcc.compiler.threads.FreeCores on free cores and then beside a
1-core busy loop it starts (a neighbour at the same priority; set OMP_WAIT_POLICY /
GOMP_SPINCOUNT to compare wait policies).
Lengths are seeded phoneme ids (uniform over the vocab, as bench/bench_synth.py); chunks are the
first words of a sentence as phonemes (a server's first chunk is 16 phonemes or more).
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench_synth import _front_env  # noqa: E402  (the stage inputs Synthesizer.synthesize builds)

# "The quick brown fox jumps over the lazy dog." as misaki writes it; a chunk of n phonemes is its
# first n symbols (cut mid-word does not matter for timing: the frame count per phoneme does).
SENTENCE = "ðə kwˈɪk bɹˈWn fˈɑks ʤˈʌmps ˈOvəɹ ðə lˈAzi dˈɔɡ."


def inputs(model: str, lengths: list[int], chunks: list[int]):
    """[(label, ids)], and the voice row for n phonemes."""
    from kcc.speech.g2p.g2p import load_vocab
    vocab = load_vocab()
    rng = np.random.default_rng(2026)
    vocab_ids = sorted({int(v) for v in vocab.values() if int(v) != 0})
    cases = [(f"{n} ids", [int(i) for i in rng.choice(vocab_ids, size=n)]) for n in lengths]
    cases += [(f"chunk {n}", [int(vocab[ch]) for ch in SENTENCE[:n]]) for n in chunks]
    if model == "real":
        from kcc.speech.voices import load_voice, style_for
        pack = load_voice("jf_alpha")
        return cases, lambda n: style_for(pack, n)
    ref_s = (0.1 * rng.standard_normal((1, 256))).astype(np.float32)   # drawn after the ids (the results used --lengths 16)
    return cases, lambda n: ref_s


def build(model: str, options, kernels: Path | None = None):
    """A Synthesizer; kernels: compile from the C kernels in that directory instead of the tree's."""
    from kcc.kernels import registry
    from kcc.model.pipeline import Synthesizer
    if model == "real":
        from kcc.weights import real_model
        files = real_model.fetch(log=sys.stderr)
        ckpt = real_model.import_checkpoint(files, sys.stderr)
    else:
        from oracle.checkpoints import test_checkpoint
        ckpt = test_checkpoint("full", 0)
    from kcc.compiler import emit
    saved = registry.C_DIR, emit.COMMON_HEADER
    if kernels:
        registry.C_DIR, emit.COMMON_HEADER = Path(kernels), Path(kernels) / "kcc_common.h"
    try:
        return Synthesizer(ckpt, options, max_frames=2000)
    finally:
        registry.C_DIR, emit.COMMON_HEADER = saved


def kernel_names(circuit) -> dict[str, str]:
    """op name -> the kernel function its call site runs (read from the generated C)."""
    return dict(re.findall(r"/\* op (\S+): .*?\*/\n\s*\{ KCC_OP_BEGIN st = (\w+)\(", circuit.source))


QUIET = {"max_wait_s": 20.0, "waited_s": 0.0, "noisy_runs": 0}


def cpu_busy(window_s: float = 0.15) -> float:
    """Cores busy (all processes; this one sleeps meanwhile) over the next window_s, from /proc/stat."""
    def sample():
        v = [int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:]]
        return sum(v) - v[3] - v[4], sum(v)
    b0, t0 = sample()
    time.sleep(window_s)
    b1, t1 = sample()
    return (b1 - b0) / max(1, t1 - t0) * (os.cpu_count() or 1)


def wait_quiet() -> None:
    """Block until the other processes leave the cores (under 0.15 cores busy over a window):
    on a shared machine a 2-thread run next to a busy neighbour measures the neighbour."""
    t0 = time.perf_counter()
    while cpu_busy() > 0.15:
        if time.perf_counter() - t0 > QUIET["max_wait_s"]:
            QUIET["noisy_runs"] += 1
            break
    QUIET["waited_s"] += time.perf_counter() - t0


def timed(synth, ids, ref_s, threads: int, quiet: bool = False):
    """One synthesis the way Synthesizer.synthesize runs it: (wall s, stage s, env)."""
    synth.set_threads(threads)
    if quiet:
        wait_quiet()
    env = _front_env(ids, ref_s)
    t0 = time.perf_counter()
    _, seconds = synth.run(env)
    return time.perf_counter() - t0, seconds, env


def op_kinds(synth, env) -> dict:
    """(stage, op type, kernel, output shape) -> [(stage, op name)] at the dims of the run that left env."""
    from kcc.model.pipeline import frame_dims
    known = frame_dims(int(env["durations"].sum()))
    kinds = defaultdict(list)
    for s, c in synth.circuits.items():
        knames = kernel_names(c)
        dims = c.infer_dims({i: env[i] for i in c.graph.inputs},
                            {d: v for d, v in known.items() if d in c.graph.dims} or None)
        for op in c.graph.ops:
            kinds[(s.removeprefix("kokoro_"), op.type, knames.get(op.name, "?"),
                   "x".join(map(str, c.shape_of(op.output, dims))))].append((s, op.name))
    return kinds


class Best:
    """Per run key (variant, threads): the best wall time, per stage and per op over the rounds."""

    def __init__(self):
        self.wall, self.stage, self.op = {}, defaultdict(dict), defaultdict(dict)

    def add(self, key, synth, wall, seconds):
        self.wall[key] = min(self.wall.get(key, float("inf")), wall)
        for s, c in synth.circuits.items():
            self.stage[key][s] = min(self.stage[key].get(s, float("inf")), seconds[s])
            for op, sec in c.op_seconds().items():
                self.op[key][(s, op)] = min(self.op[key].get((s, op), float("inf")), sec)

    def kind_ms(self, key, ops) -> float:
        return sum(self.op[key][o] for o in ops) * 1e3


def rounds(synths: dict, ids, ref_s, n: int) -> tuple[Best, dict]:
    """n interleaved rounds of every (variant, threads) in synths x (1, 2), the order reversed every
    other round; returns the bests and the env of the last run."""
    runs = [(v, t) for t in (1, 2) for v in synths]
    best = Best()
    for v, t in runs:
        timed(synths[v], ids, ref_s, t)                           # warm-up (arena pages, caches)
    for r in range(n):
        for v, t in (runs if r % 2 == 0 else runs[::-1]):
            wall, seconds, env = timed(synths[v], ids, ref_s, t, quiet=True)
            best.add((v, t), synths[v], wall, seconds)
    return best, env


def profile(a) -> int:
    from kcc.compiler.build import BuildOptions
    synth = build(a.model, BuildOptions(profile=True, isa=a.isa))
    cases, style = inputs(a.model, a.lengths, a.chunks)
    print(f"# bench_short profile: model {a.model}, isa {a.isa or 'portable'}, {a.rounds} rounds, "
          f"load {' '.join(load())} at the start")
    for label, ids in cases:
        best, env = rounds({"": synth}, ids, style(len(ids)), a.rounds)
        kinds = op_kinds(synth, env)
        one, two = ("", 1), ("", 2)
        total = {k: sum(best.op[k].values()) for k in (one, two)}
        w1, w2 = best.wall[one], best.wall[two]
        print(f"\n## {label}: {len(ids)} phonemes, {int(env['durations'].sum())} frames; synthesis best "
              f"{w1 * 1e3:.1f} ms at 1 thread, {w2 * 1e3:.1f} ms at 2 (x{w1 / w2:.2f})\n")
        print("| stage | op | kernel | output shape | calls | ms 1t | ms 2t | scaling | share 1t | share 2t |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        order = sorted(kinds, key=lambda k: -best.kind_ms(one, kinds[k]))
        for key in order[:a.top]:
            m1, m2 = best.kind_ms(one, kinds[key]), best.kind_ms(two, kinds[key])
            print(f"| {' | '.join(key)} | {len(kinds[key])} | {m1:.2f} | {m2:.2f} | x{m1 / max(m2, 1e-9):.2f} | "
                  f"{m1 / 1e3 / total[one]:.1%} | {m2 / 1e3 / total[two]:.1%} |")
        rest = [o for k in order[a.top:] for o in kinds[k]]
        r1, r2 = best.kind_ms(one, rest), best.kind_ms(two, rest)
        print(f"| (the other {len(order) - a.top} kinds) | | | | {len(rest)} | {r1:.2f} | {r2:.2f} | x{r1 / max(r2, 1e-9):.2f} | "
              f"{r1 / 1e3 / total[one]:.1%} | {r2 / 1e3 / total[two]:.1%} |")
        print("\n| stage | ops | ms 1t (ops) | ms 2t (ops) | scaling | ms 1t around the ops | ms 2t around the ops |")
        print("|---|---|---|---|---|---|---|")
        for s, c in synth.circuits.items():
            ops = [(s, op.name) for op in c.graph.ops]
            o1, o2 = best.kind_ms(one, ops), best.kind_ms(two, ops)
            print(f"| {s.removeprefix('kokoro_')} | {len(ops)} | {o1:.2f} | {o2:.2f} | x{o1 / max(o2, 1e-9):.2f} | "
                  f"{best.stage[one][s] * 1e3 - o1:.2f} | {best.stage[two][s] * 1e3 - o2:.2f} |")
        for k in (one, two):
            print(f"- {k[1]} thread(s): ops {total[k] * 1e3:.1f} ms, stages {sum(best.stage[k].values()) * 1e3:.1f} ms, "
                  f"synthesis {best.wall[k] * 1e3:.1f} ms (best of {a.rounds} each; sums of per-op / per-stage bests)")
    print(f"\nload {' '.join(load())} at the end; {quiet_note()}")
    return 0


def ab(a) -> int:
    """Both variants built with profile=True (timers only): whole syntheses are too noisy on a
    shared machine to show a few percent, per-op bests over interleaved rounds are not."""
    from kcc.compiler.build import BuildOptions
    opts = BuildOptions(profile=True, isa=a.isa)
    synth = {"before": build(a.model, opts, Path(a.before)), "after": build(a.model, opts)}
    cases, style = inputs(a.model, a.lengths, a.chunks)
    print(f"# bench_short ab: model {a.model}, isa {a.isa or 'portable'}, before = kernels of {a.before}, "
          f"{a.rounds} rounds, load {' '.join(load())} at the start")
    for label, ids in cases:
        ref_s = style(len(ids))
        audio = {(v, t): timed(synth[v], ids, ref_s, t)[2]["waveform"].copy() for v in synth for t in (1, 2, 3)}
        bad = [f"{v} {t}t" for (v, t), x in audio.items() if not np.array_equal(x, audio[("before", 1)])]
        if bad:
            raise SystemExit(f"{label}: not bit-identical to before at 1 thread: {bad}")
        best, env = rounds(synth, ids, ref_s, a.rounds)
        kinds = op_kinds(synth["after"], env)
        b1, a1, b2, a2 = ("before", 1), ("after", 1), ("before", 2), ("after", 2)
        ops_all = [o for v in kinds.values() for o in v]
        print(f"\n## {label}: {len(ids)} phonemes, {int(env['durations'].sum())} frames (bit-identical: before / after x "
              "1, 2, 3 threads)\n")
        print("| stage | op | kernel | output shape | calls | before 1t | after 1t | before 2t | after 2t | "
              "after/before 2t | scaling before | scaling after |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        rows = sorted(kinds.items(), key=lambda kv: -best.kind_ms(b1, kv[1]))[:a.top]
        rows.append((("all ops", "", "", ""), ops_all))
        for key, ops in rows:
            m = [best.kind_ms(k, ops) for k in (b1, a1, b2, a2)]
            print(f"| {' | '.join(key)} | {len(ops)} | {m[0]:.2f} | {m[1]:.2f} | {m[2]:.2f} | {m[3]:.2f} | "
                  f"{m[3] / max(m[2], 1e-9):.3f} | x{m[0] / max(m[2], 1e-9):.2f} | x{m[1] / max(m[3], 1e-9):.2f} |")
        w = {k: best.wall[k] * 1e3 for k in (b1, a1, b2, a2)}
        print(f"\nwhole synthesis, best of {a.rounds}: before {w[b1]:.1f} / {w[b2]:.1f} ms, after {w[a1]:.1f} / "
              f"{w[a2]:.1f} ms (1 / 2 threads)")
    print(f"\nload {' '.join(load())} at the end; {quiet_note()}")
    return 0


def contend(a) -> int:
    """1 and 2 threads, and 2 through kcc.compiler.threads.FreeCores (the count per stage that
    leaves out the cores others keep busy), on free cores and beside a 1-core busy loop."""
    import subprocess
    from kcc.compiler.build import BuildOptions
    from kcc.compiler.threads import FreeCores
    from kcc.model.pipeline import THREADS
    synth = build(a.model, BuildOptions(isa=a.isa))
    cases, style = inputs(a.model, a.lengths, a.chunks)
    print(f"# bench_short contend: model {a.model}, OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, "
          f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT')}, best / median of {a.rounds}, load {' '.join(load())}\n")
    print("| input | neighbour | 1 thread ms | 2 threads ms | FreeCores(2) ms | 1t / 2t | 1t / FreeCores |")
    print("|---|---|---|---|---|---|---|")
    free = FreeCores(2)
    configs = (1, 2, "free")

    def one(cfg, quiet):
        if cfg != "free":
            return timed(synth, ids, ref_s, cfg, quiet)[0] * 1e3
        token = THREADS.set(free)
        try:
            return timed(synth, ids, ref_s, 2, quiet)[0] * 1e3
        finally:
            THREADS.reset(token)
    for label, ids in cases:
        ref_s = style(len(ids))
        for cfg in configs:
            one(cfg, False)
        for neighbour in ("none", "1-core busy loop"):
            busy = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if neighbour != "none" else None
            try:
                time.sleep(0.3)
                ms = {c: [] for c in configs}
                for r in range(a.rounds):
                    for c in (configs if r % 2 == 0 else configs[::-1]):
                        ms[c].append(one(c, quiet=busy is None))
            finally:
                if busy is not None:
                    busy.kill()
                    busy.wait()
            m = {c: (min(v), statistics.median(v)) for c, v in ms.items()}
            print(f"| {label} | {neighbour} | {m[1][0]:.0f} / {m[1][1]:.0f} | {m[2][0]:.0f} / {m[2][1]:.0f} | "
                  f"{m['free'][0]:.0f} / {m['free'][1]:.0f} | x{m[1][0] / m[2][0]:.2f} | x{m[1][0] / m['free'][0]:.2f} |")
    print(f"\nload {' '.join(load())} at the end; {quiet_note()}")
    return 0


def quiet_note() -> str:
    return (f"waited {QUIET['waited_s']:.0f} s in all for quiet cores (under 0.15 busy) before the timed runs, "
            f"{QUIET['noisy_runs']} run(s) started without")


def load() -> list[str]:
    return Path("/proc/loadavg").read_text().split()[:3]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("profile", "ab", "contend"))
    ap.add_argument("--model", choices=("seeded", "real"), default="seeded")
    ap.add_argument("--lengths", default="16,26")
    ap.add_argument("--chunks", default="5,16")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--isa", default=None)
    ap.add_argument("--before", help="ab: a directory with the C kernels from before the change")
    ap.add_argument("--quiet-wait", type=float, default=20.0,
                    help="before each timed run, wait up to this many seconds for the other processes to leave the cores")
    a = ap.parse_args(argv)
    QUIET["max_wait_s"] = a.quiet_wait
    a.lengths = [int(n) for n in a.lengths.split(",") if n]
    a.chunks = [int(n) for n in a.chunks.split(",") if n]
    if a.mode == "ab" and not a.before:
        ap.error("ab needs --before DIR")
    return {"profile": profile, "ab": ab, "contend": contend}[a.mode](a)


if __name__ == "__main__":
    sys.exit(main())
