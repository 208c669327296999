"""kokoro-onnx's configuration names (kokoro_onnx.config) as kcc answers them, so a program
that imports them from `kokoro_onnx.config` runs with `kcc.config` in its import line.

SAMPLE_RATE and MAX_PHONEME_LENGTH are the model's own figures. EspeakConfig is accepted
and kept: kcc reads espeak-ng through its own G2P (kcc.speech.g2p), so lib_path / data_path
change nothing; a program that passes them still runs. KoKoroConfig checks the paths as
kokoro-onnx does (FileNotFoundError naming the file)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kcc.model.kokoro import SAMPLE_RATE
from kcc.model.vocab import load_vocab

MAX_PHONEME_LENGTH = 510          # phonemes per forward pass: the model's 512 positions less the two pads

__all__ = ["DEFAULT_VOCAB", "MAX_PHONEME_LENGTH", "SAMPLE_RATE", "EspeakConfig", "KoKoroConfig", "get_vocab"]


@dataclass
class EspeakConfig:
    """Where kokoro-onnx finds libespeak-ng and its data; accepted for its programs' sake."""
    lib_path: str | None = None
    data_path: str | None = None


def get_vocab() -> dict[str, int]:
    """The Kokoro v1.0 phoneme vocabulary: symbol -> token id."""
    return dict(load_vocab())


DEFAULT_VOCAB = get_vocab()


class KoKoroConfig:
    """The model and voices paths of a kokoro-onnx Kokoro; validate() says which file is missing."""

    def __init__(self, model_path: str, voices_path: str, espeak_config: EspeakConfig | None = None):
        self.model_path = model_path
        self.voices_path = voices_path
        self.espeak_config = espeak_config

    def validate(self) -> None:
        for what, path in (("Voices", self.voices_path), ("Model", self.model_path)):
            if path is not None and not Path(path).exists():
                raise FileNotFoundError(f"{what} file not found at {path} (kcc.Kokoro() with no paths speaks kcc's "
                                        "default Kokoro-82M v1.0 and its 54 voices)")
