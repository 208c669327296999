#!/usr/bin/env python3
"""Warm `kcc say` of one short sentence: wall time from process start to WAV written, its parts,
and peak RSS against onnxruntime and torch speaking the same phonemes with the same weights.

Usage: python bench/bench_say_warm.py [--runs 5] [--text "..."] [--out bench/results/bench_say_warm.md]

1. `kcc say TEXT -o x.wav` as a fresh process, `runs` times after one warm-up run (the compiled
   model's artifact is then in the cache and its pages in the page cache): wall and peak RSS;
   the same with `--precision int8`.
2. The same steps timed inside one fresh process: Python imports, model load (artifact mapped,
   each stage's weight pages released once it ran, as `kcc say` does: they stay in the page
   cache, which no process's RSS counts), G2P (backend start + this text), synthesis, WAV write.
3. Peak RSS and wall of a fresh process that speaks the same phoneme ids with the same voice row:
   onnxruntime on the int8 ONNX export (2 threads) and torch (upstream KModel on the imported .pth).
Each engine is its own process (os.wait4 gives each one's own peak RSS). The CPU is named.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.machine import cpu_label  # noqa: E402
TEXT = "Hello from generated C."

_PHASES = r"""
import time, json, sys
t0 = time.perf_counter()
from kcc.speech.engine import load_synthesizer, plan, say, resolve_voice
from kcc.speech.g2p.g2p import G2P
from kcc.speech.audio.wav import write_wav
t1 = time.perf_counter()
synth = load_synthesizer(None, log=None, precision=sys.argv[3])
synth.release_weights_after_use()
t2 = time.perf_counter()
g2p = G2P("en-us", "auto"); chunks = plan(sys.argv[1], g2p); pack = resolve_voice(None)
t3 = time.perf_counter()
r = say(sys.argv[1], synth, pack, g2p=g2p, chunks=chunks)
t4 = time.perf_counter()
write_wav(sys.argv[2], r.audio)
t5 = time.perf_counter()
print(json.dumps({"imports_s": t1 - t0, "model_load_s": t2 - t1, "g2p_s": t3 - t2, "synthesis_s": t4 - t3,
                  "wav_s": t5 - t4, "audio_s": r.audio.size / 24000,
                  "ids": [i for c in chunks for i in c.ids], "phonemes": chunks[0].phonemes}))
"""

_ORT = r"""
import json, sys, time, numpy as np
import onnxruntime as ort
ids, style = json.loads(sys.argv[2]), np.load(sys.argv[3])
o = ort.SessionOptions(); o.intra_op_num_threads = 2; o.inter_op_num_threads = 1
s = ort.InferenceSession(sys.argv[1], sess_options=o, providers=["CPUExecutionProvider"])
t = time.perf_counter()
audio = s.run(None, {"tokens": np.array([[0, *ids, 0]], np.int64), "style": style, "speed": np.ones(1, np.float32)})[0]
print(json.dumps({"synthesis_s": time.perf_counter() - t, "audio_s": audio.size / 24000}))
"""

_TORCH = r"""
import json, sys, time, numpy as np
sys.path.insert(0, sys.argv[4])
import torch
torch.set_num_threads(2)
from oracle.upstream import kmodel_from_path
ids, style = json.loads(sys.argv[2]), np.load(sys.argv[3])
km = kmodel_from_path(sys.argv[1])
t = time.perf_counter()
with torch.no_grad():
    audio = km.forward_with_tokens(torch.LongTensor([[0, *ids, 0]]), torch.from_numpy(style), 1.0)[0]
