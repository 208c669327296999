"""Bounded fuzzing of the text surface: kcc.speech.engine.plan over random unicode at every speed.

Texts mix control characters (NUL, ESC, C1), lone surrogates, huge words, right-to-left
scripts and marks, emoji with joiners, digits and numbers, punctuation runs, CJK and kana,
combining marks, line separators, and raw bytes that may not be UTF-8. The invariant, for
every speed in 0.25..4: plan returns chunks whose phoneme string is at most the speed's chunk
limit (kcc.speech.text.chunk_limit) and whose frame estimate fits the frame plan, with every word in
order; or it raises SayError or G2PError. Anything else is a finding, and so is a
G2PBackendError (the G2P's third-party backend crashed; kcc names it, but it is a bug). Usage:
    python fuzz/fuzz_text.py [-n 300] [--seed 0] [--seconds 60] [--g2p real|letters] [--lang en-us]
tests/test_cli_hostile.py runs a short loop with the letter G2P and, where espeak-ng is there,
the real one.
"""
from __future__ import annotations

import random
import sys
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]      # kcc from this checkout; seeded.py beside this file

from kcc.speech.g2p.g2p import G2PError  # noqa: E402
from kcc.model.pipeline import DEFAULT_MAX_FRAMES  # noqa: E402
from kcc.speech.engine import G2PBackendError, SayError, plan  # noqa: E402
from kcc.speech.text import MAX_PHONEMES, chunk_limit, frame_estimate  # noqa: E402
from seeded import cases, exit_status, parser  # noqa: E402

SPEEDS = (0.25, 0.5, 1.0, 2.0, 4.0)
_PIECES = [
    lambda r: "".join(chr(r.choice([*range(0, 32), *range(0x7F, 0xA0)])) for _ in range(r.randrange(1, 6))),
    lambda r: r.choice(["\ud800", "a\udfffb", "\udc80"]),                      # lone surrogates
    lambda r: r.choice("abcdefghij") * r.choice([50, 511, 1000, 3000]),          # huge words
    lambda r: r.choice(["שלום עולם", "مرحبا بالعالم", "\u202eevil\u202c", "\u200f\u200e", "abc\u2066def\u2069"]),
    lambda r: r.choice(["🙂", "👩‍👩‍👧‍👦", "🏳️‍🌈", "\u200d" * 5, "\ufe0f", "🇯🇵"]) * r.randrange(1, 30),
    lambda r: r.choice(["0", "42", "3.14159", "1,000,000", "-7", "1e308", "9" * r.randrange(1, 400), "½", "٣"]),
    lambda r: r.choice([".", "!", "?", "…", ",", ";", "—", "(", ")", "\"", "“", "”"]) * r.randrange(1, 60),
    lambda r: r.choice(["日本語のテキスト", "中文文本", "हिन्दी", "한국어", "ｆｕｌｌｗｉｄｔｈ"]),
    lambda r: "e" + "\u0301" * r.randrange(1, 50),                                 # combining marks
    lambda r: r.choice(["\n", "\r\n", "\r", "\u2028", "\u2029", "\v", "\f", "\x85", "\n" * 20]),
    lambda r: "".join(chr(r.randrange(0x20, 0x30000)) for _ in range(r.randrange(1, 30))),
    lambda r: " ".join(r.choice(["the", "quick", "brown", "fox", "Dr.", "St.", "U.S.A.", "e.g."])
                       for _ in range(r.randrange(1, 120))),
]


_WEIGHTS = [3, 1, 3, 3, 3, 3, 3, 3, 2, 3, 3, 5]                                  # surrogates: rarer


def random_text(rng: random.Random) -> str | bytes:
    text = " ".join(rng.choices(_PIECES, _WEIGHTS)[0](rng) for _ in range(rng.randrange(1, 12)))
    if rng.random() < 0.1:                                                         # maybe not UTF-8
        raw = bytearray(text.encode("utf-8", "surrogatepass"))
        for _ in range(rng.randrange(1, 4)):
            raw.insert(rng.randrange(len(raw) + 1), rng.randrange(256))
        return bytes(raw)
    return text


class MemoG2P:
    """The same G2P for every speed of one text: each piece is phonemized once."""

    def __init__(self, g2p):
        self.g2p, self.memo = g2p, {}
        self.description = getattr(g2p, "description", "")

    def __call__(self, text):
        if text not in self.memo:
            self.memo[text] = self.g2p(text)
        from kcc.speech.g2p.g2p import Word
        return [Word(w.text, w.phonemes, w.whitespace) for w in self.memo[text]]


def check_text(text, g2p, speeds=SPEEDS, max_frames: int = DEFAULT_MAX_FRAMES) -> str:
    """'refused' or 'planned'; AssertionError for a broken invariant; anything else propagates."""
    memo = MemoG2P(g2p)
    outcome = None
    for speed in speeds:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                chunks = plan(text, memo, speed=speed, max_frames=max_frames)
            except G2PBackendError as exc:       # a named error, but a backend bug all the same
                raise AssertionError(f"{exc} (text {text!r:.200})") from exc
            except (SayError, G2PError):
                assert outcome in (None, "refused"), f"refused at speed {speed} only: {text!r:.200}"
                outcome = "refused"
                continue
        assert outcome in (None, "planned"), f"planned at speed {speed} only: {text!r:.200}"
        outcome = "planned"
        limit = chunk_limit(MAX_PHONEMES, speed, max_frames)
        for c in chunks:
            assert c.ids, f"an empty chunk at speed {speed}: {text!r:.200}"
            assert len(c.phonemes) <= limit, f"{len(c.phonemes)} phonemes > {limit} at speed {speed}: {text!r:.200}"
            est = frame_estimate(len(c.ids), speed)
            assert est <= max_frames, f"estimate {est:.0f} > {max_frames} frames at speed {speed}: {text!r:.200}"
            assert len(c.word_of) == len(c.ids) and all(-1 <= w < len(c.words) for w in c.word_of)
    return outcome


def run(n: int, seed: int, g2p, seconds: float | None = None, log=print) -> dict[str, int]:
    rng = random.Random(seed)
    counts = {"planned": 0, "refused": 0}
    for i in cases(n, seconds):
        text = random_text(rng)
        try:
            counts[check_text(text, g2p)] += 1
        except AssertionError:
            raise
        except Exception as exc:
            raise AssertionError(f"case {i} (seed {seed}): {type(exc).__name__}: {exc} for {text!r:.300}") from exc
    log(f"fuzz_text: {sum(counts.values())} texts, {counts['planned']} planned, {counts['refused']} refused; no findings")
    return counts


def main(argv=None) -> int:
    ap = parser(__doc__, n=300)
    ap.add_argument("--g2p", choices=["real", "letters"], default="real")
    ap.add_argument("--lang", default="en-us")
    args = ap.parse_args(argv)
    if args.g2p == "real":
        from kcc.speech.g2p.g2p import G2P
        g2p = G2P(args.lang)
    else:
        sys.path.insert(0, str(HERE.parent / "tests"))
        from test_say import LetterG2P
        g2p = LetterG2P()
    return exit_status("fuzz_text", lambda: run(args.n, args.seed, g2p, args.seconds))


if __name__ == "__main__":
    raise SystemExit(main())
