"""Full synthesis, one run: kcc (portable and -march=native, both -O3 as shipped, OpenMP) vs torch eager vs onnxruntime.

Usage: python bench/bench_synth.py [--lengths 16,64,160] [--threads 2] [--budget-s 150] [--no-ttfa]
                                  [--isa avx2fma,avx512] [--engines torch,ort,kcc-portable,kcc-native,kcc-native-1t]
                                  [--precision fp32,bf16]

--isa runs the portable build once per forced x86-64 dispatch level (kcc/compiler/isa.py: what a CPU of
that level takes from the portable build) in the sequential runs and in the round robin, and
measures the GEMM's GFLOP/s and the synthesis's roofline bound at each level; every kcc result
names the level its libraries ran (kcc_isa_level()). --engines picks the sequential runs.
--precision runs each kcc build once per compute precision (kcc/compiler/precision.py).

Every engine runs in its own child process (a clean peak RSS each), on the same seeded full-config
checkpoint (oracle.checkpoints.test_checkpoint('full', 0)), the same seeded phoneme ids and the
same seeded voice row ~N(0, 0.1). torch: upstream KModel.forward_with_tokens, torch.set_num_threads.
ORT: the torch.onnx export of bench/export_onnx.py (cached in ~/.cache/kcc/onnx), intra-op threads
= --threads, inter-op 1. Each engine warms up once (its first length), then each length is timed
3 times (median) or once where a run exceeds --long-s; a length whose estimated cost would
overrun the engine's --budget-s is skipped and marked so. The SNR column compares kcc with torch
on the same upstream random draws (SineGen's rand/randn fed to the C); upstream's generator is
chaotic in F0, so the bench also measures upstream against itself with F0 scaled by (1 + 1e-7).
Then a round robin (--rr-rounds, --rr-lengths): torch, ORT and kcc native loaded side by side,
each length run on each engine in turn, the order rotated by round, the ratios taken within a
round (a noisy neighbour then slows all three alike). Then time to first audio for ~1,000 words
through kcc.speech.engine's chunking, and the roofline of each stage (kcc.compiler.report) at the measured dims. Writes bench/results/bench_synth.{json,md}.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.machine import cpu_name, cpuinfo  # noqa: E402

SR = 24000
PERTURB = 1e-7
PAUSE_S = 0.5   # between round-robin runs: torch's OpenMP and ORT's pool spin-wait after a run


# -- shared helpers ---------------------------------------------------------------------------

def vm_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def snr_db(ref: np.ndarray, x: np.ndarray) -> float | None:
    if ref.shape != x.shape:
        return None
    noise = float(np.sum((ref.astype(np.float64) - x) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref.astype(np.float64) ** 2)) / noise)


def time_lengths(run, lengths, budget_s: float, long_s: float) -> dict:
    """run(n) -> (audio, frames). Warm up once on the first length, then time each length."""
    out, spent, per_frame = {}, 0.0, None
    t0 = time.perf_counter()
    run(lengths[0])
    warm = time.perf_counter() - t0
    spent += warm
    for n in lengths:
        if per_frame is not None:
            est = per_frame * out[prev]["frames"] * n / prev
            if spent + est > budget_s:
                out[n] = {"skipped": f"estimated {est:.0f} s would overrun the {budget_s:.0f} s budget"}
                continue
        times, audio, frames = [], None, 0
        for rep in range(3):
            t0 = time.perf_counter()
            audio, frames = run(n)
            times.append(time.perf_counter() - t0)
            if times[-1] > long_s:
                break
        spent += sum(times)
        out[n] = {"ms": [t * 1e3 for t in times], "median_ms": statistics.median(times) * 1e3,
                  "reps": len(times), "frames": int(frames), "samples": int(audio.size),
                  "audio_s": audio.size / SR}
        per_frame, prev = statistics.median(times) / max(1, frames), n
    return {"warmup_s": warm, "lengths": out}


def finish(result: dict, base_kb: int, out: str) -> None:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result["loadavg_end"] = Path("/proc/loadavg").read_text().split()[:3]
    result.update(peak_rss_mb=peak / 1024, base_rss_mb=base_kb / 1024, rss_growth_mb=(peak - base_kb) / 1024)
    Path(out).write_text(json.dumps(result))


# -- children ---------------------------------------------------------------------------------

def torch_runner(a, inp):
    """Upstream KModel on the seeded full checkpoint: run(n) -> (audio, frames); run.kmodel."""
    import torch
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    from oracle.capture import load_kmodel
    kmodel, _ = load_kmodel("full", 0)
    ref_s = torch.from_numpy(inp["ref_s"])

    def run(n):
        with torch.no_grad():
            audio, dur = kmodel.forward_with_tokens(torch.tensor([[0, *inp[f"ids{n}"], 0]]), ref_s, 1.0)
        return audio.numpy(), int(dur.sum())
    run.kmodel, run.threads = kmodel, torch.get_num_threads()
    return run


def child_torch(a, inp) -> None:
    import torch
    base = vm_rss_kb()
    from oracle.captures.full_model import seeded_sine_noise
    from oracle.upstream import kokoro_modules
    _, _, istftnet = kokoro_modules()
    run = torch_runner(a, inp)
    kmodel, ref_s = run.kmodel, torch.from_numpy(inp["ref_s"])

    result = {"engine": "torch", "threads": run.threads, **time_lengths(run, a.lengths, a.budget_s, a.long_s)}
    parity = {}
    for n in a.parity:
        waves = {}
        for label, scale in (("ref", 1.0), ("perturbed", 1.0 + PERTURB)):
            real = kmodel.predictor.F0Ntrain

            def f0n(x, s, real=real, scale=scale):
                f0, nn = real(x, s)
                return f0 * scale, nn
            kmodel.predictor.F0Ntrain = f0n
            try:
                with torch.no_grad(), seeded_sine_noise(istftnet) as drawn:
                    audio, dur = kmodel.forward_with_tokens(torch.tensor([[0, *inp[f"ids{n}"], 0]]), ref_s, 1.0)
            finally:
                kmodel.predictor.F0Ntrain = real
            waves[label] = audio.numpy().reshape(-1)
        np.savez(Path(a.work) / f"torch_parity{n}.npz", waveform=waves["ref"], durations=dur.numpy(),
                 rand_ini=drawn["rand_ini"].numpy(), sine_noise=drawn["sine_noise"].numpy())
        parity[n] = {"self_snr_db_f0_1e-7": snr_db(waves["ref"], waves["perturbed"])}
    result["parity"] = parity
    finish(result, base, a.result)


def ort_runner(a, inp):
    """The torch.onnx export on onnxruntime's CPU provider: run(n) -> (audio, frames)."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = a.threads, 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(a.onnx, so, providers=["CPUExecutionProvider"])
    style, speed = inp["ref_s"], np.ones(1, np.float32)

    def run(n):
        ids = np.array([[0, *inp[f"ids{n}"], 0]], dtype=np.int64)
        wave, dur = sess.run(None, {"input_ids": ids, "style": style, "speed": speed})
        return wave, int(dur.sum())
    run.version, run.threads = ort.__version__, a.threads
    return run


