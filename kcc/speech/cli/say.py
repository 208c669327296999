"""`kcc say`: the command-line front-end of the speech engine (kcc.speech.engine). It checks
everything cheap first (outputs, format, text, speed, seed, voice, the first chunk), then loads
the model and streams each chunk into its output file (or stdout) as it is made, with the
timestamps and subtitles beside it, so memory holds one chunk of audio.
"""
from __future__ import annotations

import contextlib
import json
import sys
import time
import warnings
from itertools import chain
from pathlib import Path
from typing import Iterable

from kcc.files import AtomicFile, read_user_file
from kcc.model.loader import check_max_frames, check_precision, drop_weights_once_used
from kcc.speech.audio.formats import format_for
from kcc.speech.audio.output import open_audio
from kcc.speech.cli.args import checkpoint_of
from kcc.speech.engine import (Chunk, SayError, check_seed, check_speed, chunk_summary, iter_plan,
                               load_synthesizer, resolve_voice, synthesize_chunks)
from kcc.speech.g2p.g2p import G2P, Encoded, decode_text
from kcc.speech.cli.progress_bar import Progress
from kcc.speech.cli.streams import require_stdout
from kcc.speech.audio.outputs import check_outputs
from kcc.speech.g2p.overrides import load_lexicon
from kcc.speech.audio.captions import SubtitleStream, subtitle_kind
from kcc.speech.audio.timestamps import SAMPLE_RATE
from kcc.speech.voices import speaking


# The longest text `kcc say` reads: about 10 million words, ~1,000 hours of speech (speaking is
# streamed, but the text itself is held); a cap so that --text-file /dev/zero ends, by name.
MAX_TEXT_BYTES = 64 << 20


class UsageError(SayError):
    """The command line asks for two things that exclude each other, or for nothing to speak."""


def read_input(args) -> str:
    """The text: the argument, or --text-file (- for stdin), or stdin itself when neither is
    given and it is not a terminal (`echo hi | kcc say -o hi.wav`). Both at once is refused:
    one of them would be ignored without a word."""
    if args.text is not None and args.text_file:
        raise UsageError("give the text as an argument or with --text-file, not both")
    source = args.text_file
    if source is None and args.text is None:
        if sys.stdin is None or sys.stdin.isatty():
            raise UsageError("no text: pass it as an argument, with --text-file PATH, or on stdin (a pipe)")
        source = "-"
    if source:
        what = "stdin" if source == "-" else f"text file {source}"
        return decode_text(read_user_file(source, MAX_TEXT_BYTES, "text file", SayError), what)
    return decode_text(args.text, "the text argument")


def _show_warning(message, category, filename, lineno, file=None, line=None):
    print(f"kcc: warning: {message}", file=sys.stderr)


class TimestampStream:
    """The timestamps JSON written as chunks come: words streamed to a temporary file, the chunk
    list (one small entry per chunk) and the totals at the end. The same document as
    SayResult.timestamps_json, keys in another order, so memory does not grow with the words."""

    def __init__(self, path: Path, g2p: str):
        self.file, self.spans, self.words = AtomicFile(path), [], 0
        self._put('{"sample_rate": %d, "g2p": %s, "words": [' % (SAMPLE_RATE, self._json(g2p)))

    @staticmethod
    def _json(value) -> str:
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


def speak_to_file(chunks: Iterable[Encoded], synth, pack, out: "Path | str", timestamps: Path | None,
                  speed: float, seed: int, g2p: str, progress: Progress, fmt: str = "wav",
                  subtitles: Path | None = None) -> tuple[int, int, int]:
    """Chunks -> the audio (a file in fmt, or stdout for "-"), and the timestamps and subtitles,
    written as they come, memory one chunk of audio; the files renamed into place at the end,
    an error or interrupt leaves none of them. -> (samples, chunks, phoneme ids)."""
    n_chunks = n_ids = 0
    with contextlib.ExitStack() as stack:
        audio = stack.enter_context(open_audio(out, fmt))
        ts = TimestampStream(timestamps, g2p) if timestamps is not None else None
        if ts is not None:
            stack.enter_context(ts.file)
        subs = SubtitleStream(subtitles) if subtitles is not None else None
        if subs is not None:
            stack.enter_context(subs.file)
        for c in synthesize_chunks(chunks, synth, pack, speed, seed, progress):
            audio.write(c.audio)
            n_chunks, n_ids = n_chunks + 1, n_ids + len(c.encoded.ids)
            if ts is not None:
                ts.add(c)
            if subs is not None:
                subs.add(c.words)
        progress.close()
        audio.close()
        if ts is not None:
            ts.finish(audio.samples)
        if subs is not None:
            subs.finish()
        audio.commit()
        for side in (ts, subs):
            if side is not None:
                side.file.commit()
    return audio.samples, n_chunks, n_ids


def run_cli(args) -> int:
    """`kcc say`; its errors are named by the dispatcher (kcc.speech.cli.run: the one exit table)."""
    warnings.showwarning = _show_warning
    t0 = time.perf_counter()
    samples, n_chunks, n_ids = _run(args)
    # With -o - stdout carries the audio: every message goes to stderr.
    print(f"{args.out}: {samples / SAMPLE_RATE:.2f} s, {n_chunks} chunk(s), {n_ids} phonemes, "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr if args.out == "-" else sys.stdout)
    return 0


def _run(args) -> tuple[int, int, int]:
    """Everything cheap is checked first (outputs, text, speed, G2P, voice, the first chunk),
    then the model is loaded and the text spoken chunk by chunk into the output."""
    subtitles = getattr(args, "subtitles", None)
    to_stdout = args.out == "-"
    if to_stdout:
        require_stdout("the audio")
    outs = check_outputs(**{"-o": None if to_stdout else args.out, "--timestamps": args.timestamps,
                            "--subtitles": subtitles})
    fmt = format_for(args.out, getattr(args, "format", None))
    if subtitles is not None:
        subtitle_kind(subtitles)
    text = read_input(args)
    speed = check_speed(args.speed)
    seed = check_seed(args.seed)
    max_frames = check_max_frames(args.max_frames)
    check_precision(getattr(args, "precision", None))
    lexicon = load_lexicon(args.lexicon) if getattr(args, "lexicon", None) else None
    language, voice = speaking(args.voice, args.lang, text)          # read_input decoded it
    g2p = G2P(language, args.g2p, lexicon=lexicon)
    print(f"kcc: G2P: {g2p.description}", file=sys.stderr)
    pack = resolve_voice(voice, [Path(d) for d in args.voices_dir])
    progress = Progress(len(text), enabled=True if args.progress else None)
    chunks = iter_plan(text, g2p, speed=speed, max_frames=max_frames)
    first = next(chunks)                   # text errors surface before the (slow) compile
    synth = load_synthesizer(checkpoint_of(args), max_frames,
                             native=getattr(args, "native", False), threads=getattr(args, "threads", None),
                             precision=getattr(args, "precision", None))
    # A one-shot process needs a weight again only for the next chunk (kcc.model.loader.drop_weights_once_used).
    drop_weights_once_used(synth)
    return speak_to_file(chain([first], chunks), synth, pack, "-" if to_stdout else outs["-o"],
                         outs.get("--timestamps"), speed, seed, getattr(g2p, "description", ""), progress, fmt,
                         outs.get("--subtitles"))
