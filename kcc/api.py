"""kcc as a Python library: `Kokoro` (kokoro-onnx's shape) and `KPipeline` (upstream kokoro's).

    import kcc
    tts = kcc.Kokoro()                                   # maps the cached compiled model once
    samples, rate = tts.create("Hello there.", voice="jf_alpha", speed=1.0)
    for chunk in tts.stream(long_text):                  # each chunk as soon as it is made
        play(chunk.audio)                                # chunk.text, .phonemes, .words too
    async for chunk in tts.astream(long_text): ...       # the event loop is never blocked

One Kokoro holds one compiled model and one worker thread: every G2P and synthesis step of
every call runs there, one at a time, so a Kokoro is safe to share between threads and tasks,
holds one synthesis arena (~600 MB at the default frame plan), and never runs a G2P backend
(misaki, OpenJTalk, espeak-ng: not thread-safe) on two threads at once. For parallel
synthesis, make one Kokoro per core you want busy (each maps the same compiled artifact).
"""
from __future__ import annotations

import concurrent.futures
import re
import threading
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import AsyncIterator, Callable, Iterator, Sequence

import numpy as np

from kcc.config import MAX_PHONEME_LENGTH, EspeakConfig, KoKoroConfig
from kcc.model import loader
from kcc.model.kokoro import MAX_SPEED, MIN_SPEED, SAMPLE_RATE
from kcc.speech.engine import (
    NothingToSay,
    SayError,
    check_seed,
    check_speed,
    iter_plan,
    resolve_voice,
    synthesize_chunks,
)
from kcc.speech.g2p.g2p import G2P, G2PError, canonical_language
from kcc.speech.g2p.overrides import load_lexicon
from kcc.speech.audio.trim import trim_silence
from kcc.speech.tensor_like import TensorLike
from kcc.speech.onnx_dropin import (FROM_SESSION, CatalogVoices, KokoroOnnxError, PhonemeInput, Timing,
                                    onnx_language, phoneme_timings, read_vocab_config, read_voice_file)
from kcc.speech.request import SpeechRequest, chunking
from kcc.speech.voices import load_voice, speaking, voice_catalog
from kcc.tokenizer import Tokenizer

_END = object()


@dataclass(frozen=True)
class WordTiming:
    """One word of a chunk and where it sounds, in seconds from the start of the whole text."""
    word: str
    phonemes: str
    start_s: float
    end_s: float


@dataclass(frozen=True)
class SpeechChunk:
    """One synthesised chunk: its text, its phonemes, its audio (float32, 24 kHz mono) and its
    words' timings; offset_s: where its audio starts in the whole text's."""
    index: int
    text: str
    phonemes: str
    audio: np.ndarray
    words: tuple[WordTiming, ...]
    offset_s: float
    durations: np.ndarray               # int32 frames (600 samples) per token, the boundary tokens included
    sample_rate: int = SAMPLE_RATE


