"""kokoro-onnx's Tokenizer (kokoro_onnx.tokenizer.Tokenizer) on kcc's G2P, so that
`from kcc.tokenizer import Tokenizer` answers the programs that phonemize text themselves and
pass the phonemes to Kokoro.create(..., is_phonemes=True).

phonemize(text, lang) reads the text with the G2P kcc speaks that language with (upstream
KPipeline's: misaki for English, Japanese and Mandarin, espeak-ng through misaki for es, fr, hi,
it, pt), not with bare espeak-ng as kokoro-onnx does, so its phonemes are the ones kcc itself
would say. tokenize(phonemes) maps them to the model's token ids."""
from __future__ import annotations

import threading

from kcc.config import DEFAULT_VOCAB, MAX_PHONEME_LENGTH, EspeakConfig
from kcc.speech.engine import NothingToSay, plan
from kcc.speech.g2p.g2p import G2P
from kcc.speech.onnx_dropin import onnx_language

__all__ = ["Tokenizer"]


class Tokenizer:
    """Text -> phonemes -> token ids. espeak_config is accepted and kept (kcc.config.EspeakConfig)."""

    def __init__(self, espeak_config: EspeakConfig | None = None, vocab: dict | None = None):
        self.espeak_config = espeak_config or EspeakConfig()
        self.vocab = vocab or DEFAULT_VOCAB
        self._g2ps: dict[str, G2P] = {}
        self._lock = threading.Lock()

    @staticmethod
    def normalize_text(text) -> str:
        return text.strip()

    def tokenize(self, phonemes: str, limit: int | None = MAX_PHONEME_LENGTH) -> list[int]:
        """Token ids of the phonemes, symbols outside the vocabulary dropped (as kokoro-onnx does);
        ValueError past `limit` phonemes."""
        if limit is not None and len(phonemes) > limit:
            raise ValueError(f"text is too long, must be less than {limit} phonemes")
        return [i for i in map(self.vocab.get, phonemes) if i is not None]

    def known(self, phonemes: str) -> str:
        """The phonemes that survive tokenize(), one for one."""
        return "".join(p for p in phonemes if p in self.vocab)

    def phonemize(self, text: str, lang: str = "en-us", norm: bool = True) -> str:
        """The text's phonemes in `lang` (kokoro-onnx's codes: 'en-us', 'en-gb', 'fr-fr', 'es',
        'it', 'pt-br', 'hi', 'ja', 'cmn'/'zh'; 'auto' detects it); '' for text with none."""
        if norm:
            text = self.normalize_text(text)
        code = onnx_language(lang)
        with self._lock:
            g2p = self._g2ps.get(code)
            if g2p is None:
                g2p = self._g2ps[code] = G2P(code)
        try:
            chunks = plan(text, g2p, first_limit=None)
        except NothingToSay:
            return ""
        return " ".join(c.phonemes for c in chunks).strip()