def child_ort(a, inp) -> None:
    base = vm_rss_kb()
    run = ort_runner(a, inp)
    result = {"engine": "onnxruntime", "version": run.version, "threads": run.threads,
              **time_lengths(run, a.lengths, a.budget_s, a.long_s)}
    finish(result, base, a.result)


def _kcc_synth(a, max_frames: int, checkpoint=None):
    from kcc.compiler.build import release_options
    from kcc.model.pipeline import Synthesizer
    from oracle.checkpoints import test_checkpoint
    opts = (release_options(native=True, precision=a.precision) if a.build == "native"
            else release_options(isa=a.isa or None, precision=a.precision))
    synth = Synthesizer(checkpoint or test_checkpoint("full", 0), opts, max_frames=max_frames)
    return synth, synth.set_threads(a.threads)


def _kcc_level(synth) -> str:
    """The dispatch level the stage libraries run at (one build: the same for every stage)."""
    from kcc.compiler.isa import library_level
    return ",".join(sorted({library_level(c.lib) for c in synth.circuits.values()}))


def kcc_runner(a, inp):
    """The compiled stages (Synthesizer, --build): run(n) -> (audio, frames); run.synth, run.stage_s."""
    synth, got = _kcc_synth(a, a.max_frames)
    ref_s = inp["ref_s"]
    stage_s: dict = {}

    def run(n):
        out = synth.synthesize([int(i) for i in inp[f"ids{n}"]], ref_s)
        stage_s[n] = out.seconds
        return out.audio, int(out.durations.sum())
    run.synth, run.stage_s, run.threads = synth, stage_s, got
    return run


def child_kcc(a, inp) -> None:
    from kcc.model.pipeline import NOISE
    base = vm_rss_kb()
    run = kcc_runner(a, inp)
    synth, got, stage_s, ref_s = run.synth, run.threads, run.stage_s, inp["ref_s"]
    result = {"engine": f"kcc-{a.build}" + (f"-{a.isa}" if a.isa and a.build != "native" else "")
              + (f"-{a.precision}" if a.precision != "fp32" else ""), "precision": a.precision,
              "isa": _kcc_level(synth), "threads": got,
              **time_lengths(run, a.lengths, a.budget_s, a.long_s), "stage_s": stage_s}
    parity = {}
    for n in a.parity:
        f = Path(a.work) / f"torch_parity{n}.npz"
        if not f.exists():
            continue
        z = np.load(f)
        tokens = np.array([[0, *inp[f"ids{n}"], 0]], dtype=np.int32)
        env = {"input_ids": tokens, "token_type_ids": np.zeros_like(tokens),
               "lengths": np.array([tokens.shape[1]], dtype=np.int32),
               "style_dec": ref_s[:, :128].copy(), "style_pred": ref_s[:, 128:].copy(),
               "speed": np.ones(1, np.float32), "seed": np.zeros(1, np.int32),
               "rand_ini": z["rand_ini"], "sine_noise": z["sine_noise"]}
        try:
            synth.run(env, skip=(NOISE,))
        except ValueError:              # our durations differ, so upstream's draws have the wrong length
            pass
        same = "waveform" in env and np.array_equal(env["durations"].reshape(-1), z["durations"].reshape(-1))
        ours = env["waveform"].reshape(-1) if same else None
        parity[n] = {"durations_equal": bool(same), "snr_db_vs_torch": snr_db(z["waveform"], ours) if same else None,
                     "max_abs_vs_torch": float(np.abs(z["waveform"] - ours).max()) if same else None}
    result["parity"] = parity
    finish(result, base, a.result)


