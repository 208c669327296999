"""Text to speech, shared by `kcc say` and `kcc serve`: G2P -> chunks -> synthesis -> joined audio.

`synth` is anything with `synthesize(ids, ref_s, speed=, seed=) -> (audio, durations)` in the
shape of kcc.model.pipeline.Synthesis: the compiled Synthesizer, or a fake in tests. Each chunk takes
the voice pack's row for its phoneme count (upstream's pack[len(ps) - 1]) and the seed plus its
index; chunks are joined end to end, and their word timestamps shifted by the samples before.
Planning is lazy and sized for the frame plan at the asked speed (kcc.speech.text), and `kcc say`
streams each chunk into its output file as it is made, so memory holds one chunk of audio.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np

from kcc.speech.g2p import G2P, Encoded, G2PError, Word, decode_text, encode
from kcc.speech.progress_bar import WIDTH, ProgressBar
from kcc.model.pipeline import DEFAULT_MAX_FRAMES, FrameOverflow
from kcc.speech.text import MAX_PHONEMES, chunk_limit, chunk_words, clean_text, iter_chunks, iter_paragraphs, pieces
from kcc.speech.timestamps import SAMPLE_RATE, SAMPLES_PER_FRAME, word_timestamps
from kcc.speech.voices import DEFAULT_VOICE, PACK_ROWS, STYLE_DIM, load_voice, style_for, validate_pack

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
        return timestamps_document(self.audio.size, self.g2p, self.words,
                                   [chunk_summary(c, self.sample_rate) for c in self.chunks], self.sample_rate)


def random_voice(seed: int = 0) -> np.ndarray:
    """A seeded stand-in pack (510 x 1 x 256), on the scale of real Kokoro style rows: for
    tests and benchmarks only; nothing picks it by default."""
    rng = np.random.default_rng(seed)
    return (0.1 * rng.standard_normal((PACK_ROWS, 1, STYLE_DIM))).astype(np.float32)


def resolve_voice(voice, search: list[Path] | None = None) -> np.ndarray:
    """A pack from a spec string (kcc.speech.voices.load_voice: a name, a path or a blend), an array,
    or None: the default real voice (kcc.speech.voices.DEFAULT_VOICE)."""
    if voice is None:
        return load_voice(DEFAULT_VOICE, search)
    if isinstance(voice, np.ndarray):
        return validate_pack(voice, "array")
    return load_voice(str(voice), search)


def check_speed(speed) -> float:
    if isinstance(speed, bool):          # float(True) is 1.0: a JSON or CSV true is no speed
        raise SayError(f"speed must be a number, got {speed!r}")
    try:
        s = float(speed)
    except (TypeError, ValueError):
        raise SayError(f"speed must be a number, got {speed!r}") from None
    if not (np.isfinite(s) and MIN_SPEED <= s <= MAX_SPEED):
        raise SayError(f"speed must be between {MIN_SPEED} and {MAX_SPEED}, got {speed!r}")
    return s


# --max-frames: the back stages' arena grows with it. 8192 frames (3.4 min) hold a full
# 510-phoneme chunk even at speed 0.25; below 64 a single slow token may not fit.
MIN_MAX_FRAMES, MAX_MAX_FRAMES = 64, 8192


def check_max_frames(value) -> int:
    """None: the default plan (kcc.model.pipeline.DEFAULT_MAX_FRAMES); else a whole number in range."""
    if value is None:
        return DEFAULT_MAX_FRAMES
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_MAX_FRAMES <= value <= MAX_MAX_FRAMES:
        raise SayError(f"--max-frames must be a whole number from {MIN_MAX_FRAMES} to {MAX_MAX_FRAMES}, got {value!r}")
    return value


def check_precision(value: str | None) -> str | None:
    """--precision, refused by name before any G2P or compile (int8 compute is not built yet)."""
    if value is None:
        return None
    from kcc.compiler.precision import check
    return check(value)


# The first chunk is cut short (at a phrase boundary) so the first audio comes early:
# measured on a 996-word text, 11.8 s to first audio with a full 456-phoneme first chunk,
# 3.2 s with a 91-phoneme one (bench/results/bench_synth.md).
FIRST_CHUNK_PHONEMES = 100


def iter_plan(text, g2p, limit: int = MAX_PHONEMES, first_limit: "int | Sequence[int] | None" = FIRST_CHUNK_PHONEMES,
              speed: float = 1.0, max_frames: int = DEFAULT_MAX_FRAMES, min_rest: int = 0) -> Iterator[Encoded]:
    """Text (str or UTF-8 bytes) -> encoded chunks, lazily, each <= limit phonemes and sized so
    its frames at `speed` fit `max_frames` (kcc.speech.text.chunk_limit); the first <= first_limit where
    a boundary allows (a sequence: the first chunks' limits, across paragraphs; min_rest: see
    kcc.speech.text.iter_chunks); words in order. G2P runs one paragraph piece ahead of the chunks."""
    text = clean_text(decode_text(text))
    if not text.strip():
        raise SayError("input text is empty")
    limit = chunk_limit(limit, check_speed(speed), max_frames)
    ramp = [first_limit] if isinstance(first_limit, int) else list(first_limit or ())
    n = 0
    for para in iter_paragraphs(text):
        for words in iter_chunks(_paragraph_words(para, g2p), limit, ramp[n:], min_rest):
            enc = encode(words, where=f"chunk {n + 1}")
            if enc.ids:
                n += 1
                yield enc
    if n == 0:
        raise SayError("the text produced no phonemes to speak")


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


def plan(text, g2p, limit: int = MAX_PHONEMES, first_limit: "int | Sequence[int] | None" = FIRST_CHUNK_PHONEMES,
         speed: float = 1.0, max_frames: int = DEFAULT_MAX_FRAMES, min_rest: int = 0) -> list[Encoded]:
    """iter_plan, all of it (errors anywhere in the text surface before any synthesis)."""
    return list(iter_plan(text, g2p, limit, first_limit, speed, max_frames, min_rest))


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


SENTENCE_END = ".!?…"


def ends_sentence(enc: Encoded) -> bool:
    """The chunk's phonemes end with a sentence's final punctuation (closing quotes aside)."""
    return enc.phonemes.rstrip().rstrip("\"'”’»)]").endswith(tuple(SENTENCE_END))


def synthesize_chunks(chunks: Iterable[Encoded], synth, pack: np.ndarray, speed: float = 1.0, seed: int = 0,
                      progress: "Progress | None" = None, first_lead_frames: int | None = None,
                      joins: bool = True) -> Iterator[Chunk]:
    """Yield each chunk's audio as soon as it is made (the server streams these). A chunk whose
    frames overflow the plan is synthesised in parts and still yields one Chunk (its durations
    the parts' one after another), so callers see one Chunk per planned chunk.
    first_lead_frames: the most leading silence of the first chunk (a stream's listener waits
    through it; None: as the model predicts it). joins: a chunk that ends inside a sentence,
    with another after it, is synthesised as continuing (Synthesizer.synthesize `continues`:
    no utterance-final lengthening and pause at the join); False: every chunk as an utterance.
    Whether such a chunk is followed by another is known by taking the next chunk first."""
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
        yield Chunk(i, enc, audio, np.concatenate(durations), offset, words)
        offset += audio.size
        if progress is not None:
            progress.chars += len(enc.text) + 1
            progress.update(i + 1, offset / SAMPLE_RATE)
        enc, i = following if peeked else next(ahead, None), i + 1
    if progress is not None:
        progress.close()


def say(text, synth, voice=None, speed: float = 1.0, seed: int = 0, g2p=None,
        search: list[Path] | None = None, progress: "Progress | bool | None" = None,
        chunks: list[Encoded] | None = None) -> SayResult:
    """The whole text's audio in memory (the CLI streams to a file instead: speak_to_file).
    `chunks`: the text already planned with `plan` (then `text` is not phonemized again)."""
    t0 = time.perf_counter()
    speed = check_speed(speed)
    pack = resolve_voice(voice, search)
    g2p = g2p or G2P()
    chunks = chunks or plan(text, g2p, speed=speed, max_frames=getattr(synth, "max_frames", DEFAULT_MAX_FRAMES))
    if not isinstance(progress, Progress):
        progress = Progress(enabled=progress, total_chunks=len(chunks))
    done = list(synthesize_chunks(chunks, synth, pack, speed, seed, progress))
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


class Progress(ProgressBar):
    """A one-line bar on stderr (on by default only for a tty): how much of the text is spoken
    (characters of the chunks done, against the text's), chunks and audio made, time spent and
    an estimate of the time left."""

    def __init__(self, text_chars: int = 0, enabled: bool | None = None, stream=None, total_chunks: int = 0):
        super().__init__(enabled, stream)
        self.text_chars, self.chars, self.total_chunks = text_chars, 0, total_chunks
        self.done, self.audio_s = 0, 0.0

    def update(self, done: int, audio_s: float) -> None:
        self.done, self.audio_s = done, audio_s
        if not self.enabled:
            return
        frac = min(1.0, self.chars / self.text_chars if self.text_chars
                   else done / self.total_chunks if self.total_chunks else 1.0)
        spent = time.perf_counter() - self.t0
        left = f", ~{spent * (1 - frac) / frac:.0f} s left" if 0 < frac < 1 else ""
        self.draw(f"kcc say: {self.bar(int(WIDTH * frac))} {100 * frac:3.0f}% of the text, {done} chunks, "
                  f"{audio_s:.1f} s audio, {spent:.1f} s{left}  ")


# -- command line ----------------------------------------------------------------------------
def load_synthesizer(checkpoint: str | None, max_frames: int | None = None, native: bool = False,
                     threads: int | None = None, log=sys.stderr, precision: str | None = None):
    """The compiled Synthesizer: the real Kokoro-82M by default, or the checkpoint at a path.
    The first run compiles it into a cached artifact; later runs map that artifact.
    threads: kernel threads (default: every core this process may use, less those other
    processes keep busy, measured before each stage; kcc.compiler.threads).
    precision: fp32 / bf16 / int8 (None: $KCC_PRECISION, else fp32; kcc.compiler.precision)."""
    from kcc.compiler.build import release_options
    from kcc.compiler.precision import with_precision
    from kcc.model.model_store import load_model
    from kcc.model.pipeline import DEFAULT_MAX_FRAMES
    from kcc.compiler.threads import FreeCores, resolve_threads
    n = resolve_threads(threads)
    options = with_precision(release_options(native), precision)
    synth = load_model(checkpoint, options, max_frames=max_frames or DEFAULT_MAX_FRAMES, log=log)
    # Unless a count was asked for, each stage leaves out the cores other processes keep busy:
    # beside a busy neighbour 2 threads run slower than 1 (kcc.compiler.threads.FreeCores).
    fixed = threads is not None or "OMP_NUM_THREADS" in os.environ
    synth.set_threads(n if fixed else FreeCores(n))
    return synth


def release_weights_between_stages(synth) -> None:
    """A one-shot process needs a weight again only for the next chunk: dropping each from the
    resident set once its last op ran, and each stage's blob after the stage
    (Synthesizer.release_weights_after_use; they stay in the page cache), makes the peak about
    one op's weights, not a stage's or all of them (fp32 on a Zen 3: 347 -> 94 MB,
    bench/results/bench_say_warm_zen3.md). A model compiled in memory on a cold start is not
    file-mapped: it keeps them."""
    from kcc.compiler.runtime import WeightReleaseError
    release = getattr(synth, "release_weights_after_use", None)     # absent on test doubles
    try:
        if release is not None:
            release()
    except WeightReleaseError:
        pass


# The longest text `kcc say` reads: about 10 million words, ~1,000 hours of speech (speaking is
# streamed, but the text itself is held); a cap so that --text-file /dev/zero ends, by name.
MAX_TEXT_BYTES = 64 << 20


def read_input(args) -> str:
    if args.text_file:
        from kcc.files import InputTooLarge, read_bounded
        try:
            data = read_bounded(args.text_file, MAX_TEXT_BYTES, "text file")
        except OSError as exc:
            raise SayError(f"text file {args.text_file}: {exc.strerror or exc}") from None
        except InputTooLarge as exc:
            raise SayError(str(exc)) from None
        return decode_text(data, f"text file {args.text_file}")
    if args.text is None:
        raise SayError("no text: pass it as an argument or with --text-file PATH (- for stdin)")
    return decode_text(args.text, "the text argument")


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"kcc: warning: {message}", file=sys.stderr)


class Interrupted(BaseException):
    """SIGINT or SIGTERM: caught at the top of a command, which removes its partial outputs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.exit_code = 128 + signum


def _interrupt(signum, frame):
    raise Interrupted(signum)


def interruptible(fn, *args):
    """fn(*args) in a worker thread while the main thread waits, so a signal is handled at once:
    Python runs handlers only in the main thread between bytecodes, and one C stage call can
    take seconds on a loaded machine. Interrupted while fn still runs: its unfinished outputs
    are removed (kcc.files.AtomicFile.discard_live) and the process ends there (os._exit: the C
    call cannot be cancelled). Interrupted raised inside fn comes back as an exception."""
    import os
    from kcc.files import AtomicFile
    box: dict = {}

    def work():
        try:
            box["value"] = fn(*args)
        except BaseException as exc:    # handed to the main thread as it is
            box["error"] = exc
    worker = threading.Thread(target=work, name="kcc-work", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.25)
    except Interrupted as exc:
        AtomicFile.discard_live()
        print("\nkcc: interrupted; no output written", file=sys.stderr, flush=True)
        sys.stdout.flush()
        os._exit(exc.exit_code)
    if "error" in box:
        raise box["error"]
    return box["value"]


@contextlib.contextmanager
def interrupts_raise():
    """SIGINT / SIGTERM raise Interrupted in the main thread, between two bytecodes: at the
    latest when the running C stage returns (a stage is 0.1-1 s of a chunk). The previous
    handlers come back afterwards (off the main thread nothing changes)."""
    import signal
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    before = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


class TimestampStream:
    """The timestamps JSON written as chunks come: words streamed to a temporary file, the chunk
    list (one small entry per chunk) and the totals at the end. The same document as
    SayResult.timestamps_json, keys in another order, so memory does not grow with the words."""

    def __init__(self, path: Path, g2p: str):
        from kcc.files import AtomicFile
        self.file, self.spans, self.words = AtomicFile(path), [], 0
        self._put('{"sample_rate": %d, "g2p": %s, "words": [' % (SAMPLE_RATE, self._json(g2p)))

    @staticmethod
    def _json(value) -> str:
        import json
        return json.dumps(value, ensure_ascii=False)

    def _put(self, text: str) -> None:
        self.file.fh.write(text.encode("utf-8"))

    def add(self, chunk: Chunk) -> None:
        for w in chunk.words:
            self._put(("\n " if self.words == 0 else ",\n ") + self._json(w))
            self.words += 1
        self.spans.append(chunk_summary(chunk))

    def finish(self, samples: int) -> None:
        self._put("\n], \"chunks\": [" + ",\n ".join(self._json(c) for c in self.spans)
                  + f'], "audio_seconds": {round(samples / SAMPLE_RATE, 6)}}}\n')
        self.file.close()


def speak_to_file(chunks: Iterable[Encoded], synth, pack, out: Path, timestamps: Path | None,
                  speed: float, seed: int, g2p: str, progress: Progress) -> tuple[int, int, int]:
    """Chunks -> a WAV (and the timestamps) written as they come, memory one chunk of audio;
    both renamed into place at the end, an error or interrupt leaves neither.
    -> (samples, chunks, phoneme ids)."""
    from kcc.speech.wav import WavWriter
    n_chunks = n_ids = 0
    with contextlib.ExitStack() as stack:
        wav = stack.enter_context(WavWriter(out))
        ts = TimestampStream(timestamps, g2p) if timestamps is not None else None
        if ts is not None:
            stack.enter_context(ts.file)
        for c in synthesize_chunks(chunks, synth, pack, speed, seed, progress):
            wav.write(c.audio)
            n_chunks, n_ids = n_chunks + 1, n_ids + len(c.encoded.ids)
            if ts is not None:
                ts.add(c)
        wav.close()
        if ts is not None:
            ts.finish(wav.samples)
        wav.commit()
        if ts is not None:
            ts.file.commit()
    return wav.samples, n_chunks, n_ids


def run_cli(args) -> int:
    from kcc.speech.outputs import OutputError
    from kcc.model.pipeline import SynthesisError
    from kcc.speech.voices import VoiceError
    from kcc.speech.wav import WavError
    warnings.showwarning = _show_warning
    t0 = time.perf_counter()
    with interrupts_raise():
        try:
            samples, n_chunks, n_ids = interruptible(_run, args)
        except Interrupted as exc:
            print("\nkcc: interrupted; no output written", file=sys.stderr)
            return exc.exit_code
        except (SayError, G2PError, VoiceError, SynthesisError, OutputError, WavError, OSError) as exc:
            # OSError: the output could not be written (disk full, file too large): nothing is left of it
            print(f"kcc: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
    print(f"{args.out}: {samples / SAMPLE_RATE:.2f} s, {n_chunks} chunk(s), {n_ids} phonemes, "
          f"{time.perf_counter() - t0:.1f} s")
    return 0


def _run(args) -> tuple[int, int, int]:
    """Everything cheap is checked first (outputs, text, speed, G2P, voice, the first chunk),
    then the model is loaded and the text spoken chunk by chunk into the output."""
    import os
    from itertools import chain
    from kcc.speech.outputs import check_outputs
    outs = check_outputs(**{"-o": args.out, "--timestamps": args.timestamps})
    text = read_input(args)
    speed = check_speed(args.speed)
    max_frames = check_max_frames(args.max_frames)
    check_precision(getattr(args, "precision", None))
    from kcc.speech.overrides import load_lexicon
    lexicon = load_lexicon(args.lexicon) if getattr(args, "lexicon", None) else None
    g2p = G2P(args.lang, args.g2p, lexicon=lexicon)
    print(f"kcc: G2P: {g2p.description}", file=sys.stderr)
    pack = resolve_voice(args.voice, [Path(d) for d in args.voices_dir])
    progress = Progress(len(text), enabled=True if args.progress else None)
    chunks = iter_plan(text, g2p, speed=speed, max_frames=max_frames)
    first = next(chunks)                   # text errors surface before the (slow) compile
    synth = load_synthesizer(args.checkpoint or os.environ.get("KCC_CHECKPOINT"), max_frames,
                             native=getattr(args, "native", False), threads=getattr(args, "threads", None),
                             precision=getattr(args, "precision", None))
    release_weights_between_stages(synth)
    return speak_to_file(chain([first], chunks), synth, pack, outs["-o"], outs.get("--timestamps"),
                         speed, args.seed, getattr(g2p, "description", ""), progress)
