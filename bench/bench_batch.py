#!/usr/bin/env python3
"""Batch throughput: audio seconds made per wall second, short items (one sentence) and long
items (a paragraph), for four ways of running the same items with the real model on N cores:

  say-per-item     `kcc say TEXT -o x.wav --threads N` as a fresh process per item, one after another
  1x{N}-threads    one worker with N kernel threads (Batch, workers=1)
  {N}x1-threads    N items at once in one process: N Python threads sharing one synthesizer, one
                   kernel thread each (Batch, workers=N: the default)
  {N}x1-processes  N spawned worker processes, one kernel thread each (Batch, processes=True)

Every configuration is one fresh process timed from its start to its last file written (so
model load, G2P start-up and worker spawn count, as they do for a user), writing into an empty
directory. The configurations run interleaved, `--rounds` times; the table gives each one's
median. A run that had to recompile the model (the compiler's sources changed meanwhile) is
run again. Usage: python bench/bench_batch.py [--rounds 1] [--out bench/results/bench_batch.md]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.machine import cpu_name  # noqa: E402

SHORT = ["The quick brown fox jumps over the lazy dog.", "Please call Stella and ask her to bring these things.",
         "A rainbow is a division of white light into many beautiful colors.",
         "The train leaves the station at half past nine.", "She sells sea shells by the sea shore.",
         "We will meet again next week to finish the report.", "Every morning he walks his dog along the river.",
         "The museum opens at ten and closes at six."]
LONG = [
    "The history of the printing press begins in the fifteenth century, when movable type made books cheaper "
    "than ever before. Within a few decades, printers had set up shops in most of the large cities of Europe. "
    "Ideas travelled faster, and scholars could compare texts that had once been copied by hand, with all the "
    "mistakes that copying brings. Many historians see this as one of the turning points of the modern world.",
    "Rivers shape the land they flow through. Over thousands of years, water carries sand and stones downstream, "
    "carving valleys and building wide plains near the sea. People have always settled along rivers, because "
    "they bring fresh water, fertile soil and an easy way to travel. Today many rivers are managed with dams "
    "and canals, which protect towns from floods but also change the life of the river itself.",
    "Learning a musical instrument takes patience. At first, even simple tunes feel awkward, and the fingers "
    "seem to have a mind of their own. With daily practice, small movements become automatic, and the player "
    "can start to think about phrasing and expression instead of individual notes. Teachers often say that "
    "twenty focused minutes a day are worth more than a long session once a week.",
]

_BATCH = r"""
import json, sys, time
t0 = float(sys.argv[4])
from kcc.speech.batch import Batch, Defaults, SynthSpec
mode, shape = sys.argv[3].split(":")
workers, threads = map(int, shape.split("x"))
job = Batch(sys.argv[1], sys.argv[2], workers=workers, threads=threads, synth=SynthSpec(threads=threads),
            processes=mode == "processes", defaults=Defaults(voice=sys.argv[6]))
outs = list(job)
assert job.ok, job.summary["failures"]
print(json.dumps({"wall_s": time.time() - t0, "audio_s": sum(o.audio_s for o in outs)}))
"""

_SAY = r"""
import json, subprocess, sys, time, wave
t0 = float(sys.argv[4])
kcc, lines, out, threads = sys.argv[5], open(sys.argv[1], encoding="utf-8").read().splitlines(), sys.argv[2], sys.argv[3]
audio = 0.0
for i, text in enumerate(lines):
    path = f"{out}/{i}.wav"
    subprocess.run([kcc, "say", text, "-o", path, "--threads", threads, "--voice", sys.argv[6]], check=True,
                   capture_output=True)
    with wave.open(path) as w:
        audio += w.getnframes() / w.getframerate()