print(json.dumps({"synthesis_s": time.perf_counter() - t, "audio_s": audio.numel() / 24000}))
"""


def run_rss(cmd: list[str], env=None) -> tuple[float, float, str]:
    """Like run(), with the child's own peak RSS from wait4 (Popen must not reap it first)."""
    t = time.perf_counter()
    with tempfile.TemporaryFile("w+") as fo, tempfile.TemporaryFile("w+") as fe:
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True, env=env, cwd=ROOT)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0), fe.seek(0)
        out, err = fo.read(), fe.read()
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed ({p.returncode}):\n{err[-2000:]}")
    return wall, usage.ru_maxrss / 1024, out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--text", default=TEXT)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "bench_say_warm.md")
    ap.add_argument("--no-peers", action="store_true", help="skip onnxruntime and torch")
    args = ap.parse_args(argv)
    py = sys.executable
    kcc = [py, "-m", "kcc.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        wav = str(Path(tmp) / "x.wav")
        rows = {}
        for label, extra in (("kcc say (process)", []), ("kcc say --precision int8 (process)", ["--precision", "int8"])):
            run_rss([*kcc, "say", args.text, "-o", wav, *extra])      # warm-up: compile / page cache
            says = [run_rss([*kcc, "say", args.text, "-o", wav, *extra]) for _ in range(args.runs)]
            rows[label] = {"wall_s": sorted(w for w, _, _ in says)[len(says) // 2],
                           "peak_rss_mb": max(r for _, r, _ in says)}
        phases = [json.loads(run_rss([py, "-c", _PHASES, args.text, wav, "fp32"])[2]) for _ in range(args.runs)]
        ids = phases[0]["ids"]
        if not args.no_peers:
            import numpy as np

            from kcc.weights import real_model
            from kcc.speech.voices import load_voice
            files = real_model.fetch()
            style = Path(tmp) / "style.npy"
            np.save(style, load_voice("jf_alpha")[len(phases[0]["phonemes"]) - 1].reshape(1, 256))
            w, r, out = run_rss([py, "-c", _ORT, str(files["onnx"]), json.dumps(ids), str(style)])
            rows["onnxruntime (process)"] = {"wall_s": w, "peak_rss_mb": r, **json.loads(out)}
            pth = files["onnx"].with_name("kokoro-real.pth")
            if not pth.exists():
                subprocess.run([*kcc, "import-onnx", str(files["onnx"]), "-o", str(pth)], check=True, cwd=ROOT)
            try:
                w, r, out = run_rss([py, "-c", _TORCH, str(pth), json.dumps(ids), str(style), str(ROOT)])
                rows["torch (process)"] = {"wall_s": w, "peak_rss_mb": r, **json.loads(out)}
            except SystemExit as exc:
                print(f"torch: skipped ({str(exc).splitlines()[0]})", file=sys.stderr)
    med = {k: sorted(p[k] for p in phases)[len(phases) // 2] for k in phases[0] if k.endswith("_s")}
    cpu = cpu_label()
    lines = [f"# Warm `kcc say` ({args.runs} runs, median), {time.strftime('%Y-%m-%d')}", "",
             f"CPU: {cpu}. Text: \"{args.text}\" ({len(ids)} phoneme ids, {med['audio_s']:.2f} s of audio), "
             "default voice, real Kokoro-82M v1.0 (dequantised from the int8 ONNX export).", "",
             "| process | wall s | peak RSS MB | synthesis s |", "| --- | --- | --- | --- |"]
    for name, r in rows.items():
        syn = r.get("synthesis_s", med["synthesis_s"] if name == "kcc say (process)" else float("nan"))
        lines.append(f"| {name} | {r['wall_s']:.2f} | {r['peak_rss_mb']:.0f} | "
                     f"{'-' if syn != syn else f'{syn:.3f}'} |")
    ort = rows.get("onnxruntime (process)")
    if ort:
        lines += ["", "Peak RSS / onnxruntime's: " + ", ".join(
            f"{name.removesuffix(' (process)')} {r['peak_rss_mb'] / ort['peak_rss_mb']:.2f}x"
            for name, r in rows.items() if name.startswith("kcc")) + ". RSS counts the mapped weight pages a "
            "process holds (file-backed) and its own memory (anonymous); `kcc say` releases each weight's "
            "pages once the last op reading it ran: they stay in the page cache, shared and counted by no process."]
    lines += ["", "Inside one `kcc say`-like process (median s):", "",
              "| Python imports | model load (artifact) | G2P (start + text) | synthesis | WAV write |",
              "| --- | --- | --- | --- | --- |",
              f"| {med['imports_s']:.3f} | {med['model_load_s']:.3f} | {med['g2p_s']:.3f} | "
              f"{med['synthesis_s']:.3f} | {med['wav_s']:.3f} |", ""]
    text = "\n".join(lines)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    args.out.with_suffix(".json").write_text(json.dumps({"cpu": cpu, "rows": rows, "phases_median": med}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
