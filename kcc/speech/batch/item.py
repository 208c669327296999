"""One batch item: its fingerprint, its synthesis, its two output files, and whether it is done.

An item writes OUTDIR/<id>.<format> (the audio) and then OUTDIR/<id>.json (the sidecar), each
atomically (a temp file, fsync, rename), so the sidecar is the commit record: it exists only
once the audio it describes is complete. The item is done when the sidecar's fingerprint
matches (item content + voice pack + G2P + model digest + options) and the audio file has the
size and SHA-256 the sidecar records; anything else (no sidecar, a different fingerprint, a
truncated or altered audio file) is redone from scratch. Ids were checked safe in manifest.py;
`output_paths` checks again that every path stays inside OUTDIR.
"""
from __future__ import annotations

import hashlib
import json
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from kcc.version import __version__
from kcc.files import file_sha256, read_bounded, write_atomic
from kcc.speech.batch import DEFAULT_MAX_CHARS  # noqa: F401  (re-exported: the item's limit)
from kcc.model.pipeline import DEFAULT_MAX_FRAMES
from kcc.speech.batch.audio import encode_audio
from kcc.speech.batch.manifest import Item, id_problem
from kcc.speech.engine import plan, resolve_voice, say
from kcc.speech.g2p.g2p import G2P, Word, encode, load_vocab
from kcc.speech.text import MAX_PHONEMES, PACK_PHONEMES, chunk_limit, iter_chunks
from kcc.speech.request import chunking
from kcc.speech.voices import VoiceError, speaking

FINGERPRINT_SCHEMA = "kcc.speech.batch.item/1"


class ItemError(ValueError):
    """This item cannot be synthesised; the message is its error record's reason."""


@dataclass(frozen=True)
class JobOptions:
    """What every worker needs besides the model: where to write, how to resolve voices and text."""
    outdir: str
    voices_dirs: tuple[str, ...] = ()
    g2p: object = "auto"                 # a kcc.speech.g2p.g2p backend name, or a picklable factory(lang) -> G2P
    max_chars: int = DEFAULT_MAX_CHARS


@dataclass
class Outcome:
    id: str | None
    line: int
    status: str                          # "done" (made now), "skipped" (already done), "error"
    reason: str = ""
    audio_s: float = 0.0
    wall_s: float = 0.0
    files: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status != "error"

    def to_dict(self) -> dict:
        return asdict(self)


def output_paths(outdir: Path, item_id: str, fmt: str) -> tuple[Path, Path]:
    """(audio, sidecar) for an item; refuses any id that would leave OUTDIR."""
    problem = id_problem(item_id)
    if problem:
        raise ItemError(problem)
    audio, sidecar = outdir / f"{item_id}.{fmt}", outdir / f"{item_id}.json"
    for p in (audio, sidecar):
        if p.parent != outdir or p.name.startswith("."):
            raise ItemError(f"id {item_id!r} would write outside the output directory")
    return audio, sidecar


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fingerprint(item: Item, voice_digest: str, g2p: str, model_digest: str) -> str:
    """What decides the item's bytes. The id and manifest line are not in it (they only name it)."""
    doc = {"schema": FINGERPRINT_SCHEMA, "text": item.text, "phonemes": item.phonemes, "voice": item.voice,
           "voice_sha256": voice_digest, "lang": item.lang, "speed": item.speed, "seed": item.seed,
           "format": item.format, "g2p": g2p if item.text is not None else None, "model": model_digest}
    return _digest(json.dumps(doc, sort_keys=True, ensure_ascii=False).encode("utf-8"))


SIDECAR_MAX_BYTES = 1 << 20