RUNNERS = {"torch": torch_runner, "ort": ort_runner, "kcc": kcc_runner}


def child_serve(a, inp) -> None:
    """One engine kept loaded for the round-robin timing: warm up on the first length, answer
    'ready', then time one run per length read from stdin (one JSON line each on stdout)."""
    reply = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)                         # anything else the engine prints goes to stderr
    run = RUNNERS[a.engine](a, inp)
    run(a.lengths[0])
    isa = _kcc_level(run.synth) if a.engine == "kcc" else ""
    print("ready", file=reply, flush=True)
    for line in sys.stdin:
        n = int(line)
        t0 = time.perf_counter()
        _, frames = run(n)
        print(json.dumps({"n": n, "ms": (time.perf_counter() - t0) * 1e3, "frames": frames, "isa": isa}),
              file=reply, flush=True)


TTFA_PARAGRAPH = (
    "The old lighthouse stood at the edge of the harbour, where the grey water met the long stone pier. "
    "Every evening, just before the sun went down, the keeper climbed the narrow stairs and lit the great lamp. "
    "Fishermen coming home in the dark would look for its steady beam, and they knew that they were almost safe. "
    "Children from the village often followed him up to the top, asking questions about storms, ships and the "
    "strange lights that sometimes danced on the horizon. He answered each of them patiently, telling stories "
    "about the winter when the ice closed the bay, the night a tall ship lost its mast, and the morning a whale "
    "swam right up to the harbour wall. Years later, when the lamp was replaced by an automatic beacon, the "
    "children had grown up, but many of them still remembered those evenings, the smell of oil and salt, and "
    "the quiet voice of the keeper counting the seconds between each flash of light."
)


def child_ttfa(a, inp) -> None:
    """~1,000 words through kcc.speech.engine's planning and chunked synthesis; the first chunk's audio
    time vs the whole. Chunks after the first `a.ttfa_chunks` are costed from their frame
    counts (front stages run for every chunk) when the time budget runs out."""
    from kcc.speech.g2p.g2p import G2P
    from kcc.model.pipeline import BACK
    from kcc.speech.engine import plan, resolve_voice, synthesize_chunks
    from kcc.speech.voices import style_for
    base = vm_rss_kb()
    paras = [TTFA_PARAGRAPH] * a.ttfa_repeat
    text = "\n".join(paras)
    words = len(text.split())
    t0 = time.perf_counter()
    g2p = G2P()
    g2p_init = time.perf_counter() - t0
    t0 = time.perf_counter()
    first_para = plan(paras[0], g2p)
    g2p_first = time.perf_counter() - t0
    t0 = time.perf_counter()
    chunks = plan(text, g2p)
    g2p_all = time.perf_counter() - t0
    ckpt = a.ttfa_checkpoint or None
    pack = resolve_voice(a.ttfa_voice) if a.ttfa_voice else resolve_voice(None)
    synth, got = _kcc_synth(a, a.max_frames, ckpt)
    frames = []
    for enc in chunks:                  # the front stages only: each chunk's frame count
        env = _front_env(enc.ids, style_for(pack, len(enc.phonemes)))
        synth.run(env, skip=tuple(BACK))
        frames.append(int(env["durations"].sum()))
    done, t_start = [], time.perf_counter()
    for c in synthesize_chunks(chunks, synth, pack):
        done.append({"t": time.perf_counter() - t_start, "frames": int(c.durations.sum()),
                     "audio_s": c.audio.size / SR, "phonemes": len(c.encoded.phonemes)})
        if time.perf_counter() - t_start > a.ttfa_budget_s:
            break
    t0 = time.perf_counter()                # the same text with a short first chunk (<= 100 phonemes)
    short = plan(paras[0], g2p, limit=100)[0]
    synth.synthesize(short.ids, style_for(pack, len(short.phonemes)))
    short_first = {"phonemes": len(short.phonemes), "synth_s": time.perf_counter() - t0}
    synth_s = done[-1]["t"]
    per_frame = synth_s / sum(d["frames"] for d in done)
    rest = sum(frames[len(done):])
    result = {"engine": f"kcc-{a.build}", "threads": got, "words": words, "chars": len(text),
              "paragraphs": len(paras), "g2p": getattr(g2p, "description", type(g2p).__name__),
              "g2p_init_s": g2p_init, "g2p_first_paragraph_s": g2p_first, "g2p_all_s": g2p_all,
              "chunks": len(chunks), "chunk_phonemes": [len(c.phonemes) for c in chunks], "chunk_frames": frames,
              "first_chunk_synth_s": done[0]["t"], "chunks_synthesized": len(done),
              "synth_measured_s": synth_s, "synth_rest_estimated_s": per_frame * rest,
              "audio_total_s": sum(frames) * 600 / SR,
              "ttfa_s": g2p_all + done[0]["t"], "ttfa_streamed_g2p_s": g2p_first + done[0]["t"],
              "total_s": g2p_all + synth_s + per_frame * rest, "total_is_estimate": bool(rest),
              "short_first_chunk": short_first, "checkpoint": str(ckpt or "seeded full"), "voice": a.ttfa_voice or "seeded random pack"}
    finish(result, base, a.result)


def _default_ckpt():
    from oracle.checkpoints import test_checkpoint
    return test_checkpoint("full", 0)