class Kokoro:
    """Kokoro-82M compiled to C, loaded once.

    kokoro-onnx's constructor: model_path (a Kokoro ONNX export, kokoro-onnx's kokoro-v1.0.onnx /
    .int8.onnx / .fp16.onnx, imported and compiled once, the compile cached by the file's
    content; or a kokoro-v1_0.pth-layout checkpoint; None: the real Kokoro-82M v1.0, fetched on
    first use) and voices_path (kokoro-onnx's voices-v1.0.bin: its packs are this Kokoro's voices;
    None: kcc's 54). A path that does not exist raises FileNotFoundError, as kokoro-onnx does:
    kcc never swaps in another model silently. espeak_config is accepted and kept (kcc's G2P
    reads espeak-ng itself); vocab_config (a config.json path or dict) is read as kokoro-onnx
    reads it and becomes self.tokenizer's vocabulary, but must agree with the model's (a
    KokoroOnnxError names the first symbol that does not): kcc compiles Kokoro v1.0's.
    Keywords as kcc.model.load: checkpoint (model_path's kcc name), precision (fp32 / bf16 / int8), threads (kernel
    threads), max_frames (frames planned per chunk). voices_dir: directories where voice names
    are also looked up; lexicon: a pronunciation file (kcc say --lexicon); g2p: the English G2P
    backend ('auto', 'lexicon', 'misaki', 'espeak'); log: where compile progress goes (None: silent).

    Errors are the CLI's named classes, all exported from kcc: SayError (text, speed), G2PError,
    VoiceError, SynthesisError, ModelOptionsError / PrecisionError (options), CheckpointError."""

    sample_rate: int = SAMPLE_RATE
    SAMPLE_RATE: int = SAMPLE_RATE
    MAX_PHONEME_LENGTH: int = MAX_PHONEME_LENGTH

    def __init__(self, model_path: str | Path | None = None, voices_path: str | Path | None = None,
                 espeak_config: EspeakConfig | None = None, vocab_config: dict | str | None = None, *,
                 checkpoint: str | Path | None = None, precision: str | None = None,
                 threads: int | None = None, max_frames: int | None = None,
                 voices_dir: Sequence[str | Path] = (), lexicon: str | Path | None = None, g2p: str = "auto",
                 log=None):
        if model_path is not None and checkpoint is not None:
            raise KokoroOnnxError("pass the model once: model_path (kokoro-onnx's name) or checkpoint (kcc's)")
        checkpoint = model_path if model_path is not None else checkpoint
        self.config = KoKoroConfig(checkpoint, voices_path, espeak_config)
        self.config.validate()                                 # FileNotFoundError naming the file, as kokoro-onnx
        self._voice_file = read_voice_file(voices_path) if voices_path is not None else None
        self.tokenizer = Tokenizer(espeak_config, read_vocab_config(vocab_config))
        self._search = [Path(d) for d in voices_dir]
        # kokoro-onnx's attribute: name -> pack, the voices file's or (read on demand) kcc's
        self.voices = self._voice_file if self._voice_file is not None else CatalogVoices(self._search)
        self._backend = g2p
        self._lexicon = None
        if lexicon is not None:
            self._lexicon = load_lexicon(lexicon)
        self.synthesizer = loader.load(checkpoint, precision=precision, threads=threads, max_frames=max_frames,
                                       log=log)
        self._g2ps: dict[str, G2P] = {}
        self._worker = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="kcc-kokoro")
        self._closed = threading.Event()

    @classmethod
    def from_session(cls, session=None, *args, **kwargs):
        """kokoro-onnx builds a Kokoro around an onnxruntime session; kcc has none to take."""
        raise KokoroOnnxError(FROM_SESSION)

    # -- the voices -----------------------------------------------------------------------------
    def get_voices(self) -> list[str]:
        """The voice names this Kokoro knows: the voices file's (sorted, as kokoro-onnx lists
        them) when one was given, else the real model's and those in voices_dir."""
        if self._voice_file is not None:
            return sorted(self._voice_file)
        return list(voice_catalog(self._search))

    def get_voice_style(self, name: str) -> np.ndarray:
        """A voice's pack, float32 (510, 1, 256): what kokoro-onnx's programs blend with numpy."""
        if self._voice_file is not None and name in self._voice_file:
            return self._voice_file[name].copy()
        return load_voice(str(name), self._search)

    def _voice(self, voice):
        """A voices-file name -> its pack; anything else goes to kcc's voice resolution."""
        if isinstance(voice, str) and self._voice_file is not None and voice in self._voice_file:
            return self._voice_file[voice]
        return voice

    # -- speaking -------------------------------------------------------------------------------
    has_timings: bool = True            # kokoro-onnx's flag: kcc's model always reports durations

    def create(self, text: str, voice: str | np.ndarray | None = None, speed: float = 1.0, lang: str = "auto",
               is_phonemes: bool = False, trim: bool = False, sentence_pause: float | None = None,
               clause_pause: float | None = None, continuous: bool = False, seed: int = 0) -> tuple[np.ndarray, int]:
        """The whole text's audio: (float32 samples, 24000). is_phonemes: `text` is phonemes
        (kokoro-onnx's; e.g. from kcc.tokenizer.Tokenizer.phonemize). trim: cut the near-silence
        at both ends (kokoro-onnx's default is True; kcc's is False so that create() gives the
        same samples as `kcc say` and the server for the same request). sentence_pause,
        clause_pause, continuous: kokoro-onnx's, accepted and not used: kcc joins its chunks as
        one continuing utterance (no pause inserted) and the model's own pauses stand."""
        audio, rate, _ = self._create(text, voice, speed, lang, is_phonemes, trim, seed, timed=False)
        return audio, rate

    def create_timed(self, text: str, voice: str | np.ndarray | None = None, speed: float = 1.0,
                     lang: str = "auto", is_phonemes: bool = False, trim: bool = False,
                     sentence_pause: float | None = None, clause_pause: float | None = None,
                     continuous: bool = False, seed: int = 0) -> tuple[np.ndarray, int, list[Timing]]:
        """create() and when each phoneme is spoken: kokoro-onnx's (samples, 24000, [Timing(phoneme,
        start, end)]), one Timing per phoneme the model speaks (spaces included), seconds."""
        return self._create(text, voice, speed, lang, is_phonemes, trim, seed, timed=True)

    def _create(self, text, voice, speed, lang, is_phonemes, trim, seed, timed):
        chunks = list(self._speak(text, voice, speed, lang, seed, is_phonemes, stream=False))   # a whole file
        audio = np.concatenate([c.audio for c in chunks]) if chunks else np.zeros(0, np.float32)
        start = 0
        if trim:
            audio, (start, _end) = trim_silence(audio)
        stamps = phoneme_timings(chunks, self.tokenizer.vocab, SAMPLE_RATE, start, audio.size) if timed else []
        return audio, SAMPLE_RATE, stamps

    def stream(self, text: str, voice: str | np.ndarray | None = None, speed: float = 1.0, lang: str = "auto",
               seed: int = 0, *, is_phonemes: bool = False) -> Iterator[SpeechChunk]:
        """Yield each chunk as soon as it is made (the first one short, ending at a boundary of
        the text, so audio starts early). Text, speed, voice and the first chunk's G2P are
        checked by this call, before the first synthesis: a bad request raises here, not at the
        first next()."""
        return self._speak(text, voice, speed, lang, seed, is_phonemes, stream=True)

    def _speak(self, text, voice, speed, lang, seed, is_phonemes: bool, stream: bool) -> Iterator[SpeechChunk]:
        """The one request (kcc.speech.request) on the worker: stream False plans a whole file as
        `kcc say` does (its chunks end where the text does), True a stream's short first chunks."""
        req = SpeechRequest.build(text, voice=voice, lang=onnx_language(lang), speed=speed, seed=seed, stream=stream)
        return self._drive(self._run(self._steps, req, None, PhonemeInput() if is_phonemes else None))

    async def astream(self, text: str, voice: str | np.ndarray | None = None, speed: float = 1.0,
                      lang: str = "auto", seed: int = 0, *, is_phonemes: bool = False) -> AsyncIterator[SpeechChunk]:
        """stream() as an async generator: each step runs on this Kokoro's worker thread, the
        event loop waits for it without blocking."""
        import asyncio                  # only astream's callers run an event loop (lazy table: why)
        loop = asyncio.get_running_loop()
        self._check_open()
        req = SpeechRequest.build(text, voice=voice, lang=onnx_language(lang), speed=speed, seed=seed, stream=True)
        steps = await loop.run_in_executor(self._worker, self._steps, req, None, PhonemeInput() if is_phonemes else None)
        while True:
            self._check_open()
            chunk = await loop.run_in_executor(self._worker, next, steps, _END)
            if chunk is _END:
                return
            yield chunk

    async def create_stream(self, text: str, voice: str | np.ndarray | None = None, speed: float = 1.0,
                            lang: str = "auto", is_phonemes: bool = False, trim: bool = False,
                            sentence_pause: float | None = None, clause_pause: float | None = None,
                            seed: int = 0) -> AsyncIterator[tuple[np.ndarray, int]]:
        """kokoro-onnx's async stream: yields (float32 samples, 24000) per chunk. trim: the first
        chunk's leading and the last chunk's trailing near-silence are cut (one chunk is held
        back to know which is last)."""
        held = None
        async for chunk in self.astream(text, voice, speed, lang, seed, is_phonemes=is_phonemes):
            audio = chunk.audio
            if trim and held is None:
                audio = audio[trim_silence(audio)[1][0]:]
            if held is not None:
                yield held, SAMPLE_RATE
            held = audio
        if held is not None:
            yield (held[:trim_silence(held)[1][1]] if trim else held), SAMPLE_RATE

    def close(self) -> None:
        """Stop the worker thread (its synthesis arena is freed with it); later calls fail."""
        self._closed.set()
        self._worker.shutdown(wait=True)

    def __enter__(self) -> "Kokoro":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------------
    def _g2p(self, lang: str) -> G2P:
        lang = canonical_language(lang)
        g = self._g2ps.get(lang)
        if g is None:
            g = self._g2ps[lang] = G2P(lang, self._backend, lexicon=self._lexicon)
        return g

    def _steps(self, req: SpeechRequest, chunk_speed: Callable | None = None, g2p=None) -> Iterator[SpeechChunk]:
        """The chunk generator (runs on the worker). Language and voice are decided as every door
        decides them (kcc.speech.voices.speaking; a voices-file name then maps to its pack), the
        chunks planned as kcc.speech.request.chunking says for the request. Everything cheap is
        checked here, at once: the generator returned has its first chunk planned already, so a
        bad text or voice fails the call itself, not the first next()."""
        language, voice = speaking(req.voice, req.lang, req.text if isinstance(req.text, str) else "")
        pack = resolve_voice(self._voice(voice), self._search)
        plan_speed = MIN_SPEED if chunk_speed is not None else req.speed    # a chunk fits at its slowest speed
        chunks = iter_plan(req.text, g2p or self._g2p(language), speed=plan_speed,
                           max_frames=self.synthesizer.max_frames, **chunking(req.stream))
        first = next(chunks)
        return self._chunks(first, chunks, pack, req.speed, req.seed, chunk_speed)

    def _chunks(self, first, rest, pack, speed, seed, chunk_speed) -> Iterator[SpeechChunk]:
        planned = chain([first], rest)
        if chunk_speed is None:
            made = synthesize_chunks(planned, self.synthesizer, pack, speed, seed)
        else:                       # a speed per chunk (KPipeline's callable): each chunk on its own
            made = (c for i, enc in enumerate(planned)
                    for c in synthesize_chunks([enc], self.synthesizer, pack, chunk_speed(enc), seed + i))
        offset = 0
        for i, c in enumerate(made):
            base = offset / SAMPLE_RATE
            shift = 0.0 if chunk_speed is None else base
            words = tuple(WordTiming(w["word"], w["phonemes"], round(float(w["start_s"]) + shift, 6),
                                     round(float(w["end_s"]) + shift, 6)) for w in c.words)
            yield SpeechChunk(i, c.encoded.text, c.encoded.phonemes, c.audio, words, round(base, 6), c.durations)
            offset += c.audio.size

    def _drive(self, steps: Iterator[SpeechChunk]) -> Iterator[SpeechChunk]:
        while True:
            chunk = self._run(next, steps, _END)
            if chunk is _END:
                return
            yield chunk

    def _check_open(self) -> None:
        if self._closed.is_set():
            raise SayError("this Kokoro is closed")

    def _run(self, fn, *args):
        """fn(*args) on the worker thread (G2P and synthesis never run on two threads at once)."""
        self._check_open()
        return self._worker.submit(fn, *args).result()


