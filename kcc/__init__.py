"""kcc, the Kokoro Circuit Compiler: declared circuits -> checked generated C11 -> X-Ray parity.

The Python API (kcc.api): `kcc.Kokoro` (create / stream / astream, kokoro-onnx's shape) and
`kcc.KPipeline` (upstream kokoro's), with the named errors the CLI raises; kokoro-onnx's names
(SAMPLE_RATE, EspeakConfig, kcc.tokenizer.Tokenizer, kcc.config) so its import lines need only
`kokoro_onnx` changed to `kcc`. They are imported on
first use, so `import kcc` (and every `kcc` command) does not pay for G2P or the compiler."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from kcc.version import __version__

# name -> the module that defines it
_EXPORTS = {
    "Kokoro": "kcc.api", "KPipeline": "kcc.api", "SpeechChunk": "kcc.api", "WordTiming": "kcc.api",
    "KPipelineError": "kcc.api",
    # kokoro-onnx's top-level names, so `from kokoro_onnx import X` runs as `from kcc import X`
    "SAMPLE_RATE": "kcc.config", "MAX_PHONEME_LENGTH": "kcc.config", "EspeakConfig": "kcc.config",
    "KoKoroConfig": "kcc.config", "Tokenizer": "kcc.tokenizer", "KokoroOnnxError": "kcc.speech.onnx_dropin",
    "SayError": "kcc.speech.request", "NothingToSay": "kcc.speech.request", "RequestError": "kcc.speech.request",
    "G2PError": "kcc.speech.g2p.g2p", "VoiceError": "kcc.speech.voices", "OutputError": "kcc.speech.audio.outputs",
    "SynthesisError": "kcc.model.pipeline", "ModelOptionsError": "kcc.model.loader",
    "CheckpointError": "kcc.weights.bounded_read", "PrecisionError": "kcc.compiler.precision",
    "ThreadsError": "kcc.compiler.threads", "BuildError": "kcc.compiler.build",
    "design_voice": "kcc.speech.voice_design.run", "TargetAudioError": "kcc.speech.voice_design.target",
    "DesignError": "kcc.speech.voice_design.search",
}
__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:                 # what type checkers and IDEs see; at run time __getattr__ imports them
    from kcc.api import Kokoro, KPipeline, KPipelineError, SpeechChunk, WordTiming  # noqa: F401
    from kcc.compiler.build import BuildError  # noqa: F401
    from kcc.config import MAX_PHONEME_LENGTH, SAMPLE_RATE, EspeakConfig, KoKoroConfig  # noqa: F401
    from kcc.speech.onnx_dropin import KokoroOnnxError  # noqa: F401
    from kcc.tokenizer import Tokenizer  # noqa: F401
    from kcc.compiler.precision import PrecisionError  # noqa: F401
    from kcc.compiler.threads import ThreadsError  # noqa: F401
    from kcc.model.loader import ModelOptionsError  # noqa: F401
    from kcc.model.pipeline import SynthesisError  # noqa: F401
    from kcc.speech.g2p.g2p import G2PError  # noqa: F401
    from kcc.speech.audio.outputs import OutputError  # noqa: F401
    from kcc.speech.request import NothingToSay, RequestError, SayError  # noqa: F401
    from kcc.speech.voices import VoiceError  # noqa: F401
    from kcc.speech.voice_design.run import design_voice  # noqa: F401
    from kcc.speech.voice_design.search import DesignError  # noqa: F401
    from kcc.speech.voice_design.target import TargetAudioError  # noqa: F401
    from kcc.weights.bounded_read import CheckpointError  # noqa: F401


def __getattr__(name: str):
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'kcc' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value       # the next access is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