def _front_env(ids, ref_s):
    tokens = np.array([[0, *ids, 0]], dtype=np.int32)
    ref_s = np.asarray(ref_s, np.float32).reshape(1, -1)
    return {"input_ids": tokens, "token_type_ids": np.zeros_like(tokens),
            "lengths": np.array([tokens.shape[1]], dtype=np.int32), "style_dec": ref_s[:, :128].copy(),
            "style_pred": ref_s[:, 128:].copy(), "speed": np.ones(1, np.float32), "seed": np.zeros(1, np.int32)}


CHILDREN = {"torch": child_torch, "ort": child_ort, "kcc": child_kcc, "ttfa": child_ttfa, "serve": child_serve}


# -- parent -----------------------------------------------------------------------------------

def machine() -> dict:
    git = lambda *c: subprocess.run(["git", *c], cwd=ROOT, capture_output=True, text=True).stdout.strip()  # noqa: E731
    # family / model name the core (the model name of a cloud guest is often only "AMD EPYC")
    return {"cpu": cpu_name(), "cpu_family": cpuinfo("cpu family"), "cpu_model": cpuinfo("model"),
            "cores": os.cpu_count(), "avx512f": "avx512f" in cpuinfo("flags").split(),
            "loadavg_start": Path("/proc/loadavg").read_text().split()[:3], "python": platform.python_version(),
            "git_commit": git("rev-parse", "HEAD"), "git_dirty_files": len(git("status", "--porcelain").splitlines()),
            "date": time.strftime("%Y-%m-%d %H:%M:%S")}


def onnx_model(work: Path) -> tuple[Path, float]:
    from kcc.weights.checkpoint import checkpoint_digest, load_checkpoint
    from oracle.checkpoints import test_checkpoint
    digest = checkpoint_digest(load_checkpoint(test_checkpoint("full", 0)))[:16]
    path = Path.home() / ".cache" / "kcc" / "onnx" / f"kokoro-full-seed0-{digest}.onnx"
    if path.exists():
        return path, 0.0
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(ROOT / "bench" / "export_onnx.py"), "--config", "full", "-o", str(path)],
                   check=True, capture_output=True)
    return path, time.perf_counter() - t0


def child(kind: str, work: Path, threads: int, lengths: list[int], extra: list[str]) -> tuple[list[str], dict]:
    """The command line and environment of a --child process (every thread pool sized alike)."""
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
           "OPENBLAS_NUM_THREADS": str(threads)}
    cmd = [sys.executable, __file__, "--child", kind, "--work", str(work), "--threads", str(threads),
           "--lengths", ",".join(map(str, lengths)), *extra]
    return cmd, env


def spawn(kind: str, a, work: Path, extra: list[str], threads: int) -> dict:
    out = work / f"{kind}-{len(list(work.iterdir()))}.json"
    cmd, env = child(kind, work, threads, a.lengths,
                     ["--result", str(out), "--budget-s", str(a.budget_s), "--long-s", str(a.long_s), *extra])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        print(proc.stderr[-3000:], file=sys.stderr)
        return {"engine": kind, "error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"}
    r = json.loads(out.read_text())
    r["child_wall_s"] = time.perf_counter() - t0
    print(f"  {r['engine']} ({threads} thr): {r['child_wall_s']:.0f} s", file=sys.stderr)
    return r


def round_robin(a, work: Path, engines: dict[str, list[str]], lengths: list[int], rounds: int) -> dict:
    """The engines loaded side by side (one child each, --child serve) and timed in turn: each
    round runs every length on every engine, the engine order rotated round by round, so a
    noisy neighbour lands on all of them alike. Ratios are taken within a round."""
    procs, logs = {}, {}
    try:
        for key, extra in engines.items():
            logs[key] = open(work / f"serve-{key}.log", "w")
            cmd, env = child("serve", work, a.threads, lengths, ["--engine", key.split("-")[0], *extra])
            procs[key] = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=logs[key], text=True)
        for key, p in procs.items():
            if p.stdout.readline().strip() != "ready":
                raise RuntimeError(f"round robin: engine {key} did not start (see {logs[key].name})")
        ms = {key: {n: [] for n in lengths} for key in procs}
        frames, isa = {}, {}
        order = list(procs)
        for r in range(rounds):
            for n in lengths:
                for key in order[r % len(order):] + order[:r % len(order)]:
                    time.sleep(PAUSE_S)   # the last engine's pool threads stop spinning first
                    procs[key].stdin.write(f"{n}\n")
                    procs[key].stdin.flush()
                    line = procs[key].stdout.readline()
                    if not line:
                        raise RuntimeError(f"round robin: engine {key} died at {n} ids (see {logs[key].name})")
                    got = json.loads(line)
                    ms[key][n].append(got["ms"])
                    frames[n], isa[key] = got["frames"], got.get("isa", "")
    finally:
        for p in procs.values():
            if p.stdin:
                p.stdin.close()
            p.wait(timeout=60)
        for f in logs.values():
            f.close()
    print(f"  round robin: {rounds} rounds x {lengths} ids", file=sys.stderr)
    return {"rounds": rounds, "lengths": lengths, "engines": list(engines), "ms": ms, "frames": frames, "isa": isa}


