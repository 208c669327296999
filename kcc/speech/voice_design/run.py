"""One voice design from request to pack on disk: what `kcc voice design` and kcc.design_voice run.

Everything a request can get wrong (output suffix, language, pool names, budget) is checked
before the encoder or the model is loaded; the target is checked (kcc.speech.voice_design.target)
before the model is.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kcc.files import AtomicFile, cache_subdir
from kcc.speech.engine import load_synthesizer
from kcc.speech.g2p.g2p import G2P
from kcc.speech.languages import ALIASES, LANGUAGES, voice_language
from kcc.speech.voice_design import DEFAULT_MINUTES
from kcc.speech.voice_design.encoder import SpeakerEncoder
from kcc.speech.voice_design.race import Race
from kcc.speech.voice_design.search import DesignError, PoolCache, Scorer, Search
from kcc.speech.voice_design.sentences import sentences_of
from kcc.speech.voice_design.target import decode, embed_target
from kcc.speech.voices import load_pack, voice_catalog
from kcc.weights.torch_zip import save_torch_zip

PACK_SUFFIXES = (".pt", ".npy", ".bin")
MAX_MINUTES = 24 * 60


@dataclass
class DesignRequest:
    targets: list[Path]
    out: Path
    language: str = "en-us"
    pool: list[str] | None = None
    minutes: float = DEFAULT_MINUTES
    steps: int | None = None
    seed: int = 0
    restart: bool = False
    checkpoint: str | None = None


@dataclass
class DesignResult:
    pack: np.ndarray
    start: float                 # similarity of the best starting blend (scoring sentences)
    end: float
    steps: int
    minutes: float
    blend: list[str]             # the official voices blended, heaviest first
    path: Path


def check_request(req: DesignRequest) -> tuple[str, list[str]]:
    """(language code, pool names), or DesignError naming what is wrong."""
    if Path(req.out).suffix not in PACK_SUFFIXES:
        raise DesignError(f"-o {req.out}: a voice pack is written as {', '.join(PACK_SUFFIXES)}")
    code = ALIASES.get(req.language, req.language)
    if code not in LANGUAGES:
        raise DesignError(f"--language {req.language}: not one of {', '.join(LANGUAGES)}")
    if not (0 < req.minutes <= MAX_MINUTES):
        raise DesignError(f"--minutes {req.minutes}: give 0 < minutes <= {MAX_MINUTES}")
    if req.steps is not None and req.steps < 0:
        raise DesignError(f"--steps {req.steps}: give a count >= 0")
    catalog = voice_catalog()
    pool = req.pool or sorted(n for n in catalog if voice_language(n) == code)
    unknown = [n for n in pool if n not in catalog]
    if unknown:
        raise DesignError(f"--pool: no voice named {', '.join(unknown)} (see `kcc voices`)")
    if len(pool) < 1:
        raise DesignError(f"no official voices of {code} to start from (see `kcc voices --fetch`)")
    return code, pool


def write_pack(pack: np.ndarray, path: Path) -> Path:
    """The pack as .pt (a torch zip of one float32 [510, 1, 256] tensor), .npy, or .bin (raw float32)."""
    pack = np.ascontiguousarray(pack, dtype="<f4")
    if path.suffix == ".pt":
        return save_torch_zip(pack, path)
    with AtomicFile(path) as out:
        if path.suffix == ".npy":
            np.save(out.fh, pack)
        else:
            out.fh.write(pack.tobytes())
        return out.commit()


def design_voice(targets, out, *, language: str = "en-us", pool: list[str] | None = None, minutes: float = DEFAULT_MINUTES,
                 steps: int | None = None, seed: int = 0, restart: bool = False, checkpoint: str | None = None,
                 progress=None) -> DesignResult:
    """kcc.design_voice: a voice pack like the target recording(s), written to `out` (.pt, .npy or
    .bin); rerun to continue a design (its state sits beside `out`). `progress`: a callable given
    one line of text per step."""
    targets = [targets] if isinstance(targets, (str, Path)) else list(targets)
    req = DesignRequest([Path(t) for t in targets], Path(out), language, pool, minutes, steps, seed, restart, checkpoint)
    return run_design(req, progress)


def run_design(req: DesignRequest, progress=None, synth=None, encoder: SpeakerEncoder | None = None) -> DesignResult:
    """Design, resume or finish a voice; the pack is written to req.out (also on Ctrl-C: the best so
    far) and the search state beside it."""
    code, pool = check_request(req)
    recordings = [(*decode(p), str(p)) for p in req.targets]        # not audio / too long: before any compile
    encoder = encoder or SpeakerEncoder()
    target = embed_target(recordings, encoder)
    synth = synth or load_synthesizer(req.checkpoint, log=sys.stderr if progress else None)
    packs = {name: load_pack(name) for name in pool}
    g2p = G2P(code)
    sentences = sentences_of(code)
    scorer = Scorer.speaking(synth, g2p, sentences.scoring, encoder)
    rotation = Scorer.speaking(synth, g2p, sentences.rotating, encoder)
    model = str(getattr(synth, "model_id", None) or req.checkpoint or "default")
    search = Search(scorer, packs, target.embedding, code, req.seed, Path(f"{req.out}.design.json"), progress,
                    PoolCache(cache_subdir("voice_design") / "pool.json", model), rotation, target.f0)
    race = Race(search)
    race.resume_or_start(req.restart, req.minutes, req.steps)
    try:
        race.run(minutes=req.minutes, steps=req.steps)
    finally:
        pack = race.pack()
        write_pack(pack, Path(req.out))
    state = search.state
    w = np.exp(np.asarray(state.logits) - max(state.logits))
    order = [state.top[i] for i in np.argsort(-w) if w[i] / w.sum() >= 0.01]
    return DesignResult(pack, state.start_score, state.score, race.steps, race.seconds / 60, order, Path(req.out))