# -- upstream kokoro's KPipeline -------------------------------------------------------------------
UPSTREAM_REPO = "hexgrad/Kokoro-82M"
# upstream kokoro.pipeline's language tables: its one-letter codes, and the long codes it aliases.
LANG_CODES = {"a": "American English", "b": "British English", "e": "es", "f": "fr-fr", "h": "hi", "i": "it",
              "p": "pt-br", "j": "Japanese", "z": "Mandarin Chinese"}
ALIASES = {"en-us": "a", "en-gb": "b", "es": "e", "fr-fr": "f", "hi": "h", "it": "i", "pt-br": "p", "ja": "j",
           "zh": "z"}


@dataclass
class MToken:
    """One word of a Result, with upstream misaki's MToken fields: text, tag (a part-of-speech tag
    where kcc has one, else ''), whitespace (' ' when a space follows it), phonemes, and start_ts /
    end_ts in seconds from the start of its Result's audio."""
    text: str
    tag: str
    whitespace: str
    phonemes: str | None = None
    start_ts: float | None = None
    end_ts: float | None = None


@dataclass
class ModelOutput:
    """upstream KModel.Output: the audio (float32, 24 kHz) and frames per token (<bos> and <eos>
    included), both TensorLike: numpy arrays that answer .numpy() / .cpu() as tensors do."""
    audio: TensorLike
    pred_dur: TensorLike | None = None