def stage_roofline(lengths_frames: dict, threads: int, levels: list[str] = ()) -> dict:
    """kcc.compiler.report bound per stage at the dims of each measured utterance; per forced dispatch
    level, the GEMM peak of that level's portable build and the synthesis's bound with it."""
    from kcc.model.pipeline import BACK, FRONT, frame_dims
    from kcc.compiler.report import build_report, measure_roofline
    from oracle.checkpoints import test_checkpoint
    rf = max((measure_roofline(threads) for _ in range(3)), key=lambda r: r.peak)  # best of 3: least disturbed
    out = {"bandwidth_GBps": rf.bandwidth / 1e9, "peak_GFLOPs": rf.peak / 1e9, "threads": rf.threads,
           "how": rf.how, "stages": {}}
    from kcc.weights.checkpoint import load_checkpoint
    ck = load_checkpoint(test_checkpoint("full", 0))
    for n, frames in lengths_frames.items():
        dims = {"B": 1, "T": n + 2, **frame_dims(frames)}
        per = {}
        for stage in FRONT + BACK:
            from kcc.circuits import load_circuit
            d = {k: v for k, v in dims.items() if k in load_circuit(stage)["dims"]}
            r = build_report(stage, ck, d, roofline=rf)
            per[stage] = {"flops": r.flops, "bytes": r.bytes, "bound_s": r.bound_s(), "arena_bytes": r.arena_bytes_at}
        out["stages"][n] = per
    from kcc.compiler.build import release_options
    out["levels"] = {}
    for lv in levels:
        peak = max(measure_roofline(threads, triad_floats=1 << 10, reps=3, options=release_options(isa=lv)).peak
                   for _ in range(3))
        out["levels"][lv] = {"peak_GFLOPs": peak / 1e9, "bound_s": {
            n: sum(max(c["bytes"] / rf.bandwidth, (c["flops"] or 0) / peak) for c in per.values())
            for n, per in out["stages"].items()}}
    return out


def rerender(path: Path, threads: int) -> None:
    """Re-measure the roofline (e.g. on a quieter machine) and rewrite the markdown of a result."""
    r = json.loads(path.with_suffix(".json").read_text())
    frames = {int(n): int(x["frames"]) for n, x in r["runs"]["torch"]["lengths"].items() if "frames" in x}
    r["roofline_first"] = r.get("roofline_first") or r["roofline"]
    r["roofline"] = stage_roofline(frames, threads)
    r["roofline"]["remeasured"] = {"date": time.strftime("%Y-%m-%d %H:%M:%S"),
                                   "loadavg": Path("/proc/loadavg").read_text().split()[:3]}
    path.with_suffix(".json").write_text(json.dumps(r, indent=1, default=str))
    path.with_suffix(".md").write_text(render_md(r))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lengths", default="16,64,160")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--budget-s", type=float, default=150.0, help="timing budget per engine")
    ap.add_argument("--long-s", type=float, default=15.0, help="time a length once when one run exceeds this")
    ap.add_argument("--parity", default="16,64", help="lengths with the SNR check (costs 2 more torch runs each)")
    ap.add_argument("--rr-rounds", type=int, default=5, help="round-robin rounds (0: none)")
    ap.add_argument("--rr-lengths", default="16,64", help="lengths timed round robin")
    ap.add_argument("--no-ttfa", action="store_true")
    ap.add_argument("--ttfa-repeat", type=int, default=6, help="paragraph repeats (~170 words each)")
    ap.add_argument("--ttfa-budget-s", type=float, default=120.0)
    ap.add_argument("--ttfa-chunks", type=int, default=0)
    ap.add_argument("--ttfa-checkpoint", default="")
    ap.add_argument("--ttfa-voice", default="")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "bench_synth"))
    ap.add_argument("--rerender", action="store_true", help="only re-measure the roofline of an existing result")
    ap.add_argument("--isa", default="", help="forced dispatch levels for the portable build, e.g. avx2fma,avx512 "
                    "(default: none, the CPU dispatches); in a child: the one level")
    ap.add_argument("--engines", default="torch,ort,kcc-portable,kcc-native,kcc-native-1t",
                    help="sequential runs (kcc-portable runs once per --isa level)")
    # child-only
    ap.add_argument("--precision", default="fp32",
                    help="compute precisions of the kcc-portable / kcc-native runs, e.g. fp32,bf16 (kcc/compiler/precision.py)")
    ap.add_argument("--child", choices=sorted(CHILDREN))
    ap.add_argument("--work")
    ap.add_argument("--result")
    ap.add_argument("--build", default="native")
    ap.add_argument("--engine", choices=("torch", "ort", "kcc"))
    ap.add_argument("--onnx")
    ap.add_argument("--max-frames", type=int, default=2000)
    a = ap.parse_args(argv)
    a.lengths = [int(x) for x in a.lengths.split(",")]
    a.parity = [int(x) for x in a.parity.split(",") if x]
    a.rr_lengths = [int(x) for x in a.rr_lengths.split(",") if x]
    if a.rerender:
        rerender(Path(a.out), a.threads)
        print(Path(a.out).with_suffix(".md").read_text())
        return 0
    if a.child:
        inp = dict(np.load(Path(a.work) / "inputs.npz"))
        CHILDREN[a.child](a, inp)
        return 0
    return parent(a)