def is_done(audio_path: Path, sidecar_path: Path, fp: str) -> dict | None:
    """The sidecar when the item's outputs are complete and current, else None."""
    try:
        # a sidecar is a few hundred bytes; anything past SIDECAR_MAX_BYTES is not ours (InputTooLarge
        # is a ValueError: redo the item)
        side = json.loads(read_bounded(sidecar_path, SIDECAR_MAX_BYTES, "sidecar").decode("utf-8"))
        meta = side["audio"]
        if side.get("fingerprint") != fp or meta.get("file") != audio_path.name:
            return None
        if audio_path.stat().st_size != meta["bytes"] or file_sha256(audio_path) != meta["sha256"]:
            return None
        return side
    except (OSError, ValueError, KeyError, TypeError):
        return None


def phoneme_chunks(phonemes: str, speed: float = 1.0, max_frames: int = DEFAULT_MAX_FRAMES) -> list:
    """A phoneme string -> encoded chunks (cut at spaces, <= 510 phonemes each); symbols
    outside the Kokoro vocab are an error here (G2P text only warns: its input is not ours)."""
    vocab = load_vocab()
    bad = sorted({c for c in phonemes if c not in vocab and not c.isspace()})
    if bad:
        raise ItemError(f"phonemes contain symbol(s) not in the Kokoro vocab: "
                        f"{', '.join(f'{c!r} (U+{ord(c):04X})' for c in bad[:10])}")
    words = [Word(tok, tok, True) for tok in phonemes.split()]
    words[-1].whitespace = False
    limit = chunk_limit(MAX_PHONEMES, speed, max_frames)          # as kcc say plans: the frames fit at this speed
    chunks = iter_chunks(words, limit, pack=PACK_PHONEMES)                 # as every text is packed
    return [encode(ws, vocab, where=f"chunk {i + 1}") for i, ws in enumerate(chunks)]


_WARNINGS_LOCK = threading.Lock()


class _PhonemeInput:
    """Stands in for the G2P in say() when the item gives phonemes (nothing to phonemize)."""
    description = "phonemes"


