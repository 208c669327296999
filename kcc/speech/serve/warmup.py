"""Ready means warm: what a server does between loading the model and saying it is ready.

A freshly started server's first request paid for everything done lazily: the G2P of its
language (spaCy's English model, OpenJTalk's dictionary: seconds), the voice pack from disk,
the synthesizer's weight pages and each synthesis thread's arena (faulted in by the first
chunk), and the measured rate the deadline check and Retry-After use.
On the 2-core Zen 4 dev machine that first request took 8.1 s against 0.4 s warm. So before
/ready (HTTP) answers 200 and before Wyoming listens, Warmup:

1. loads every offered voice's pack (VoiceSet.preload; 0.5 MiB each, 27 MiB for all 54), and
   runs every response format's encoder once (PyAV's import, each codec's set-up);
2. makes the G2P of every language the server advertises (its voices' languages and its
   default, or those --languages names) and runs it once on a short text of that language;
3. synthesises one short sentence on every synthesis thread, all stages, twice at two
   lengths: the first cold (not measured), then warm ones measured into the service's rate, so
   the first request's deadline check uses a real figure (chunk sizes come from the request only).

State, not time: `done` is set when all of that has finished (or `error` says why it could
not); the app reads it for /ready.
"""
from __future__ import annotations

import logging
import threading
import time

import numpy as np

from kcc.speech.audio.encoder import Encoder
from kcc.speech.audio.formats import FORMATS, STREAMABLE
from kcc.speech.audio.timestamps import SAMPLE_RATE
from kcc.speech.engine import plan, synthesize_chunks
from kcc.speech.g2p.base import G2PError
from kcc.speech.languages import LANGUAGES
from kcc.speech.serve.scheduler import SchedulerClosed

log = logging.getLogger("kcc.speech.serve")

# A short text per language for its G2P's first call (any text of the language's script does:
# the point is to load its dictionaries and tagger, not to test them).
SAMPLE_TEXT = {
    "en-us": "Hello there, this is a warm-up.", "en-gb": "Hello there, this is a warm-up.",
    "ja": "こんにちは、準備をしています。", "es": "Hola, esto es una prueba.", "fr-fr": "Bonjour, ceci est un essai.",
    "hi": "नमस्ते, यह एक परीक्षण है।", "it": "Ciao, questa è una prova.", "pt-br": "Olá, isto é um teste.",
    "zh": "你好，这是一个测试。",
}
# The syntheses each thread runs: a short and a typical first chunk's sentence.
WARM_SENTENCES = ("Hello there.", "The quick brown fox jumps over the lazy dog near the river bank.")


class Warmup:
    def __init__(self, service, languages: list[str], required: list[str] | None = None):
        """languages: those whose G2P is made before ready (the default language first);
        required: those that must work (the default, those --languages names: a failure is the
        warm-up's); the others, offered by some voice, are skipped with a log line when their
        G2P is not installed (the ja / zh extras), and their requests get the G2P's 422."""
        self.service, self.languages = service, languages
        self.required = set(languages if required is None else required)
        self.skipped: dict[str, str] = {}
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.seconds: dict[str, float] = {}

    @property
    def ready(self) -> bool:
        return self.done.is_set() and self.error is None

    def state(self) -> str:
        if not self.done.is_set():
            return "warming"
        return "ready" if self.error is None else "failed"

    def start(self) -> threading.Thread:
        """Run in the background (the HTTP server listens meanwhile, /ready says 'warming')."""
        t = threading.Thread(target=self.run, name="kcc-warmup", daemon=True)
        t.start()
        return t

    def run(self) -> None:
        try:
            self._timed("voices", self.service.voices.preload)
            for lang in self.languages:
                try:
                    self._timed(f"g2p {lang}", lambda lang=lang: self.service.g2p_for(lang)(SAMPLE_TEXT.get(lang, "Hello.")))
                except (G2PError, ValueError) as exc:
                    if lang in self.required:
                        raise
                    self.skipped[lang] = str(exc)
                    log.warning("%s is not warmed: %s", lang, exc)
            self._timed("encoders", warm_encoders)
            self._timed("synthesis", self._synthesize)
        except SchedulerClosed as exc:   # the server stopped first (e.g. its port was taken): no failure to report
            self.error = exc
            log.info("warm-up stopped: the server is shutting down")
        except BaseException as exc:     # reported by /ready and the log; the server keeps answering
            self.error = exc
            log.exception("warm-up failed")
        finally:
            self.done.set()
        if self.error is None:
            log.info("warm: %s", ", ".join(f"{k} {v:.2f} s" for k, v in self.seconds.items()))

    def _timed(self, what: str, fn) -> None:
        t0 = time.monotonic()
        fn()
        self.seconds[what] = time.monotonic() - t0

    def _synthesize(self) -> None:
        """Each synthesis thread: the sentences once cold, then once more measured."""
        svc = self.service
        lang = self.languages[0] if self.languages else svc.default_language    # 'auto' is no language to warm
        g2p = svc.g2p_for(lang)
        pack = svc.voices.pack(svc.voices.resolve(None, lang))
        chunks = [plan(text, g2p, first_limit=None) for text in WARM_SENTENCES]

        def warm():
            for measured in (False, True):
                for planned in chunks:
                    for enc in planned:
                        t0 = time.monotonic()
                        list(synthesize_chunks([enc], svc.synth, pack))
                        if measured:
                            svc._measure(time.monotonic() - t0, len(enc.ids))   # deadlines and Retry-After (chunk sizes never)
        svc.scheduler.on_each(warm)


def warm_encoders() -> None:
    """Open, feed and finish every response format's encoder once: PyAV's import (130-190 ms on a
    quiet 2-core Xeon) and each codec's first set-up would otherwise land on the first request
    that asks for the format."""
    silence = np.zeros(SAMPLE_RATE // 10, np.float32)
    for fmt in FORMATS:
        enc = Encoder(fmt, streaming=fmt in STREAMABLE)
        try:
            enc.push(silence)
            enc.finish()
        finally:
            enc.close()


def advertised_languages(default: str, voice_languages, named: list[str] | None = None) -> list[str]:
    """The languages warmed: the default and `named` (--languages) if given, else the default
    and every offered voice's language that kcc knows; the default first, no repeats."""
    wanted = [default, *named] if named else [default, *sorted(set(voice_languages))]
    out: list[str] = []
    for lang in wanted:
        if lang in LANGUAGES and lang not in out:
            out.append(lang)
    return out
