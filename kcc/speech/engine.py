"""The speech engine every front-end calls (`kcc say`, the server, Wyoming, batch, books, the
Python API kcc.api): text -> G2P -> chunks sized for the frame plan -> synthesis -> audio with
word timestamps.

`synth` is anything with `synthesize(ids, ref_s, speed=, seed=) -> (audio, durations)` in the
shape of kcc.model.pipeline.Synthesis: the compiled Synthesizer (load_synthesizer), or a fake in
tests. Each chunk takes the voice pack's row for its phoneme count (upstream's pack[len(ps) - 1])
and the seed plus its index; chunks are joined end to end, and their word timestamps shifted by
the samples before. Planning is lazy (iter_plan) and synthesis yields each chunk as it is made
(synthesize_chunks), so a front-end can stream with one chunk of audio in memory.
"""
from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np

from kcc.model.loader import load
from kcc.model.pipeline import DEFAULT_MAX_FRAMES, FrameOverflow
from kcc.speech.g2p.g2p import G2P, Encoded, G2PError, Word, decode_text, encode
from kcc.speech.request import FIELDS, NothingToSay, SayError, SpeechRequest, chunking  # noqa: F401  (re-exported)
from kcc.speech.sentences import ends_sentence as _ends_sentence
from kcc.speech.text import MAX_PHONEMES, PACK_PHONEMES, chunk_limit, chunk_words, clean_text, iter_chunks, iter_paragraphs, pieces, word_level
from kcc.speech.audio.timestamps import SAMPLE_RATE, SAMPLES_PER_FRAME, word_timestamps
from kcc.speech.voices import PACK_ROWS, STYLE_DIM, check_plausible, default_voice_for, load_voice, speaking, style_for, validate_pack


@dataclass
class Chunk:
    index: int
    encoded: Encoded
    audio: np.ndarray                    # float32, this chunk only
    durations: np.ndarray                # int32 [ids + 2]
    offset: int                          # samples before it in the joined audio
    words: list[dict]                    # timestamps, already offset


@dataclass
class SayResult:
    audio: np.ndarray
    chunks: list[Chunk]
    sample_rate: int = SAMPLE_RATE
    g2p: str = ""
    seconds: float = 0.0
    words: list[dict] = field(default_factory=list)

    def timestamps_json(self) -> dict:
        return timestamps_document(self.audio.size, self.g2p, self.words,
                                   [chunk_summary(c, self.sample_rate) for c in self.chunks], self.sample_rate)


def random_voice(seed: int = 0) -> np.ndarray:
    """A seeded stand-in pack (510 x 1 x 256), on the scale of real Kokoro style rows: for
    tests and benchmarks only; nothing picks it by default."""
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal((PACK_ROWS, 1, STYLE_DIM))).astype(np.float32)


def resolve_voice(voice, search: list[Path] | None = None, language: str = "") -> np.ndarray:
    """A pack from a spec string (kcc.speech.voices.load_voice: a name, a path or a blend), an array,
    or None: the default voice of `language` (kcc.speech.voices.default_voice_for)."""
    if voice is None:
        return load_voice(default_voice_for(language), search)
    if isinstance(voice, np.ndarray):      # held to the envelope a file's pack is (an all-zero or
        return check_plausible(validate_pack(voice, "array"), "array")   # constant one speaks at 4-8x full scale)
    return load_voice(str(voice), search)


def check_speed(speed) -> float:
    """The one speed check (kcc.speech.request's declaration): RequestError, a SayError."""
    return FIELDS["speed"].check(speed)


def check_seed(value) -> int:
    """The one seed check (kcc.speech.request's declaration): RequestError, a SayError."""
    return FIELDS["seed"].check(value)


