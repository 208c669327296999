"""Text to speech, shared by `kcc say` and `kcc serve`: G2P -> chunks -> synthesis -> joined audio.

`synth` is anything with `synthesize(ids, ref_s, speed=, seed=) -> (audio, durations)` in the
shape of kcc.pipeline.Synthesis: the compiled Synthesizer, or a fake in tests. Each chunk takes
the voice pack's row for its phoneme count (upstream's pack[len(ps) - 1]) and the seed plus its
index; chunks are joined end to end, and their word timestamps shifted by the samples before.
"""
from __future__ import annotations

import sys
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from kcc.g2p import G2P, Encoded, G2PError, decode_text, encode
from kcc.text import MAX_PHONEMES, chunk_words, paragraphs
from kcc.timestamps import SAMPLE_RATE, SAMPLES_PER_FRAME, word_timestamps
from kcc.voices import DEFAULT_VOICE, PACK_ROWS, STYLE_DIM, load_voice, style_for, validate_pack

MIN_SPEED, MAX_SPEED = 0.25, 4.0         # OpenAI's range; the circuits accept (0, 5]


class SayError(ValueError):
    """The request cannot be spoken; the message names the problem."""


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
        return {"sample_rate": self.sample_rate, "audio_seconds": round(self.audio.size / self.sample_rate, 6),
                "g2p": self.g2p, "words": self.words,
                "chunks": [{"text": c.encoded.text, "phonemes": c.encoded.phonemes,
                            "start_s": round(c.offset / self.sample_rate, 6),
                            "end_s": round((c.offset + c.audio.size) / self.sample_rate, 6)}
                           for c in self.chunks]}


def random_voice(seed: int = 0) -> np.ndarray:
    """A seeded stand-in pack (510 x 1 x 256), on the scale of real Kokoro style rows: for
    tests and benchmarks only; nothing picks it by default."""
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal((PACK_ROWS, 1, STYLE_DIM))).astype(np.float32)


def resolve_voice(voice, search: list[Path] | None = None) -> np.ndarray:
    """A pack from a spec string (kcc.voices.load_voice: a name, a path or a blend), an array,
    or None: the default real voice (kcc.voices.DEFAULT_VOICE)."""
    if voice is None:
        return load_voice(DEFAULT_VOICE, search)
    if isinstance(voice, np.ndarray):
        return validate_pack(voice, "array")
    return load_voice(str(voice), search)


def check_speed(speed) -> float:
    try:
        s = float(speed)
    except (TypeError, ValueError):
        raise SayError(f"speed must be a number, got {speed!r}") from None
    if not (np.isfinite(s) and MIN_SPEED <= s <= MAX_SPEED):
        raise SayError(f"speed must be between {MIN_SPEED} and {MAX_SPEED}, got {speed!r}")
    return s


# The first chunk is cut short (at a phrase boundary) so the first audio comes early:
# measured on a 996-word text, 11.8 s to first audio with a full 456-phoneme first chunk,
# 3.2 s with a 91-phoneme one (bench/results/bench_synth.md).
FIRST_CHUNK_PHONEMES = 100


def plan(text, g2p, limit: int = MAX_PHONEMES, first_limit: int | None = FIRST_CHUNK_PHONEMES) -> list[Encoded]:
    """Text (str or UTF-8 bytes) -> encoded chunks, each <= limit phonemes (the first <=
    first_limit where a boundary allows), words in order."""
    text = decode_text(text)
    if not text.strip():
        raise SayError("input text is empty")
    chunks: list[Encoded] = []
    for para in paragraphs(text):
        words = g2p(para)
        pieces = chunk_words(words, limit)
        if first_limit and not chunks and pieces and first_limit < limit:
            head = chunk_words(words, first_limit)[0]
            if head == words[:len(head)] and len(head) < len(words):
                pieces = [head, *chunk_words(words[len(head):], limit)]
        for words in pieces:
            enc = encode(words, where=f"chunk {len(chunks) + 1}")
            if enc.ids:
                chunks.append(enc)
    if not chunks:
        raise SayError("the text produced no phonemes to speak")
    return chunks


def synthesize_chunks(chunks: list[Encoded], synth, pack: np.ndarray, speed: float = 1.0, seed: int = 0,
                      progress: "Progress | None" = None) -> Iterator[Chunk]:
    """Yield each chunk's audio as soon as it is made (the server streams these)."""
    speed = check_speed(speed)
    offset = 0
    for i, enc in enumerate(chunks):
        out = synth.synthesize(enc.ids, style_for(pack, len(enc.phonemes)), speed=speed, seed=seed + i)
        audio = np.asarray(out.audio, dtype=np.float32).reshape(-1)
        durations = np.asarray(out.durations).reshape(-1)
        frames = int(durations.sum())
        if audio.size != frames * SAMPLES_PER_FRAME:
            warnings.warn(f"chunk {i + 1}: {audio.size} samples but {frames} frames x {SAMPLES_PER_FRAME}; "
                          "timestamps are scaled to the audio", stacklevel=2)
        yield Chunk(i, enc, audio, durations, offset, word_timestamps(enc, durations, audio.size, offset))
        offset += audio.size
        if progress is not None:
            progress.update(i + 1, offset / SAMPLE_RATE)
    if progress is not None:
        progress.close()