def parent(a) -> int:
    t_all = time.perf_counter()
    info = machine()
    print(f"bench_synth: {info['cpu']}, {info['cores']} cores, load {' '.join(info['loadavg_start'])}", file=sys.stderr)
    from kcc.speech.g2p.g2p import load_vocab
    vocab_ids = sorted({int(v) for v in load_vocab().values() if int(v) != 0})
    rng = np.random.default_rng(2026)
    inputs = {f"ids{n}": rng.choice(vocab_ids, size=n).astype(np.int64) for n in a.lengths}
    inputs["ref_s"] = (0.1 * rng.standard_normal((1, 256))).astype(np.float32)
    real = Path.home() / ".cache" / "kcc" / "real"
    if not a.ttfa_checkpoint and (real / "kokoro-real.pth").exists():
        a.ttfa_checkpoint = str(real / "kokoro-real.pth")
        if not a.ttfa_voice and (real / "voices_ja.npz").exists():
            a.ttfa_voice = f"{real / 'voices_ja.npz'}:jf_alpha"
    with tempfile.TemporaryDirectory(prefix="kcc-bench-") as tmp:
        work = Path(tmp)
        np.savez(work / "inputs.npz", **inputs)
        onnx, export_s = onnx_model(work)
        par = ["--parity", ",".join(map(str, a.parity))]
        runs, engines = {}, a.engines.split(",")
        levels = [lv for lv in a.isa.split(",") if lv]
        frames, mf = {}, []
        if "torch" in engines:
            runs["torch"] = spawn("torch", a, work, par, a.threads)
            frames = {n: r["frames"] for n, r in runs["torch"].get("lengths", {}).items() if "frames" in r}
            mf = ["--max-frames", str(max([int(f) for f in frames.values()] + [600]) + 64)]
        if "ort" in engines:
            runs["ort"] = spawn("ort", a, work, ["--onnx", str(onnx)], a.threads)
        precisions = [p for p in a.precision.split(",") if p]
        tag = lambda p: "" if p == "fp32" else f"-{p}"                   # noqa: E731
        if "kcc-portable" in engines:
            for lv in levels or [""]:
                for p in precisions:
                    runs["kcc-portable" + (f"-{lv}" if lv else "") + tag(p)] = spawn(
                        "kcc", a, work, ["--build", "portable", "--isa", lv, "--precision", p, *mf, *par], a.threads)
        if "kcc-native" in engines:
            for p in precisions:
                runs["kcc-native" + tag(p)] = spawn("kcc", a, work, ["--build", "native", "--precision", p, *mf, *par],
                                                    a.threads)
        if "kcc-native-1t" in engines:
            short = argparse.Namespace(**{**vars(a), "lengths": a.lengths[:2]})
            runs["kcc-native-1t"] = spawn("kcc", short, work, ["--build", "native", *mf, "--parity", ""], 1)
        rr = None
        if a.rr_rounds > 0:
            rr_engines = {"torch": [], "ort": ["--onnx", str(onnx)], "kcc-native": ["--build", "native", *mf]}
            rr_engines.update({f"kcc-{lv}": ["--build", "portable", "--isa", lv, *mf] for lv in levels})
            rr = round_robin(a, work, rr_engines, [n for n in a.rr_lengths if n in a.lengths], a.rr_rounds)
        ttfa = None
        if not a.no_ttfa:
            ttfa = spawn("ttfa", a, work, ["--build", "native", "--ttfa-repeat", str(a.ttfa_repeat),
                                           "--ttfa-budget-s", str(a.ttfa_budget_s),
                                           "--ttfa-checkpoint", a.ttfa_checkpoint, "--ttfa-voice", a.ttfa_voice,
                                           "--max-frames", "3000"], a.threads)
    if not frames:      # no torch run: the frames kcc measured
        any_kcc = next((r for k, r in runs.items() if k.startswith("kcc") and "lengths" in r), {})
        frames = {n: r["frames"] for n, r in any_kcc.get("lengths", {}).items() if "frames" in r}
        frames = frames or (rr or {}).get("frames", {})
    roof = stage_roofline({int(n): int(f) for n, f in frames.items()}, a.threads, levels)
    result = {"machine": info, "threads": a.threads, "lengths": a.lengths, "onnx_export_s": export_s,
              "runs": runs, "round_robin": rr, "ttfa": ttfa, "roofline": roof, "perturbation": PERTURB,
              "loadavg_end": Path("/proc/loadavg").read_text().split()[:3],
              "bench_wall_s": time.perf_counter() - t_all}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=1, default=str))
    md = render_md(result)
    out.with_suffix(".md").write_text(md)
    print(md)
    return 0


def amd_core(m: dict) -> str | None:
    """The AMD core a machine() record's family / model name ("Zen 3" ...), else None."""
    if not m.get("cpu_family") or "AMD" not in m["cpu"]:
        return None
    fam, mod = int(m["cpu_family"]), int(m["cpu_model"])
    zen4 = 0x10 <= mod < 0x20 or 0x60 <= mod < 0x80 or 0xA0 <= mod < 0xB0    # Genoa, Raphael / Phoenix, Bergamo
    return {25: "Zen 4" if zen4 else "Zen 3", 26: "Zen 5"}.get(fam)


def cpu_core(m: dict) -> str:
    """", family F model M" (and the AMD core it is), or "" for a result recorded without them."""
    if not m.get("cpu_family"):
        return ""
    core = amd_core(m)
    return f" ({core + ', ' if core else ''}family {int(m['cpu_family'])} model {int(m['cpu_model'])})"


def _get(run: dict, n) -> dict:
    return (run.get("lengths") or {}).get(str(n)) or (run.get("lengths") or {}).get(n) or {}