def iter_plan(text, g2p, limit: int = MAX_PHONEMES, first_limit: "int | Sequence[int] | None" = None,
              speed: float = 1.0, max_frames: int = DEFAULT_MAX_FRAMES, min_rest: int = 0,
              pack: int | None = PACK_PHONEMES) -> Iterator[Encoded]:
    """Text (str or UTF-8 bytes) -> encoded chunks, lazily, each <= limit phonemes and sized so
    its frames at `speed` fit `max_frames` (kcc.speech.text.chunk_limit); None: a chunk ends only
    where the text does (a whole file); first_limit: the first chunk <= it where a boundary of the
    text allows (a sequence: the first chunks' limits, across paragraphs; min_rest: see
    kcc.speech.text.iter_chunks; kcc.speech.request.chunking gives both for a stream); pack: whole
    sentences per chunk up to this many phonemes (kcc.speech.text.PACK_PHONEMES, every door's);
    words in order. G2P runs one paragraph piece ahead of the chunks."""
    text = clean_text(decode_text(text))
    if not text.strip():
        raise NothingToSay("input text is empty")
    limit = chunk_limit(limit, check_speed(speed), max_frames)
    ramp = [first_limit] if isinstance(first_limit, int) else list(first_limit or ())
    n = 0
    for para in iter_paragraphs(text):
        for words in iter_chunks(_paragraph_words(para, g2p), limit, ramp[n:], min_rest, pack):
            enc = encode(words, where=f"chunk {n + 1}")
            if enc.ids:
                n += 1
                yield enc
    if n == 0:
        raise NothingToSay("the text produced no phonemes to speak")


class G2PBackendError(G2PError):
    """The G2P backend (misaki, espeak-ng, spaCy: third-party code) failed on a piece of text;
    the message names the piece and the backend's own error."""


def _paragraph_words(para: str, g2p) -> Iterator[Word]:
    for piece, spaced in pieces(para):
        try:
            words = g2p(piece)
        except G2PError:
            raise
        except Exception as exc:
            raise G2PBackendError(f"G2P failed on the text {piece[:60]!r}{'...' if len(piece) > 60 else ''}: "
                                  f"{type(exc).__name__}: {str(exc)[:200]}") from exc
        if words and spaced:
            words[-1].whitespace = True
        yield from words


def plan(text, g2p, limit: int = MAX_PHONEMES, first_limit: "int | Sequence[int] | None" = None,
         speed: float = 1.0, max_frames: int = DEFAULT_MAX_FRAMES, min_rest: int = 0,
         pack: int | None = PACK_PHONEMES) -> list[Encoded]:
    """iter_plan, all of it (errors anywhere in the text surface before any synthesis)."""
    return list(iter_plan(text, g2p, limit, first_limit, speed, max_frames, min_rest, pack))