def _mtokens(chunk: SpeechChunk) -> list[MToken]:
    """chunk.words as MTokens, timed from the chunk's own start; whitespace read from its text."""
    out, cursor = [], 0
    for w in chunk.words:
        at = chunk.text.find(w.word, cursor)
        if at >= 0:
            cursor = at + len(w.word)
        space = " " if chunk.text[cursor:cursor + 1].isspace() else ""
        out.append(MToken(w.word, "", space, w.phonemes, round(w.start_s - chunk.offset_s, 6),
                          round(w.end_s - chunk.offset_s, 6)))
    return out


class KPipelineError(ValueError):
    """A KPipeline argument kcc cannot honour (a GPU device, other weights by repo id, the
    transformer G2P, which needs torch); the message names it and what to do instead."""


_DEFAULT_MODELS: dict[tuple, Kokoro] = {}
_DEFAULT_LOCK = threading.Lock()


def _shared_kokoro(**kw) -> Kokoro:
    """One Kokoro per set of options in this process: KPipeline(lang_code='a') and
    KPipeline(lang_code='j') share a model, as upstream's users share one KModel between them."""
    key = tuple(sorted((k, str(v)) for k, v in kw.items()))
    with _DEFAULT_LOCK:
        if key not in _DEFAULT_MODELS:
            _DEFAULT_MODELS[key] = Kokoro(**kw)
        return _DEFAULT_MODELS[key]