class ItemWorker:
    """Synthesises items with one loaded synthesizer; G2P and voice packs cached per worker.
    Thread-safe: several threads may share it (each run gets the synthesizer's per-thread arena)."""

    def __init__(self, synth, options: JobOptions, voice_loader=None):
        self.synth, self.options = synth, options
        self.outdir = Path(options.outdir).resolve()
        self.outdir.mkdir(parents=True, exist_ok=True)
        g2p = options.g2p
        self.g2p_factory = g2p if callable(g2p) else (lambda lang: G2P(lang, g2p))
        self.voice_loader = voice_loader or catalog_voice_loader([Path(d) for d in options.voices_dirs])
        self._g2p: dict[str, object] = {}
        self._voices: dict[str | None, tuple[np.ndarray, str]] = {}
        self._lock = threading.Lock()
        self.model_digest = model_digest(synth)

    def g2p(self, lang: str):
        with self._lock:
            if lang not in self._g2p:
                try:
                    self._g2p[lang] = self.g2p_factory(lang)
                except Exception as exc:       # an unavailable backend fails each item that needs it
                    self._g2p[lang] = ItemError(f"G2P for {lang}: {exc}")
            got = self._g2p[lang]
        if isinstance(got, ItemError):
            raise got
        return got

    def voice(self, spec: str | None) -> tuple[np.ndarray, str]:
        with self._lock:
            if spec not in self._voices:
                try:
                    pack = self.voice_loader(spec)
                except VoiceError as exc:
                    raise ItemError(str(exc)) from None
                self._voices[spec] = (pack, _digest(np.ascontiguousarray(pack, "<f4").tobytes()))
            return self._voices[spec]

    def run(self, item: Item) -> Outcome:
        t0 = time.perf_counter()
        try:
            return self._run(item, t0)
        except Exception as exc:               # one bad item never stops the batch
            reason = str(exc) if isinstance(exc, ItemError) else f"{type(exc).__name__}: {exc}"
            return Outcome(item.id, item.line, "error", reason, wall_s=time.perf_counter() - t0)

    def _run(self, item: Item, t0: float) -> Outcome:
        audio_path, sidecar_path = output_paths(self.outdir, item.id, item.format)
        content = item.text if item.text is not None else item.phonemes
        if len(content) > self.options.max_chars:
            raise ItemError(f"too long: {len(content)} characters, over the {self.options.max_chars} per item")
        lang, voice = speaking(item.voice, item.lang, item.text or "")    # no voice: the language's own
        pack, voice_digest = self.voice(voice)
        g2p = self.g2p(lang) if item.text is not None else None
        g2p_desc = getattr(g2p, "description", type(g2p).__name__) if g2p is not None else "phonemes"
        fp = fingerprint(item, voice_digest, g2p_desc, self.model_digest)
        done = is_done(audio_path, sidecar_path, fp)
        if done is not None:
            return Outcome(item.id, item.line, "skipped", audio_s=done["audio"]["seconds"],
                           files=[audio_path.name, sidecar_path.name])
        # catch_warnings swaps process-wide state: one item at a time records its G2P warnings
        # (the G2P serialises its calls anyway); synthesis runs outside, concurrently.
        with _WARNINGS_LOCK, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frames = getattr(self.synth, "max_frames", DEFAULT_MAX_FRAMES)
            chunks = (plan(item.text, g2p, speed=item.speed, max_frames=frames, **chunking(stream=False))
                      if g2p is not None else phoneme_chunks(item.phonemes, item.speed, frames))
        result = say(content, self.synth, pack, item.speed, item.seed, g2p or _PhonemeInput(),
                     chunks=chunks, progress=False)
        data = encode_audio(result.audio, item.format)
        seconds = result.audio.size / result.sample_rate
        write_atomic(audio_path, data)
        wall = time.perf_counter() - t0
        side = {"id": item.id, "fingerprint": fp, "text": item.text,
                "phonemes": [c.encoded.phonemes for c in result.chunks],
                "durations": [c.durations.tolist() for c in result.chunks],
                "words": result.words, "chunks": result.timestamps_json()["chunks"],
                "voice": item.voice, "voice_sha256": voice_digest, "lang": item.lang, "speed": item.speed,
                "seed": item.seed, "format": item.format, "g2p": g2p_desc, "model_digest": self.model_digest,
                "kcc_version": __version__, "wall_s": round(wall, 4),
                "warnings": [str(w.message) for w in caught],
                "audio": {"file": audio_path.name, "bytes": len(data), "sha256": _digest(data),
                          "samples": int(result.audio.size), "sample_rate": result.sample_rate,
                          "seconds": round(seconds, 6)}}
        write_atomic(sidecar_path, json.dumps(side, ensure_ascii=False, indent=1).encode("utf-8"))
        return Outcome(item.id, item.line, "done", audio_s=seconds, wall_s=wall,
                       files=[audio_path.name, sidecar_path.name])


_MODEL_DIGESTS: dict[str, str] = {}


def model_digest(synth) -> str:
    """What identifies the weights: the synthesizer's model_digest, else the SHA-256 of the
    checkpoint file it was built from, else the model_id a compiled artifact carries (a digest
    of the weights' source, kcc.model.model_store), else 'unknown'."""
    got = getattr(synth, "model_digest", None)
    if got:
        return str(got)
    path = getattr(synth, "checkpoint_path", None)
    if path and Path(path).is_file():
        key = str(Path(path).resolve())
        if key not in _MODEL_DIGESTS:
            _MODEL_DIGESTS[key] = file_sha256(key)
        return _MODEL_DIGESTS[key]
    return str(getattr(synth, "model_id", None) or "unknown")


def catalog_voice_loader(dirs: list[Path]):
    """spec -> pack, as `kcc say --voice` resolves it: catalog names (kcc.speech.voices.voice_catalog:
    the official voices and those in `dirs`), blends of them ('a:0.7,b:0.3'); an item without a
    voice gets its language's (kcc.speech.voices.speaking)."""
    return lambda spec: resolve_voice(spec, dirs)