print(json.dumps({"wall_s": time.time() - t0, "audio_s": audio}))
"""


VOICE = ""      # the real model's default voice by file (main() fills it in): no catalog scan per run


def run_config(name: str, script: str, manifest: Path, arg: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench_batch_") as out:
        p = subprocess.run([sys.executable, "-c", script, str(manifest), out, arg, repr(time.time()),
                            str(ROOT / ".venv" / "bin" / "kcc"), VOICE], capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        raise SystemExit(f"{name} failed:\n{p.stderr[-3000:]}")
    got = json.loads(p.stdout.strip().splitlines()[-1])
    got["recompiled"] = "compiling" in p.stderr        # the compiler's sources changed under us
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2, help="N: the cores to use")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "bench_batch.md"))
    ap.add_argument("--skip", nargs="*", default=[], help="configurations to leave out (e.g. say-per-item)")
    ap.add_argument("--sets", nargs="*", default=["short", "long"], choices=["short", "long"])
    args = ap.parse_args()
    n = args.threads
    configs = {"say-per-item": (_SAY, str(n)), f"1x{n}-threads": (_BATCH, f"threads:1x{n}"),
               f"{n}x1-threads": (_BATCH, f"threads:{n}x1"), f"{n}x1-processes": (_BATCH, f"processes:{n}x1")}
    configs = {k: v for k, v in configs.items() if k not in args.skip}
    subprocess.run([sys.executable, "-c", "from kcc.speech.batch import SynthSpec; SynthSpec()()"], check=True, cwd=ROOT)
    global VOICE
    from kcc.weights.real_model import fetch
    VOICE = f"{fetch()['voices']}:jf_alpha"
    results: dict[tuple[str, str], list[dict]] = {}
    loads = []
    with tempfile.TemporaryDirectory() as tmp:
        sets = {}
        for label, texts in (("short", SHORT), ("long", LONG)):
            if label not in args.sets:
                continue
            sets[label] = Path(tmp, f"{label}.txt")
            sets[label].write_text("\n".join(texts) + "\n", encoding="utf-8")
        names = list(configs)
        for r in range(args.rounds):
            for label, manifest in sets.items():
                for name in names[r % len(names):] + names[:r % len(names)]:      # rotate the order
                    loads.append(os.getloadavg()[0])
                    got = run_config(name, *configs[name][:1], manifest, configs[name][1])
                    if got["recompiled"]:
                        got = run_config(name, *configs[name][:1], manifest, configs[name][1])
                    results.setdefault((label, name), []).append(got)
                    print(f"round {r + 1} {label:5s} {name:15s} {got['audio_s']:7.1f} s audio in "
                          f"{got['wall_s']:6.1f} s = {got['audio_s'] / got['wall_s']:5.2f} x real time"
                          f"{'  (recompiled!)' if got['recompiled'] else ''}", flush=True)
    lines = [f"# bench_batch: audio seconds per wall second ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())})",
             "", f"CPU: {cpu_name()}, {os.cpu_count()} cores visible, {n} used; load average during the run "
             f"{min(loads):.1f}-{max(loads):.1f} (a machine shared with other jobs). Real Kokoro-82M, voice jf_alpha, "
             f"{args.rounds} round(s), median shown. Short: {len(SHORT)} one-sentence items; long: {len(LONG)} "
             "paragraphs. Wall time includes process start, model load and worker spawn.", "",
             "| items | " + " | ".join(names) + " |", "| --- |" + " --- |" * len(names)]
    for label in sets:
        cells = []
        for name in names:
            runs = results[(label, name)]
            xrt = statistics.median(g["audio_s"] / g["wall_s"] for g in runs)
            wall = statistics.median(g["wall_s"] for g in runs)
            cells.append(f"{xrt:.2f} xRT ({wall:.1f} s)")
        audio = results[(label, names[0])][0]["audio_s"]
        lines.append(f"| {label} ({audio:.0f} s audio) | " + " | ".join(cells) + " |")
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(text, encoding="utf-8")
    Path(args.out).with_suffix(".json").write_text(json.dumps(
        {f"{k[0]}/{k[1]}": v for k, v in results.items()}, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