def render_round_robin(rr: dict) -> list[str]:
    ms = {k: {int(n): v for n, v in d.items()} for k, d in rr["ms"].items()}
    mine_all = [k for k in rr["engines"] if k.startswith("kcc")]
    rest = [k for k in rr["engines"] if not k.startswith("kcc")]
    L = [f"## Round robin ({rr['rounds']} rounds, engines loaded side by side)", "",
         "Each round runs every length on every engine, one after another, the order rotated round by "
         "round; a ratio is taken within a round (the same few seconds of machine), then the median "
         "over rounds, with the range.", "",
         "| ids | " + " | ".join(f"{k} ms (median)" for k in rr["engines"]) + " | "
         + " | ".join(f"{mine} / {k} (min - max)" for mine in mine_all for k in rest) + " |",
         "|---|" + "---|" * (len(rr["engines"]) + len(rest) * len(mine_all))]
    for n in rr["lengths"]:
        cells = [f"{statistics.median(ms[k][n]):.0f}" for k in rr["engines"]]
        for mine in mine_all:
            for k in rest:
                q = [x / y for x, y in zip(ms[mine][n], ms[k][n])]
                cells.append(f"{statistics.median(q):.2f} ({min(q):.2f} - {max(q):.2f})")
        L.append(f"| {n} | " + " | ".join(cells) + " |")
    L.append("")
    return L


