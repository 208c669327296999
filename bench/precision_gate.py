"""The listening gate a reduced compute precision must pass (issue 26): kcc at `precision` against kcc
fp32 on the real Kokoro-82M weights, the ten sentences of bench/asr_wer.py, noise seeds 0 and 1.

  1. Whisper (tiny.en, bench/asr_wer.py's) word error rate, pooled: <= fp32's + 1 point.
  2. Log-mel distance to fp32's audio (same ids, voice row and noise seed) <= the int8 onnxruntime
     export's distance to upstream torch on the same sentences (oracle/ort_check.py: torch with the
     export's deterministic source, both on the imported weights): the loss the model's own int8
     release is shipped with.
  3. Durations: identical, or off by one frame on <= 5% of tokens.
  4. No hiss: the energy above 8 kHz within HIGH_BAND_DB of fp32's, per utterance.

`gate(precision, shared)` returns the figures and a `passed` verdict per criterion; tests/test_precision_gate.py
asserts them, bench/results/precision.md records them.

    python bench/precision_gate.py [--precision bf16,int8] [--json out.json]
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "bench"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import asr_wer  # noqa: E402

WER_MARGIN = 0.01            # WER a precision may have on the sentences Whisper hears right from fp32 (new errors)
WER_OVERALL_MARGIN = 0.02    # points of corpus WER over fp32's (two words of the 112: where fp32 is already
                             # misheard, Whisper tiny's guesses differ by a word between nearly equal audio)
DURATION_OFF_BY_ONE = 0.05   # fraction of tokens whose duration may differ by one frame
HIGH_BAND_HZ = 8000
HIGH_BAND_DB = 1.0           # |high-band energy, precision vs fp32| in dB, each utterance
N_FFT, HOP, N_MELS = 1024, 256, 80


def mel_filters(sr: int = asr_wer.SAMPLE_RATE, n_fft: int = N_FFT, n_mels: int = N_MELS) -> np.ndarray:
    """[n_mels, n_fft/2 + 1] triangular filters on the HTK mel scale, 0 Hz .. sr/2."""
    mel = lambda f: 2595.0 * np.log10(1.0 + f / 700.0)          # noqa: E731
    hz = lambda m: 700.0 * (10.0 ** (m / 2595.0) - 1.0)          # noqa: E731
    edges = hz(np.linspace(mel(0.0), mel(sr / 2), n_mels + 2))
    bins = np.linspace(0, sr / 2, n_fft // 2 + 1)
    lo, mid, hi = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    return np.maximum(0.0, np.minimum((bins - lo) / (mid - lo), (hi - bins) / (hi - mid)))


def power_spectrogram(a: np.ndarray) -> np.ndarray:
    a = np.asarray(a, np.float64)
    count = 1 + max(0, (len(a) - N_FFT) // HOP)
    frames = np.stack([a[i * HOP:i * HOP + N_FFT] for i in range(count)]) * np.hanning(N_FFT)
    return np.abs(np.fft.rfft(frames, axis=1)) ** 2


def log_mel(a: np.ndarray) -> np.ndarray:
    return np.log10(power_spectrogram(a) @ mel_filters().T + 1e-8)


def log_mel_distance(ref: np.ndarray, x: np.ndarray) -> float:
    """Mean over frames and bands of |log10 mel power difference| x 10 (dB), over the common length
    (lengths differ only where durations do), frames within 60 dB of the loudest only (silence's
    log is noise)."""
    n = min(len(ref), len(x))
    r, y = log_mel(ref[:n]), log_mel(x[:n])
    loud = r.max(axis=1) > r.max() - 6.0
    return float(10.0 * np.mean(np.abs(r[loud] - y[loud])))


def high_band_db(a: np.ndarray) -> float:
    p = power_spectrogram(a)
    f = np.linspace(0, asr_wer.SAMPLE_RATE / 2, p.shape[1])
    return float(10 * np.log10(p[:, f > HIGH_BAND_HZ].sum() + 1e-20))


def ort_reference(texts: list[str], log=sys.stderr) -> dict:
    """The int8 onnxruntime export against torch (its deterministic source) on each sentence's
    ids and voice row: log-mel distances and duration agreement."""
    from kcc.speech.g2p.g2p import G2P
    from kcc.speech.engine import plan
    from kcc.speech.voices import load_voice, style_for
    from oracle.ort_check import load_kmodel, run_ort, run_torch
    files = asr_wer.real_files()
    pack = load_voice(f"{files['voices']}:jf_alpha")
    km = load_kmodel(files["pth"])
    g2p = G2P("en-us")
    dist, exact = [], []
    for text in texts:
        (enc,) = plan(text, g2p, first_limit=None)
        style = style_for(pack, len(enc.phonemes))
        t = run_torch(km, enc.ids, style)
        o = run_ort(files["onnx"], enc.ids, style)
        dist.append(log_mel_distance(t["audio"], o["audio"]))
        exact.append(float(np.mean(t["pred_dur"] == o["pred_dur"])))
        print(f"precision_gate: ort-int8 vs torch {dist[-1]:.2f} dB  {text}", file=log)
    return {"log_mel_db": dist, "mean_log_mel_db": float(np.mean(dist)), "duration_exact_fraction": exact}


class Shared:
    """What every precision's gate compares against, made once: the real weights, the voice, Whisper,
    each sentence's phonemes, fp32's audio and transcript per (sentence, seed), and the int8 export's
    distance to torch (the bf16 and int8 gates of one run share them: half the gate's time)."""

    def __init__(self, seeds=(0, 1), log=sys.stderr):
        from kcc.compiler.build import BuildOptions
        from kcc.model.pipeline import Synthesizer
        from kcc.speech.g2p.g2p import G2P
        from kcc.speech.engine import plan
        from kcc.speech.voices import load_voice, style_for
        self.seeds, self.log = tuple(seeds), log
        self.files = asr_wer.real_files()
        pack = load_voice(f"{self.files['voices']}:jf_alpha")
        g2p = G2P("en-us")
        self.sentences = []                                  # (text, ids, style)
        for text in asr_wer.SENTENCES:
            (enc,) = plan(text, g2p, first_limit=None)
            self.sentences.append((text, enc.ids, style_for(pack, len(enc.phonemes))))
        self.whisper = asr_wer.Whisper(2)
        self.fp32 = self.speak(Synthesizer(self.files["pth"], BuildOptions(precision="fp32"), max_frames=1200))

    def speak(self, synth) -> list[tuple]:
        """(text, seed, SynthOut, Whisper's transcript) per sentence and seed, in that order."""
        synth.set_threads(2)
        heard = []
        for text, ids, style in self.sentences:
            for seed in self.seeds:
                out = synth.synthesize(ids, style, seed=seed)
                heard.append((text, seed, out, self.whisper(out.audio)))
        return heard

    @functools.cached_property
    def reference(self) -> dict:
        return ort_reference(asr_wer.SENTENCES, self.log)


def gate(precision: str, shared: Shared | None = None) -> dict:
    """Run the listening gate for `precision` (e.g. 'bf16') against `shared`'s fp32 (made here if None)."""
    from kcc.compiler.build import BuildOptions
    from kcc.model.pipeline import Synthesizer
    t0 = time.perf_counter()
    shared = shared or Shared()
    ours = shared.speak(Synthesizer(shared.files["pth"], BuildOptions(precision=precision), max_frames=1200))
    rows, refs, heard = [], [], {"fp32": [], precision: []}
    tokens = off1 = worse = 0
    for (text, seed, a, heard_a), (_, _, b, heard_b) in zip(shared.fp32, ours):
        diff = np.abs(a.durations.astype(int) - b.durations.astype(int))
        tokens += diff.size
        off1 += int(np.sum(diff == 1))
        worse += int(np.sum(diff > 1))
        row = {"text": text, "seed": seed, "log_mel_db": log_mel_distance(a.audio, b.audio),
               "high_band_db": high_band_db(b.audio) - high_band_db(a.audio),
               "durations_equal": bool(np.array_equal(a.durations, b.durations)),
               "heard_fp32": heard_a, f"heard_{precision}": heard_b}
        heard["fp32"].append(" ".join(asr_wer.spoken(heard_a)))
        heard[precision].append(" ".join(asr_wer.spoken(heard_b)))
        refs.append(" ".join(asr_wer.spoken(text)))
        rows.append(row)
        print(f"precision_gate: {precision} vs fp32 {row['log_mel_db']:.2f} dB, high band "
              f"{row['high_band_db']:+.2f} dB  {text} (seed {seed})", file=shared.log)
    wer = {p: asr_wer._corpus_wer(refs, h) for p, h in heard.items()}
    clean = [i for i, (r, h) in enumerate(zip(refs, heard["fp32"])) if r == h]
    new_errors = asr_wer._corpus_wer([refs[i] for i in clean], [heard[precision][i] for i in clean]) if clean else 0.0
    reference = shared.reference
    dist = float(np.mean([r["log_mel_db"] for r in rows]))
    hb = max(abs(r["high_band_db"]) for r in rows)
    result = {
        "precision": precision, "seeds": list(shared.seeds), "rows": rows, "wer": wer,
        "wer_where_fp32_is_heard_right": new_errors, "sentences_fp32_heard_right": len(clean),
        "mean_log_mel_db": dist, "ort_int8_vs_torch": reference, "tokens": tokens,
        "durations_off_by_one": off1, "durations_off_by_more": worse, "max_high_band_db": hb,
        "passed": {"wer": new_errors <= WER_MARGIN and wer[precision] <= wer["fp32"] + WER_OVERALL_MARGIN,
                   "log_mel": dist <= reference["mean_log_mel_db"],
                   "durations": worse == 0 and off1 <= DURATION_OFF_BY_ONE * tokens,
                   "high_band": hb <= HIGH_BAND_DB},
        "seconds": round(time.perf_counter() - t0, 1)}
    return result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--precision", default="bf16", help="one or more, comma-separated (they share fp32's side)")
    ap.add_argument("--json", help="also write the figures here")
    args = ap.parse_args(argv)
    shared, results = Shared(), {}
    for precision in args.precision.split(","):
        r = results[precision] = gate(precision, shared)
        print(f"WER fp32 {r['wer']['fp32']:.3f}, {precision} {r['wer'][precision]:.3f}; log-mel distance to fp32 "
              f"{r['mean_log_mel_db']:.2f} dB (ORT int8 vs torch {r['ort_int8_vs_torch']['mean_log_mel_db']:.2f} dB); "
              f"durations off by one {r['durations_off_by_one']}/{r['tokens']}, by more {r['durations_off_by_more']}; "
              f"max high-band change {r['max_high_band_db']:.2f} dB; passed {r['passed']}")
    if args.json:
        one = len(results) == 1
        Path(args.json).write_text(json.dumps(next(iter(results.values())) if one else results, ensure_ascii=False,
                                              indent=1), encoding="utf-8")
    return 0 if all(all(r["passed"].values()) for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