def say(text, synth, voice=None, speed: float = 1.0, seed: int = 0, g2p=None,
        search: list[Path] | None = None, progress: "Progress | bool | None" = None,
        chunks: list[Encoded] | None = None) -> SayResult:
    """`chunks`: the text already planned with `plan` (then `text` is not phonemized again)."""
    t0 = time.perf_counter()
    speed = check_speed(speed)
    pack = resolve_voice(voice, search)
    g2p = g2p or G2P()
    chunks = chunks or plan(text, g2p)
    if not isinstance(progress, Progress):
        progress = Progress(len(chunks), enabled=progress)
    done = list(synthesize_chunks(chunks, synth, pack, speed, seed, progress))
    audio = np.concatenate([c.audio for c in done]) if done else np.zeros(0, np.float32)
    return SayResult(audio, done, g2p=getattr(g2p, "description", type(g2p).__name__),
                     seconds=time.perf_counter() - t0, words=[w for c in done for w in c.words])


class Progress:
    """A one-line bar on stderr; on by default only for a tty and more than one chunk."""

    def __init__(self, total: int, enabled: bool | None = None, stream=None):
        self.total, self.stream = total, stream or sys.stderr
        isatty = getattr(self.stream, "isatty", lambda: False)()
        self.enabled = bool(enabled) if enabled is not None else (isatty and total > 1)
        self.t0 = time.perf_counter()
        if self.enabled:
            self.update(0, 0.0)

    def update(self, done: int, audio_s: float) -> None:
        if not self.enabled:
            return
        n = 30 * done // max(1, self.total)
        self.stream.write(f"\rkcc say: [{'#' * n}{'.' * (30 - n)}] {done}/{self.total} chunks, "
                          f"{audio_s:.1f} s audio, {time.perf_counter() - self.t0:.1f} s")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
            self.enabled = False


# -- command line ----------------------------------------------------------------------------
def load_synthesizer(checkpoint: str | None, max_frames: int | None = None, native: bool = False,
                     threads: int | None = None, log=sys.stderr):
    """The compiled Synthesizer: the real Kokoro-82M by default, or the checkpoint at a path.
    The first run compiles it into a cached artifact; later runs map that artifact.
    threads: kernel threads (default: every core this process may use; kcc.threads)."""
    from kcc.build import BuildOptions
    from kcc.model_store import load_model
    from kcc.pipeline import DEFAULT_MAX_FRAMES
    from kcc.threads import resolve_threads
    n = resolve_threads(threads)
    synth = load_model(checkpoint, BuildOptions(opt="-O3" if native else "-O2", native=native),
                       max_frames=max_frames or DEFAULT_MAX_FRAMES, log=log)
    synth.set_threads(n)
    return synth


def read_input(args) -> str:
    if args.text_file:
        data = sys.stdin.buffer.read() if args.text_file == "-" else Path(args.text_file).read_bytes()
        return decode_text(data, f"text file {args.text_file}")
    if args.text is None:
        raise SayError("no text: pass it as an argument or with --text-file PATH (- for stdin)")
    return decode_text(args.text, "the text argument")


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"kcc: warning: {message}", file=sys.stderr)


def run_cli(args) -> int:
    import json
    import os
    from kcc.pipeline import SynthesisError
    from kcc.voices import VoiceError
    from kcc.wav import write_wav
    warnings.showwarning = _show_warning
    try:
        text = read_input(args)
        check_speed(args.speed)
        g2p = G2P(args.lang, args.g2p)
        print(f"kcc: G2P: {g2p.description}", file=sys.stderr)
        pack = resolve_voice(args.voice, [Path(d) for d in args.voices_dir])
        chunks = plan(text, g2p)           # text errors surface before the (slow) compile
        synth = load_synthesizer(args.checkpoint or os.environ.get("KCC_CHECKPOINT"), args.max_frames,
                                 native=getattr(args, "native", False), threads=getattr(args, "threads", None))
        result = say(text, synth, pack, args.speed, args.seed, g2p, chunks=chunks,
                     progress=Progress(len(chunks), enabled=True if args.progress else None))
    except (SayError, G2PError, VoiceError, SynthesisError) as exc:
        print(f"kcc: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    write_wav(args.out, result.audio)
    if args.timestamps:
        tmp = Path(f"{args.timestamps}.part")
        tmp.write_text(json.dumps(result.timestamps_json(), ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(tmp, args.timestamps)
    print(f"{args.out}: {result.audio.size / SAMPLE_RATE:.2f} s, {len(result.chunks)} chunk(s), "
          f"{sum(len(c.encoded.ids) for c in result.chunks)} phonemes, {result.seconds:.1f} s")
    return 0