class KPipeline:
    """A drop-in for kokoro 0.9.4's KPipeline, on kcc's compiled model (no torch).

    KPipeline(lang_code) takes upstream's codes ('a' American and 'b' British English, 'j'
    Japanese, 'z' Mandarin, 'e' 'f' 'h' 'i' 'p'; or 'en-us', 'ja', ...). model: True (a Kokoro
    shared in this process, built with `kokoro_options`: checkpoint=, precision=, threads=...),
    a kcc.Kokoro, or False (G2P only: results carry no audio). Calling it yields one Result per
    chunk, with .graphemes, .phonemes and .audio (a float32 numpy array, 24 kHz) and unpacking
    as `gs, ps, audio`; .tokens the words as upstream's MTokens (text, tag, whitespace, phonemes,
    start_ts, end_ts), .output.audio / .output.pred_dur (and .audio / .pred_dur) as TensorLike
    arrays, which answer .numpy() / .cpu() as upstream's torch tensors do. load_voice /
    load_single_voice give voice packs as upstream's do (a comma list averaged). Chunks are cut
    as kcc plans them (sized to the frame plan), so their
    boundaries may differ from upstream's."""

    Output = ModelOutput

    @dataclass
    class Result:
        graphemes: str
        phonemes: str
        tokens: list[MToken] | None = None
        output: ModelOutput | None = None
        text_index: int | None = None

        @property
        def audio(self) -> TensorLike | None:
            return None if self.output is None else self.output.audio

        @property
        def pred_dur(self) -> TensorLike | None:
            return None if self.output is None else self.output.pred_dur

        def __iter__(self):
            yield self.graphemes
            yield self.phonemes
            yield self.audio

        def __getitem__(self, index):
            return [self.graphemes, self.phonemes, self.audio][index]

        def __len__(self) -> int:
            return 3

    def __init__(self, lang_code: str, repo_id: str | None = None, model: Kokoro | bool = True, trf: bool = False,
                 en_callable: Callable[[str], str] | None = None, device: str | None = None, **kokoro_options):
        if repo_id not in (None, UPSTREAM_REPO):
            raise KPipelineError(f"repo_id {repo_id!r}: kcc speaks {UPSTREAM_REPO} v1.0; for other weights in its "
                                 "layout pass checkpoint='path/to/model.pth'")
        if device not in (None, "cpu"):
            raise KPipelineError(f"device {device!r}: kcc runs on the CPU (generated C); leave device out")
        if trf:
            raise KPipelineError("trf=True: the transformer G2P needs torch; kcc offers g2p='misaki' (spaCy's "
                                 "small tagger) through kcc.Kokoro(g2p=...)")
        if en_callable is not None:
            raise KPipelineError("en_callable is not supported: kcc's Japanese and Mandarin G2P read English "
                                 "words with its own English backend")
        if not isinstance(lang_code, str):
            raise KPipelineError(f"lang_code must be a string such as 'a', got {type(lang_code).__name__}")
        self.lang_code = lang_code.lower()
        self.language = canonical_language(self.lang_code)       # G2PError names the codes there are
        self.repo_id = UPSTREAM_REPO
        if isinstance(model, Kokoro):
            self.model: Kokoro | None = model
        elif model is True:
            self.model = _shared_kokoro(**kokoro_options)
        elif model is False:
            self.model = None
        else:
            raise KPipelineError(f"model must be True, False or a kcc.Kokoro, got {type(model).__name__}")
        self._g2p: G2P | None = None
        self.voices: dict[str, TensorLike] = {}

    def load_single_voice(self, voice: str) -> TensorLike:
        """One voice's pack, float32 (510, 1, 256): a name kcc knows or a .pt / .npy / .bin path."""
        if voice not in self.voices:
            search = self.model._search if self.model is not None else []
            self.voices[voice] = TensorLike.of(load_voice(voice, search))
        return self.voices[voice]

    def load_voice(self, voice, delimiter: str = ",") -> TensorLike:
        """A pack by name, or the mean of several joined by `delimiter` ('af_bella,af_sky'), as
        upstream's load_voice; an array or tensor comes back as a pack unchanged."""
        if not isinstance(voice, str):
            if hasattr(voice, "detach"):
                voice = voice.detach().cpu().numpy()
            return TensorLike.of(voice)
        if voice not in self.voices:               # kcc's voice grammar: 'a,b' is upstream's plain mean
            spec = voice if delimiter == "," else voice.replace(delimiter, ",")
            search = self.model._search if self.model is not None else []
            self.voices[voice] = TensorLike.of(load_voice(spec, search))
        return self.voices[voice]

    def __call__(self, text: str | list[str], voice: str | np.ndarray | None = None,
                 speed: float | Callable[[int], float] = 1, split_pattern: str | None = r"\n+",
                 model: Kokoro | None = None) -> Iterator["KPipeline.Result"]:
        model = model or self.model
        if model is not None and voice is None:
            raise KPipelineError('Specify a voice: pipeline(text="Hello world!", voice="af_heart")')
        if hasattr(voice, "detach"):                  # a torch tensor loaded as upstream's README shows
            voice = voice.detach().cpu().numpy()
        if not callable(speed):
            check_speed(speed)                        # refused now, not at the first chunk
        if isinstance(text, str):
            segments = re.split(split_pattern, text.strip()) if split_pattern else [text]
        else:
            segments = list(text)
        return self._results(segments, voice, speed, model)

    def _results(self, segments, voice, speed, model) -> Iterator["KPipeline.Result"]:
        for index, graphemes in enumerate(segments):
            if not graphemes.strip():
                continue
            try:
                if model is None:
                    for enc in iter_plan(graphemes, self._g2p_only(), first_limit=None):
                        tokens = [MToken(w.text, "", " " if w.whitespace else "", w.phonemes) for w in enc.words]
                        yield self.Result(enc.text, enc.phonemes, tokens, text_index=index)
                    continue
                chunk_speed = (lambda enc: check_speed(speed(len(enc.phonemes)))) if callable(speed) else None
                req = SpeechRequest.build(graphemes, voice=voice, lang=self.language,
                                          speed=1.0 if chunk_speed else speed, stream=False)
                steps = model._run(model._steps, req, chunk_speed)
            except NothingToSay:                      # upstream skips a segment with no phonemes
                continue
            for chunk in model._drive(steps):
                output = ModelOutput(TensorLike.of(chunk.audio), TensorLike.of(chunk.durations.astype(np.int64)))
                yield self.Result(chunk.text, chunk.phonemes, _mtokens(chunk), output, index)

    def _g2p_only(self) -> G2P:
        if self._g2p is None:
            self._g2p = G2P(self.language)
        return self._g2p