def render_md(r: dict) -> str:
    m, runs = r["machine"], r["runs"]
    L = ["# Full synthesis benchmark (bench/bench_synth.py)", "",
         f"- machine: {m['cpu']}{cpu_core(m)}, {m['cores']} cores (AVX-512: {m['avx512f']}); load average at start "
         f"{' '.join(m['loadavg_start'])}, at end {' '.join(r['loadavg_end'])} (other jobs shared the cores)",
         f"- commit {m['git_commit'][:12]} with {m['git_dirty_files']} uncommitted files; {m['date']}; "
         f"whole bench {r['bench_wall_s']:.0f} s",
         "- same seeded full-config weights (oracle.checkpoints.test_checkpoint('full', 0)), same seeded phoneme "
         "ids (uniform over the vocab), same voice row ~N(0, 0.1), speed 1",
         f"- {r['threads']} threads each (kcc: OpenMP; torch: set_num_threads; ORT: intra-op, inter-op 1); "
         "warm-up once per engine, median of 3 (1 where a run took > 15 s: see reps)",
         "- xRT = audio seconds / wall seconds (above 1: faster than real time); ratios are wall-time "
         "ours / theirs (below 1: ours faster)", ""]
    torch_r, ort_r = runs.get("torch", {}), runs.get("ort", {})
    L.append("| engine | threads | ids | frames | audio s | ms (median) | reps | xRT | / torch | / ORT | peak RSS MB (growth) | SNR vs torch dB |")
    L.append("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, run in runs.items():
        if "error" in run:
            L.append(f"| {key} | | | | | error: {run['error'][:80]} | | | | | | |")
            continue
        for n in r["lengths"]:
            x = _get(run, n)
            if not x:
                continue
            if "skipped" in x:
                L.append(f"| {key} | {run['threads']} | {n} | | | skipped: {x['skipped']} | | | | | | |")
                continue
            t, o = _get(torch_r, n).get("median_ms"), _get(ort_r, n).get("median_ms")
            p = (run.get("parity") or {}).get(str(n), {})
            snr = p.get("snr_db_vs_torch")
            snr_s = "" if not p else (f"{snr:.1f}" if snr is not None else "durations differ")
            if "self_snr_db_f0_1e-7" in p:
                snr_s = f"self, F0 x(1+1e-7): {p['self_snr_db_f0_1e-7']:.1f}"
            L.append(f"| {key}{' (' + run['isa'] + ')' if run.get('isa') else ''} | {run['threads']} | {n} | {x['frames']} | {x['audio_s']:.2f} | {x['median_ms']:.0f} | "
                     f"{x['reps']} | {x['audio_s'] / (x['median_ms'] / 1e3):.2f} | "
                     f"{x['median_ms'] / t if t else float('nan'):.2f} | {x['median_ms'] / o if o else float('nan'):.2f} | "
                     f"{run['peak_rss_mb']:.0f} ({run['rss_growth_mb']:.0f}) | {snr_s} |")
    L.append("")
    if r.get("round_robin"):
        L += render_round_robin(r["round_robin"])
    L.append("Load average at the end of each engine's child: " + "; ".join(
        f"{k} {' '.join(v.get('loadavg_end', []))}" for k, v in runs.items()))
    L.append("")
    tp = torch_r.get("parity") or {}
    if tp:
        L.append("SNR sanity: kcc is fed upstream's own SineGen draws (torch.rand / randn_like, seeded) and compared "
                 "with upstream on the same ids; upstream's generator is chaotic in F0: scaling upstream's own F0 by "
                 f"(1 + {r['perturbation']:g}) gives "
                 + ", ".join(f"{v['self_snr_db_f0_1e-7']:.1f} dB at {n} ids" for n, v in tp.items())
                 + " against its unperturbed output, so ~20 dB end to end is the expected agreement, "
                 "not a defect (the stage X-Rays hold the 2e-5 gate).")
        L.append("")
    one, two = runs.get("kcc-native-1t", {}), runs.get("kcc-native", {})
    rows = [(n, _get(one, n).get("median_ms"), _get(two, n).get("median_ms")) for n in r["lengths"]]
    rows = [(n, a_, b_) for n, a_, b_ in rows if a_ and b_]
    if rows:
        L.append("Thread scaling (kcc native): " + "; ".join(
            f"{n} ids {a_:.0f} ms at 1 thread, {b_:.0f} ms at {r['threads']}: x{a_ / b_:.2f}" for n, a_, b_ in rows))
        L.append("")
    roof = r.get("roofline")
    if roof:
        L.append(f"## Roofline ({roof['how']})")
        L.append("")
        first = r.get("roofline_first")
        if first:
            L.append(f"Measured again at {roof['remeasured']['date']} (load {' '.join(roof['remeasured']['loadavg'])}); "
                     f"the end-of-run measurement under load gave {first['bandwidth_GBps']:.1f} GB/s and "
                     f"{first['peak_GFLOPs']:.1f} GFLOP/s, which is no floor for runs made at other moments.")
            L.append("")
        L.append(f"Bandwidth {roof['bandwidth_GBps']:.1f} GB/s (triad), peak {roof['peak_GFLOPs']:.1f} GFLOP/s "
                 f"(kcc_linear_f32). Per stage: measured kcc-native seconds vs the roofline bound.")
        L.append("")
        L.append("| ids | stage | GFLOP | MB moved | bound ms | measured ms | measured / bound |")
        L.append("|---|---|---|---|---|---|---|")
        stage_s = two.get("stage_s") or {}
        for n, per in roof["stages"].items():
            meas = stage_s.get(str(n)) or stage_s.get(n) or {}
            tot_b = tot_m = 0.0
            for stage, c in per.items():
                ms = meas.get(stage)
                tot_b += c["bound_s"]
                tot_m += ms or 0
                L.append(f"| {n} | {stage} | {c['flops'] / 1e9:.2f} | {c['bytes'] / 1e6:.1f} | {c['bound_s'] * 1e3:.1f} | "
                         f"{ms * 1e3 if ms else float('nan'):.0f} | {ms / c['bound_s'] if ms else float('nan'):.1f} |")
            L.append(f"| {n} | **total** | | | {tot_b * 1e3:.0f} | {tot_m * 1e3:.0f} | {tot_m / tot_b if tot_b else 0:.1f} |")
        L.append("")
        rr = r.get("round_robin") or {}
        for lv, x in (roof.get("levels") or {}).items():
            run, rr_ms = runs.get(f"kcc-portable-{lv}") or runs.get(f"kcc-O2-{lv}", {}), (rr.get("ms") or {}).get(f"kcc-{lv}", {})
            cells = []
            for n, b in x["bound_s"].items():
                got = _get(run, n).get("median_ms")
                how = "sequential"
                if got is None and (rr_ms.get(str(n)) or rr_ms.get(n)):
                    got, how = statistics.median(rr_ms.get(str(n)) or rr_ms.get(n)), "round-robin median"
                cells.append(f"{n} ids bound {b * 1e3:.0f} ms" + (f", {how} {got:.0f} ms ({got / 1e3 / b:.1f}x)" if got else ""))
            ran = run.get("isa") or (rr.get("isa") or {}).get(f"kcc-{lv}", "?")
            L.append(f"- level {lv} (portable build forced; its libraries ran {ran}): GEMM {x['peak_GFLOPs']:.1f} GFLOP/s; "
                     + "; ".join(cells))
        if roof.get("levels"):
            L.append("")
    t = r.get("ttfa")
    if t and "error" not in t:
        L.append("## Time to first audio (kcc native, chunked through kcc.speech.engine)")
        L.append("")
        L.append(f"- text: {t['words']} words ({t['paragraphs']} paragraphs), {t['chunks']} chunks "
                 f"(phonemes {t['chunk_phonemes']}), {t['audio_total_s']:.0f} s of audio; checkpoint {t['checkpoint']}, "
                 f"voice {t['voice']}; G2P {t['g2p']}")
        L.append(f"- G2P: init {t['g2p_init_s']:.2f} s, whole text {t['g2p_all_s']:.2f} s, first paragraph "
                 f"{t['g2p_first_paragraph_s']:.2f} s")
        L.append(f"- first chunk synthesised in {t['first_chunk_synth_s']:.2f} s ({t['chunk_frames'][0]} frames, "
                 f"{t['chunk_frames'][0] * 600 / 24000:.1f} s audio)")
        L.append(f"- **time to first audio {t['ttfa_s']:.2f} s** (G2P of the whole text first, as kcc say / serve "
                 f"plan today); {t['ttfa_streamed_g2p_s']:.2f} s if G2P ran per paragraph")
        sf = t["short_first_chunk"]
        L.append(f"- with a short first chunk (kcc.speech.engine.plan limit 100 phonemes: {sf['phonemes']} phonemes) the "
                 f"first audio would come after {t['g2p_first_paragraph_s'] + sf['synth_s']:.2f} s")
        L.append(f"- total {t['total_s']:.1f} s" + (f" ({t['chunks_synthesized']} of {t['chunks']} chunks measured, "
                 f"the rest estimated from their frame counts at the measured s/frame)" if t["total_is_estimate"] else ""))
    elif t:
        L.append(f"TTFA: error: {t['error']}")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
