"""The search: a voice pack whose speech the speaker encoder hears as the target's.

A candidate is a blend of official packs of the target's language plus one 256-float offset
added to every row: pack = sum_i softmax(logits)_i * P_i + offset. Blending keeps each row's
phoneme-count dependence, and one offset for all rows carries what a change learned on the
scoring sentences over to sentences of other lengths (a per-row walk would tune only the rows
those sentences use). Its score is the cosine between the target's embedding and the embedding
of kcc speaking the language's scoring sentences with it (sentences.py).

1. Start: every pool voice is scored (once per model: PoolCache); the best of the best voice
   alone and a few blends of the top voices (the top 2 / 3 equally, the top TOP_K weighted by
   similarity) is the start.
   One more start blend comes from the embeddings alone: the simplex weights whose blend of the
   pool's embeddings points closest to the target's (fit_blend).
2. Improve: a (1+1) evolution strategy on (logits of the top TOP_K, offset), seeded numpy RNG,
   step size adapted by the 1/5 success rule; the offset moves in the decoder's half of the row
   (PREDICTOR_STEP: the predictor's half, durations and pitch, stays the blend's); a candidate replaces the best only if it scores
   higher and passes the guard. The blend's logits step by LOGIT_SIGMA_MIN at least: once the
   offset's steps have shrunk, a blend that had drifted to one voice (softmax ~1) never moved
   again, and the designs that kept a mixture were the ones heard closest on held-out sentences
   (bf_emma from the American voices, seed 0: held out 0.865-0.871 without, 0.896 with; seeds 0-3
   with it 0.860-0.922, mean 0.889). Every other step the offset moves along the direction a local
   linear model says raises the similarity, instead of a random one: a ridge regression of how
   the embedding moved (candidate minus incumbent, heard on the same sentences) on how the style
   moved, over the last HEARD_RECENT candidates (local_direction). Fitted on the pool's voices
   instead, that direction pointed away from the target (cosine -0.23 with the step that reaches
   bf_emma from its start; the local one +0.22 after 48 candidates, a random one ~0.09).
   Rotating scoring (when the search is given a rotation Scorer, as `kcc voice design` does in
   every language): each step draws a fresh ROTATE_K of the language's rotating pool
   and scores the candidate and the incumbent on the same ones, each as the mean of its
   per-sentence embeddings, so a change is kept only if it wins on sentences drawn after it was
   proposed (a fit to three fixed sentences' content does not carry to other sentences). The
   incumbent's embedding per sentence is remembered until it is replaced (the start is heard on
   every pool sentence once), so most steps synthesise only the candidate; the similarity shown
   is the incumbent's mean over the sentences it has spoken. A win there is confirmed on
   ROTATE_K more fresh sentences and kept only if the candidate still wins on all of them
   together (the mean of its embeddings over the six against the incumbent's): with
   three sentences a step's noise lets chance wins through, and the kept chances add up to a
   drift (a female target's design walked to a male voice's blend while its score on the
   sentences it was heard on rose).
3. Guard: no clipping (peak < CLIP), loudness (RMS) and length of the scoring sentences inside
   the range the pool voices span (with a margin; for rotating sentences the length range is
   scaled by their phoneme count), and a plausible pack (kcc.speech.voices).

A design runs several of these walks (kcc.speech.voice_design.race): they share the first part of
the budget, the best goes on.

The state (step, RNG, step size, best parameters and score) is written atomically after every
step: the same command rerun continues where Ctrl-C stopped it, and the same seed and step count
give the same pack.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kcc.compiler.threads import available_cores
from kcc.files import AtomicFile
from kcc.model.kokoro import STYLE_PRED
from kcc.model.pipeline import THREADS
from kcc.speech.engine import plan
from kcc.speech.voice_design.encoder import SpeakerEncoder, unit
from kcc.speech.voice_design.pitch import pitch_stats
from kcc.speech.voice_design.mel import resample
from kcc.speech.voices import ImplausibleVoiceError, check_plausible, style_for

SAMPLE_RATE = 24_000
STATE_VERSION = 2
TOP_K = 6
HEARD_RECENT = 48                 # candidates the local model is fitted on
HEARD_MIN = 8                     # candidates heard before the guided steps begin
CLIP = 0.99
RMS_MARGIN = 1.25                 # x / / the pool's loudest / quietest RMS
LENGTH_MARGIN = 1.10              # x / / the pool's longest / shortest total length
F0_MARGIN = 1.15                  # x / / the pool's highest / lowest median pitch
VOICED_MARGIN = 0.85              # x the pool's least voiced share of audible frames
TARGET_F0_MARGIN = 1.2            # x / / the target's median pitch: a design keeps near the target's pitch
# x / / the start's pitch, where the band is widened to reach it: the guard hears the rotating
# sentences and the start was heard on the scoring ones, and one voice's median pitch moves ~10%
# from sentence to sentence (a 167 Hz start read 151-157 Hz on others): F0_MARGIN's allowance.
START_F0_SLACK = F0_MARGIN
SIGMA_START, SIGMA_MIN, SIGMA_MAX = 0.3, 0.05, 1.0
LOGIT_SIGMA_MIN = 0.3             # the blend keeps moving after the offset's steps shrink
# The offset's steps in the predictor's half of a row (STYLE_PRED: durations, pitch) are this
# fraction of the decoder half's. The encoder hears timbre: bf_emma's pack fitted by least squares
# as a blend of three American voices plus one offset scores 0.970 held out (its own pack 0.969),
# the decoder half of that offset alone 0.960, the predictor half alone 0.761, the blend alone
# 0.744 (bench/voice_design_reach.py).
PREDICTOR_STEP = 0.0
ROTATE_K = 3                      # sentences drawn per step from the language's rotating pool (sentences.py)


class DesignError(ValueError):
    """The design cannot run as asked; the message says why."""


class StateMismatchError(DesignError):
    """A state file from another design (target, language, pool or seed) is in the way."""


@dataclass
class Guard:
    """What a candidate must sound like: the official voices' range (with margins) of loudness,
    length (the phonemes' durations summed), median pitch and voiced share, and no clipping."""
    rms: tuple[float, float]
    seconds: tuple[float, float]
    f0: tuple[float, float] | None = None          # None: a state saved before the pitch guard
    voiced: float | None = None

    @classmethod
    def from_pool(cls, rms: list[float], seconds: list[float], f0: list[float] | None = None,
                  voiced: list[float] | None = None, target_f0: float = 0.0) -> "Guard":
        """target_f0 (> 0): the pitch range narrows to the target's pitch within TARGET_F0_MARGIN
        (where that leaves the official voices' range, the target's band alone)."""
        pitch = (min(f0) / F0_MARGIN, max(f0) * F0_MARGIN) if f0 else None
        if target_f0 > 0:
            near = (target_f0 / TARGET_F0_MARGIN, target_f0 * TARGET_F0_MARGIN)
            both = (max(near[0], pitch[0]), min(near[1], pitch[1])) if pitch else near
            pitch = both if both[0] < both[1] else near
        return cls((min(rms) / RMS_MARGIN, max(rms) * RMS_MARGIN),
                   (min(seconds) / LENGTH_MARGIN, max(seconds) * LENGTH_MARGIN),
                   pitch, min(voiced) * VOICED_MARGIN if voiced else None)

    @classmethod
    def from_state(cls, saved: dict) -> "Guard":
        f0 = saved.get("f0")
        return cls(tuple(saved["rms"]), tuple(saved["seconds"]), tuple(f0) if f0 else None, saved.get("voiced"))

    def reaching(self, start_f0: float) -> "Guard":
        """The pitch band widened to hold the start's pitch (and START_F0_SLACK): a start outside
        the target's band (a real recording's pitch, a pool of the other sex) then moves toward it
        step by step, where a band it is outside of would refuse every step near it."""
        if self.f0 is None or start_f0 <= 0 or self.f0[0] <= start_f0 <= self.f0[1]:
            return self
        return dataclasses.replace(self, f0=(min(self.f0[0], start_f0 / START_F0_SLACK),
                                             max(self.f0[1], start_f0 * START_F0_SLACK)))

    def as_state(self) -> dict:
        return {"rms": self.rms, "seconds": self.seconds, "f0": self.f0, "voiced": self.voiced}

    def problem(self, audio: np.ndarray, pack: np.ndarray, length_scale: float = 1.0) -> str | None:
        """Why a candidate is refused, or None. `length_scale`: how much longer (in phonemes) the
        sentences spoken are than the ones the length range was measured on."""
        if not np.isfinite(audio).all():
            return "audio not finite"
        peak = float(np.abs(audio).max()) if audio.size else 0.0
        if peak >= CLIP:
            return f"clipping (peak {peak:.3f})"
        rms = float(np.sqrt(np.mean(audio.astype(np.float64) ** 2)))
        if not self.rms[0] <= rms <= self.rms[1]:
            return f"loudness {rms:.4f} outside the official voices' {self.rms[0]:.4f}..{self.rms[1]:.4f}"
        secs = audio.size / SAMPLE_RATE
        lo, hi = self.seconds[0] * length_scale, self.seconds[1] * length_scale
        if not lo <= secs <= hi:
            return f"length {secs:.2f} s outside the official voices' {lo:.2f}..{hi:.2f} s"
        if self.f0 is not None:
            f0, voiced = pitch_stats(audio, SAMPLE_RATE)
            if not self.f0[0] <= f0 <= self.f0[1]:
                return f"median pitch {f0:.0f} Hz outside the allowed {self.f0[0]:.0f}..{self.f0[1]:.0f} Hz"
            if voiced < self.voiced:
                return f"voiced share {voiced:.2f} under the official voices' {self.voiced:.2f} (breath or buzz)"
        try:
            check_plausible(pack, "candidate")
        except ImplausibleVoiceError as exc:
            return str(exc)
        return None


class Scorer:
    """kcc speaking fixed sentences with a pack, heard by the speaker encoder."""

    def __init__(self, synth, chunks: list, encoder: SpeakerEncoder, groups: list[list] | None = None):
        self.synth, self.chunks, self.encoder = synth, chunks, encoder      # chunks: engine.plan's Encoded
        self.groups = groups if groups is not None else [list(chunks)]      # the chunks of each sentence
        self.cores = available_cores()

    @classmethod
    def speaking(cls, synth, g2p, sentences: tuple[str, ...], encoder: SpeakerEncoder) -> "Scorer":
        groups = [list(plan(text, g2p)) for text in sentences]
        return cls(synth, [c for g in groups for c in g], encoder, groups)

    def phonemes(self, sentences=None) -> int:
        groups = self.groups if sentences is None else [self.groups[i] for i in sentences]
        return sum(len(c.phonemes) for g in groups for c in g)

    def audio(self, pack: np.ndarray, chunks: list | None = None) -> np.ndarray:
        parts = [np.asarray(self.synth.synthesize(c.ids, style_for(pack, len(c.phonemes)), speed=1.0, seed=0).audio,
                            np.float32).reshape(-1) for c in (self.chunks if chunks is None else chunks)]
        return np.concatenate(parts)

    def sentences(self, jobs: list[tuple[np.ndarray, int]]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(audio, embedding) of each (pack, sentence index), each sentence alone (the unit a
        rotating score averages), the sentences spoken side by side on every core. A short
        sentence scales only ~x1.6 on a second kernel thread, two sentences at one thread each ~x2; so each job runs at cores // (jobs running) threads, read before each
        stage, and the last one left takes every core. The audio's bits do not depend on the thread
        count, so the result is the sequential one. The encoder hears them in order, here."""
        if len(jobs) <= 1 or self.cores <= 1:
            audios = [self.audio(pack, self.groups[i]) for pack, i in jobs]
        else:
            running = [0]
            lock = threading.Lock()

            def share() -> int:
                return max(1, self.cores // max(1, running[0]))

            def speak(pack, i):
                with lock:
                    running[0] += 1
                THREADS.set(share)
                try:
                    return self.audio(pack, self.groups[i])
                finally:
                    with lock:
                        running[0] -= 1
            audios = list(_pool(self.cores).map(lambda job: speak(*job), jobs))
        return [(a, self.embed(a)) for a in audios]

    def embed(self, audio: np.ndarray) -> np.ndarray:
        return self.encoder.embed(resample(audio, SAMPLE_RATE))

    def similarity(self, pack: np.ndarray, target: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
        """(cosine to target, the audio, its embedding)."""
        audio = self.audio(pack)
        emb = self.embed(audio)
        return float(emb @ target), audio, emb


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _pool(workers: int) -> ThreadPoolExecutor:
    """One pool of speaking threads per size, kept: each keeps its synthesis arena between steps."""
    if workers not in _POOLS:
        _POOLS[workers] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kcc-design")
    return _POOLS[workers]


def make_pack(packs: np.ndarray, logits: np.ndarray, offset: np.ndarray) -> np.ndarray:
    w = np.exp(logits - logits.max())
    w /= w.sum()
    return (np.tensordot(w, packs.astype(np.float64), axes=1) + offset.reshape(1, 1, -1)).astype(np.float32)


@dataclass
class State:
    key: str                                  # target, language, pool and seed: what must match to resume
    pool: list[str]
    top: list[str]
    logits: list[float]
    offset: list[float]
    score: float
    start_score: float
    step: int = 0
    sigma: float = SIGMA_START                # the random steps' size
    sigma_guided: float = SIGMA_START         # the surrogate-guided steps' size
    accepted: int = 0
    refused: int = 0                          # candidates the guard refused
    confirmations: int = 0                    # rotating wins heard again on fresh sentences
    refusal: str = ""                         # why the guard refused the last candidate it refused
    seconds: float = 0.0                      # search time spent, over every run
    rng: dict = field(default_factory=dict)
    guard: dict = field(default_factory=dict)
    pool_scores: dict = field(default_factory=dict)
    heard: list = field(default_factory=list)     # [(style step, embedding step)] of recent candidates
    embedding: list = field(default_factory=list)  # fixed scoring: the best pack's embedding
    incumbent: dict = field(default_factory=dict)  # rotating scoring: the best pack's embedding per sentence
    version: int = STATE_VERSION

    def save(self, path: Path) -> None:
        with AtomicFile(path) as out:
            out.fh.write(json.dumps(self.__dict__, indent=1).encode())
            out.commit()

    @classmethod
    def load(cls, path: Path) -> "State":
        try:
            data = json.loads(path.read_text())
            if data.get("version") != STATE_VERSION:
                raise StateMismatchError(f"{path}: a state file of another version; pass --restart to replace it")
            return cls(**data)
        except (ValueError, TypeError, AttributeError) as exc:      # JSONDecodeError is a ValueError
            if isinstance(exc, StateMismatchError):
                raise
            raise StateMismatchError(f"{path}: not a voice design state ({type(exc).__name__}); pass --restart "
                                     "to replace it") from None


def mean_similarity(embeddings: list[np.ndarray], target: np.ndarray) -> float:
    """Cosine between the target and the mean of per-sentence embeddings (what resemblyzer does
    with the partials of one utterance, one level up): the same voice scores the same on any set."""
    return float(unit(np.mean(np.asarray(embeddings, np.float64), axis=0)) @ target)


def fit_blend(embeddings: np.ndarray, target: np.ndarray, iters: int = 400) -> np.ndarray:
    """Weights on the simplex whose blend of `embeddings` [n, 256] points closest to `target`
    (projected gradient ascent on the cosine): where a blend of the voices' packs should start,
    as blending packs moves the embedding roughly as blending embeddings would."""
    n = len(embeddings)
    w = np.full(n, 1.0 / n)
    for _ in range(iters):
        mix = w @ embeddings
        norm = np.linalg.norm(mix)
        grad = embeddings @ (target / norm - (mix @ target) * mix / norm ** 3)
        w = _project_simplex(w + 0.5 * grad)
    return w


def _project_simplex(v: np.ndarray) -> np.ndarray:
    u = np.sort(v)[::-1]
    css = np.cumsum(u) - 1
    k = np.nonzero(u - css / np.arange(1, len(v) + 1) > 0)[0][-1]
    return np.maximum(v - css[k] / (k + 1), 0)


def local_direction(u: np.ndarray, d: np.ndarray, target: np.ndarray, at: np.ndarray,
                    ridge: float = 0.1) -> np.ndarray:
    """A unit direction in standardised style space along which the embedding turns toward
    `target` from `at` (the incumbent's unit embedding), by a linear model of the embedding's
    steps `d` [n, 256] from the style's steps `u` [n, dims] around the incumbent: J = U^T (U U^T
    + ridge * mean |u|^2 I)^-1 D in its dual form (n << dims), applied to the target's part
    orthogonal to `at` (the part of a step along `at` only rescales the embedding)."""
    lam = ridge * float(np.mean(np.sum(u * u, axis=1))) + 1e-12
    jac = u.T @ np.linalg.solve(u @ u.T + lam * np.eye(len(u)), d)
    g = jac @ (target - float(at @ target) * at)
    return g / max(float(np.linalg.norm(g)), 1e-12)


class PoolCache:
    """What each official voice sounds like to the encoder on the scoring sentences (embedding,
    loudness, length), kept on disk: a pool is scored once per model, not once per design. An
    entry's key digests the model's identity, the sentences' phoneme ids and the pack's bytes."""

    def __init__(self, path: Path, model: str):
        self.path, self.model = Path(path), model
        try:
            self.entries = json.loads(self.path.read_text()) if self.path.is_file() else {}
        except ValueError:                    # a damaged cache is rebuilt, never trusted
            self.entries = {}
        if not isinstance(self.entries, dict):
            self.entries = {}

    def _key(self, scorer: Scorer, pack: np.ndarray) -> str:
        h = hashlib.sha256(self.model.encode())
        h.update(json.dumps([list(map(int, c.ids)) for c in scorer.chunks]).encode())
        h.update(np.ascontiguousarray(pack, np.float32).tobytes())
        return h.hexdigest()

    def get(self, scorer: Scorer, pack: np.ndarray) -> dict | None:
        return self.entries.get(self._key(scorer, pack))

    def put(self, scorer: Scorer, pack: np.ndarray, heard: dict) -> None:
        self.entries[self._key(scorer, pack)] = heard
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with AtomicFile(self.path) as out:
            out.fh.write(json.dumps(self.entries).encode())
            out.commit()


def design_key(target: np.ndarray, language: str, pool: list[str], seed: int) -> str:
    h = hashlib.sha256(np.asarray(target, np.float32).round(5).tobytes())
    h.update(json.dumps([language, sorted(pool), seed]).encode())
    return h.hexdigest()[:32]


class Search:
    """One design: `start()` (or a loaded state), then `run()` steps until the budget is spent."""

    def __init__(self, scorer: Scorer, packs: dict[str, np.ndarray], target: np.ndarray, language: str,
                 seed: int, state_path: Path, progress=None, pool_cache: PoolCache | None = None,
                 rotation: Scorer | None = None, target_f0: float = 0.0):
        self.scorer, self.packs, self.target = scorer, packs, unit(target)
        self.target_f0 = target_f0        # the target recording's median pitch (0: not heard): the guard keeps near it
        self.rotation = rotation          # when given: each step scores a fresh ROTATE_K of its sentences
        self.seed, self.state_path, self.progress = seed, Path(state_path), progress
        self.pool_cache = pool_cache
        self.key = design_key(self.target, language, list(packs), seed)
        self.state: State | None = None

    # -- start ---------------------------------------------------------------------------------
    def resume_or_start(self, restart: bool = False) -> State:
        if self.state_path.is_file() and not restart:
            state = State.load(self.state_path)
            self.check_key(state.key)
            self.state = state
            self._say(f"resuming at step {state.step}, similarity {state.score:.3f}")
            return state
        return self.start()

    def start(self) -> State:
        t0 = time.monotonic()
        scores, rms, secs, f0s, voiced, embeddings = {}, [], [], [], [], {}
        for i, (name, pack) in enumerate(self.packs.items()):
            heard = self.pool_cache.get(self.scorer, pack) if self.pool_cache else None
            if heard is None or "f0" not in heard:        # (cached before the pitch guard: heard again)
                audio = self.scorer.audio(pack)
                pitch, share = pitch_stats(audio, SAMPLE_RATE)
                heard = {"embedding": [float(x) for x in self.scorer.embed(audio)], "seconds": audio.size / SAMPLE_RATE,
                         "rms": float(np.sqrt(np.mean(audio.astype(np.float64) ** 2))), "f0": pitch, "voiced": share}
                if self.pool_cache:
                    self.pool_cache.put(self.scorer, pack, heard)
            scores[name] = float(np.asarray(heard["embedding"], np.float32) @ self.target)
            embeddings[name] = np.asarray(heard["embedding"], np.float64)
            rms.append(heard["rms"])
            secs.append(heard["seconds"])
            f0s.append(heard["f0"])
            voiced.append(heard["voiced"])
            self._say(f"scoring the official voices: {i + 1}/{len(self.packs)} ({name} {scores[name]:.3f})")
        guard = Guard.from_pool(rms, secs, f0s, voiced, self.target_f0)
        near = sorted(scores, key=scores.get, reverse=True)[:2 * TOP_K]
        fitted = fit_blend(np.stack([embeddings[n] for n in near]), self.target.astype(np.float64))
        # the blend's basis: the voices the fit weighs most, then the most similar ones
        top = [near[i] for i in np.argsort(-fitted, kind="stable") if fitted[i] > 0][:TOP_K]
        top += [n for n in near if n not in top][:TOP_K - len(top)]
        top.sort(key=scores.get, reverse=True)
        stack = self._stack(top)
        sims = np.array([scores[n] for n in top])
        fit_w = np.array([fitted[near.index(n)] for n in top])
        # The best voice alone is already scored (and, an official voice, inside the pool's range;
        # the target's pitch band it may be outside of: the guard is widened to reach it below).
        best = (scores[top[0]], np.where(np.arange(len(top)) < 1, 0.0, -30.0))
        best_emb = embeddings[top[0]]
        best_f0 = f0s[list(self.packs).index(top[0])]
        candidates = [np.where(np.arange(len(top)) < k, 0.0, -30.0) for k in (2, 3) if k <= len(top)]
        candidates.append((sims - sims.max()) * 20.0)                # similarity-weighted blend of the top
        candidates.append(np.log(fit_w + 1e-4))                       # the embedding fit's blend
        for logits in candidates:
            pack = make_pack(stack, logits, np.zeros(stack.shape[-1]))
            score, audio, emb = self.scorer.similarity(pack, self.target)
            f0 = pitch_stats(audio, SAMPLE_RATE)[0]
            if guard.reaching(f0).problem(audio, pack) is None and score > best[0]:
                best, best_f0, best_emb = (score, logits), f0, emb
        guard = guard.reaching(best_f0)
        incumbent = {}
        if self.rotation is not None:
            # the start heard on every rotating sentence: the incumbent's side of the first steps'
            # comparisons, and a start similarity on the same footing as the steps' (their mean)
            pack = make_pack(stack, best[1], np.zeros(stack.shape[-1]))
            heard = self.rotation.sentences([(pack, i) for i in range(len(self.rotation.groups))])
            incumbent = {str(i): [float(x) for x in emb] for i, (_, emb) in enumerate(heard)}
            self._say(f"the start on {len(incumbent)} rotating sentences")
            best = (mean_similarity(list(incumbent.values()), self.target), best[1])
        rng = np.random.default_rng(self.seed)
        self.state = State(self.key, list(self.packs), top, [float(x) for x in best[1]],
                           [0.0] * stack.shape[-1], best[0], best[0], rng=rng.bit_generator.state,
                           guard=guard.as_state(), pool_scores=scores,
                           embedding=[float(x) for x in best_emb], incumbent=incumbent,
                           seconds=time.monotonic() - t0)
        self.state.save(self.state_path)
        return self.state

    # -- improve -------------------------------------------------------------------------------
    def run(self, minutes: float | None = None, steps: int | None = None) -> State:
        """Steps until `steps` (total, across runs) or `minutes` (this run) are spent."""
        s = self.state
        stack = self._stack(s.top)
        scale = self._style_frame()[1]
        guard = Guard.from_state(s.guard)
        rng = np.random.default_rng()
        rng.bit_generator.state = s.rng
        reach = np.ones(stack.shape[-1])
        reach[STYLE_PRED] = PREDICTOR_STEP
        began = time.monotonic()
        deadline = began + 60 * minutes if minutes is not None else math.inf
        while (steps is None or s.step < steps) and time.monotonic() < deadline:
            t0 = time.monotonic()
            guided = s.step % 2 == 0 and len(s.heard) >= HEARD_MIN
            best = self.pack()
            sigma = s.sigma_guided if guided else s.sigma
            logits = np.asarray(s.logits) + max(sigma, LOGIT_SIGMA_MIN) * rng.standard_normal(len(s.logits))
            noise = rng.standard_normal(stack.shape[-1]) * reach
            if guided:
                # every other step: along the local model's uphill direction, with a little noise
                u, d = (np.array([p[i] for p in s.heard]) for i in (0, 1))
                along = local_direction(u * reach, d, self.target.astype(np.float64), self._heard_as())
                along *= np.sqrt(np.count_nonzero(reach))
                noise = along * abs(1.0 + 0.5 * rng.standard_normal()) + 0.3 * noise
            offset = np.asarray(s.offset) + sigma * 0.5 * scale * noise
            pack = make_pack(stack, logits, offset)
            if self.rotation is None:
                score, audio, emb = self.scorer.similarity(pack, self.target)
                incumbent, length_scale, fresh, used = s.score, 1.0, None, None
            else:
                idx = used = self._draw(rng)
                score, audio, emb, incumbent, length_scale, fresh, heard = self._rotating(idx, pack)
            problem = guard.problem(audio, pack, length_scale)
            if self.rotation is not None and problem is None and score > incumbent:
                # a win on ROTATE_K sentences is confirmed on ROTATE_K more before it is kept
                more = self._draw(rng, exclude=idx)
                if more:
                    used = sorted(idx + more)
                    score, audio, emb, incumbent, length_scale, fresh, _ = self._rotating(used, pack, heard)
                    s.confirmations += 1
                    problem = guard.problem(audio, pack, length_scale)
            # the step heard: the style's move and the embedding's, against the incumbent on the same sentences
            step = (self._mean_row(pack) - self._mean_row(best)) / scale
            s.heard = (s.heard + [(list(map(float, step)), list(map(float, emb - self._heard_as(used))))])[-HEARD_RECENT:]
            kept = problem is None and score > incumbent
            if kept:
                s.logits, s.offset, s.score = [float(x) for x in logits], [float(x) for x in offset], score
                s.accepted += 1
                if fresh is not None:
                    s.incumbent = fresh
                else:
                    s.embedding = [float(x) for x in emb]
            if fresh is not None:
                # the incumbent's similarity over every sentence it has spoken so far
                s.score = mean_similarity(list(s.incumbent.values()), self.target)
            s.refused += problem is not None
            s.refusal = problem or s.refusal
            # each kind of step keeps its own step size, by the 1/5 success rule
            sigma = min(SIGMA_MAX, sigma * math.exp(0.8)) if kept else max(SIGMA_MIN, sigma * math.exp(-0.2))
            if guided:
                s.sigma_guided = sigma
            else:
                s.sigma = sigma
            s.step += 1
            s.seconds += time.monotonic() - t0
            s.rng = rng.bit_generator.state
            self.save()
            done = (s.step / steps if steps else 0.0) if minutes is None else \
                (time.monotonic() - began) / (60 * minutes)
            bar = "#" * int(20 * min(1.0, done))
            self._say(f"[{bar:<20}] step {s.step}: similarity {s.score:.3f} (start {s.start_score:.3f}), "
                      f"{s.accepted} kept, {s.refused} guarded{f' (last: {s.refusal})' if s.refusal else ''}, step sizes {s.sigma:.2f} / {s.sigma_guided:.2f}, "
                      f"{s.seconds / 60:.1f} min")
        return s

    def check_key(self, key: str) -> None:
        """StateMismatchError unless a saved state's key is this design's."""
        if key != self.key:
            raise StateMismatchError(f"{self.state_path}: the state of a design for another target, language, "
                                     "pool or seed; pass --restart to replace it, or another -o")

    def save(self) -> None:
        """Where run() writes the state after every step (a Race writes its every lane)."""
        self.state.save(self.state_path)

    def hear_everywhere(self) -> float:
        """The incumbent heard on every rotating sentence it has not spoken yet; its similarity
        over all of them (over the scoring sentences where there is no rotation): the footing on
        which searches of the same design compare."""
        s, rot = self.state, self.rotation
        if rot is None:
            return s.score
        missing = [i for i in range(len(rot.groups)) if str(i) not in s.incumbent]
        pack = self.pack()
        for i, (_, emb) in zip(missing, rot.sentences([(pack, i) for i in missing])):
            s.incumbent[str(i)] = [float(x) for x in emb]
        s.score = mean_similarity(list(s.incumbent.values()), self.target)
        return s.score

    def _heard_as(self, sentences: list[int] | None = None) -> np.ndarray:
        """The incumbent's unit embedding: on the rotating `sentences` (all it has spoken where
        None), or on the fixed scoring sentences."""
        s = self.state
        if self.rotation is None:
            return np.asarray(s.embedding, np.float64)
        keys = list(s.incumbent) if sentences is None else [str(i) for i in sentences]
        return unit(np.mean(np.asarray([s.incumbent[k] for k in keys], np.float64), axis=0))

    def _draw(self, rng, exclude: list[int] = ()) -> list[int]:
        """ROTATE_K rotating sentences (fewer where fewer are left), none of `exclude`, in order."""
        rest = [i for i in range(len(self.rotation.groups)) if i not in exclude]
        k = min(ROTATE_K, len(rest))
        return sorted(rest[int(j)] for j in rng.choice(len(rest), k, replace=False)) if k else []

    def _rotating(self, idx: list[int], pack: np.ndarray, heard: dict | None = None):
        """The candidate and the incumbent scored on the same sentences `idx` (a fair, paired
        comparison), each as the mean of its per-sentence embeddings; the incumbent's embedding
        per sentence is kept until it is replaced, so most steps synthesise the candidate only.
        heard: the candidate's (audio, embedding) of sentences already spoken. Returns (candidate
        score, its audio, its embedding, the incumbent's score, the guard's length scale, the
        candidate's embeddings by sentence, what the candidate has spoken)."""
        s, rot = self.state, self.rotation
        missing = [i for i in idx if str(i) not in s.incumbent]
        heard = dict(heard or {})
        new = [i for i in idx if i not in heard]
        best = self.pack() if missing else None
        spoken = rot.sentences([(best, i) for i in missing] + [(pack, i) for i in new])   # side by side
        for i, (_, emb) in zip(missing, spoken):
            s.incumbent[str(i)] = [float(x) for x in emb]
        heard.update(zip(new, spoken[len(missing):]))
        embs = [heard[i][1] for i in idx]
        return (mean_similarity(embs, self.target), np.concatenate([heard[i][0] for i in idx]),
                unit(np.mean(np.asarray(embs, np.float64), axis=0)),
                mean_similarity([s.incumbent[str(i)] for i in idx], self.target),
                rot.phonemes(idx) / max(1, self.scorer.phonemes()),
                {str(i): [float(x) for x in e] for i, e in zip(idx, embs)}, heard)

    def pack(self) -> np.ndarray:
        return make_pack(self._stack(self.state.top), np.asarray(self.state.logits), np.asarray(self.state.offset))

    def _style_frame(self) -> tuple[np.ndarray, np.ndarray]:
        """The pool's mean style row and its spread per style dim (the units the walk steps in)."""
        rows = np.stack([self._mean_row(p) for p in self.packs.values()])
        return rows.mean(axis=0), np.maximum(rows.std(axis=0), 1e-3)

    @staticmethod
    def _mean_row(pack: np.ndarray) -> np.ndarray:
        return pack.reshape(-1, pack.shape[-1]).astype(np.float64).mean(axis=0)

    def _stack(self, names: list[str]) -> np.ndarray:
        return np.stack([self.packs[n] for n in names])

    def _say(self, text: str) -> None:
        if self.progress is not None:
            self.progress(text)