def split_encoded(enc: Encoded, parts: int) -> list[Encoded]:
    """A chunk cut into about `parts` shorter chunks at word boundaries (words cut if need be)."""
    limit = max(1, -(-len(enc.phonemes) // max(2, parts)))
    with warnings.catch_warnings():     # cutting a long word here is the point, not news
        warnings.simplefilter("ignore")
        out = [encode(ws, where="chunk part") for ws in chunk_words(enc.words, limit)]
    return [e for e in out if e.ids]


def _synthesize_fitting(enc: Encoded, synth, pack: np.ndarray, speed: float, seed: int,
                        lead_frames: int | None = None, continues: bool = False) -> list[tuple[Encoded, object]]:
    """[(part, synthesis)] for one chunk: itself, or, when its durations overflow the frame plan
    (the planning estimate was beaten), its parts, each retried the same way. lead_frames caps
    the first part's leading silence, None leaves it as predicted; `continues` (the text goes on
    after the chunk: Synthesizer.synthesize) holds for the last part as given, for every part
    before it always."""
    opts = {"lead_frames": lead_frames} if lead_frames is not None else {}
    if continues:
        opts["continues"] = True
    try:
        return [(enc, synth.synthesize(enc.ids, style_for(pack, len(enc.phonemes)), speed=speed, seed=seed, **opts))]
    except FrameOverflow as exc:
        if len(enc.ids) < 2:
            raise
        parts = split_encoded(enc, -(-exc.frames * 10 // (exc.planned * 9)))
        if len(parts) < 2:
            raise
        return [r for i, part in enumerate(parts)
                for r in _synthesize_fitting(part, synth, pack, speed, seed, lead_frames if i == 0 else None,
                                             continues or i < len(parts) - 1)]


def ends_sentence(enc: Encoded) -> bool:
    """The chunk ends a sentence (kcc.speech.sentences: closing quotes aside; a Devanagari danda
    the G2P dropped from the phonemes counts by the last word's text)."""
    words = getattr(enc, "words", None)
    return _ends_sentence(enc.phonemes) or bool(words) and word_level(words[-1]) == 0


def synthesize_chunks(chunks: Iterable[Encoded], synth, pack: np.ndarray, speed: float = 1.0, seed: int = 0,
                      progress: Callable[[Chunk], None] | None = None, first_lead_frames: int | None = None,
                      joins: bool = True) -> Iterator[Chunk]:
    """Yield each chunk's audio as soon as it is made (the server streams these). A chunk whose
    frames overflow the plan is synthesised in parts and still yields one Chunk (its durations
    the parts' one after another), so callers see one Chunk per planned chunk.
    first_lead_frames: the most leading silence of the first chunk (a stream's listener waits
    through it; None: as the model predicts it). joins: a chunk that ends inside a sentence,
    with another after it, is synthesised as continuing (Synthesizer.synthesize `continues`:
    no utterance-final lengthening and pause at the join); False: every chunk as an utterance.
    Whether such a chunk is followed by another is known by taking the next chunk first.
    progress: called with each Chunk once it is made (`kcc say` draws its bar from it; the
    engine itself prints nothing)."""
    speed = check_speed(speed)
    offset = 0
    ahead = iter(chunks)
    enc, i = next(ahead, None), 0
    while enc is not None:
        peeked = joins and not ends_sentence(enc)
        following = next(ahead, None) if peeked else None
        audio_parts, durations, words, at = [], [], [], offset
        for part, out in _synthesize_fitting(enc, synth, pack, speed, seed + i,
                                             first_lead_frames if i == 0 else None, following is not None):
            audio = np.asarray(out.audio, dtype=np.float32).reshape(-1)
            d = np.asarray(out.durations).reshape(-1)
            frames = int(d.sum())
            if audio.size != frames * SAMPLES_PER_FRAME:
                warnings.warn(f"chunk {i + 1}: {audio.size} samples but {frames} frames x {SAMPLES_PER_FRAME}; "
                              "timestamps are scaled to the audio", stacklevel=2)
            words += word_timestamps(part, d, audio.size, at)
            audio_parts.append(audio)
            durations.append(d)
            at += audio.size
        audio = audio_parts[0] if len(audio_parts) == 1 else np.concatenate(audio_parts)
        chunk = Chunk(i, enc, audio, np.concatenate(durations), offset, words)
        yield chunk
        offset += audio.size
        if progress is not None:
            progress(chunk)
        enc, i = following if peeked else next(ahead, None), i + 1


def say(text, synth, voice=None, speed: float = 1.0, seed: int = 0, g2p=None,
        search: list[Path] | None = None, progress: Callable[[Chunk], None] | None = None,
        chunks: list[Encoded] | None = None) -> SayResult:
    """The whole text's audio in memory (the CLI streams to a file instead: speak_to_file).
    `chunks`: the text already planned with `plan` (then `text` is not phonemized again)."""
    t0 = time.perf_counter()
    speed = check_speed(speed)
    language, voice = speaking(voice, getattr(g2p, "language", "auto"), "" if chunks else decode_text(text))
    pack = resolve_voice(voice, search)
    g2p = g2p or G2P(language)
    chunks = chunks or plan(text, g2p, speed=speed, max_frames=getattr(synth, "max_frames", DEFAULT_MAX_FRAMES))
    done = list(synthesize_chunks(chunks, synth, pack, speed, seed, progress or None))
    audio = np.concatenate([c.audio for c in done]) if done else np.zeros(0, np.float32)
    return SayResult(audio, done, g2p=getattr(g2p, "description", type(g2p).__name__),
                     seconds=time.perf_counter() - t0, words=[w for c in done for w in c.words])


def timestamps_document(samples: int, g2p: str, words: list[dict], chunks: list[dict],
                        sample_rate: int = SAMPLE_RATE) -> dict:
    return {"sample_rate": sample_rate, "audio_seconds": round(samples / sample_rate, 6),
            "g2p": g2p, "words": words, "chunks": chunks}


def chunk_summary(c: Chunk, sample_rate: int = SAMPLE_RATE) -> dict:
    return {"text": c.encoded.text, "phonemes": c.encoded.phonemes,
            "start_s": round(c.offset / sample_rate, 6),
            "end_s": round((c.offset + c.audio.size) / sample_rate, 6)}


def load_synthesizer(checkpoint: str | None, max_frames: int | None = None, native: bool = False,
                     threads: int | None = None, log=sys.stderr, precision: str | None = None):
    """kcc.model.load with the command line's positional order: the one place a front-end loads
    the model (tests replace it with a fake)."""
    return load(checkpoint, precision=precision, threads=threads, max_frames=max_frames, native=native, log=log)
