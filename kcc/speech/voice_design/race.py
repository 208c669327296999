"""Racing: several searches of one design, the best of them finishing it.

A design's seed moved its result more than any change to the search measured (bf_emma from the
American voices, four seeds: 0.860-0.922 on held-out sentences): each walk settles in the blend
its first kept steps lead to, and the score on the rotating sentences at the end ranked the seeds
as the held-out sentences did. So LANES walks start from the same blend, each with its own random
stream, and share RACE_SHARE of the budget one after the other; the lane whose incumbent is heard
closest to the target on every rotating sentence then runs alone for the rest of the budget.

One file at the search's state path holds the plan (each lane's budget, fixed when the design
starts), every lane's state and the winner once chosen: rerunning the same command continues
where it stopped, lane by lane. A budget too small to give every lane MIN_LANE_STEPS steps (or
MIN_LANE_SECONDS) runs one lane: the plain search.
"""
from __future__ import annotations

import copy
import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from kcc.files import AtomicFile
from kcc.speech.voice_design.search import STATE_VERSION, Search, State, StateMismatchError

LANES = 3
RACE_SHARE = 0.5                  # of the budget the lanes share; the winner runs the rest
MIN_LANE_STEPS = 30
MIN_LANE_SECONDS = 60.0
RACE_VERSION = 2


@dataclass
class Plan:
    lanes: int
    start_seconds: float = 0.0              # the start's time, in every lane's seconds
    lane_steps: int | None = None          # a --steps budget: each lane's steps
    lane_until: float | None = None        # a --minutes budget: each lane's search seconds (start included)
    winner: int | None = None
    scores: list[float] | None = None       # each lane heard on every rotating sentence, when the race ended

    @classmethod
    def for_budget(cls, start_seconds: float, minutes: float | None, steps: int | None,
                   lanes: int = LANES) -> "Plan":
        if steps is not None:
            each = int(steps * RACE_SHARE / lanes)
            lanes = lanes if each >= MIN_LANE_STEPS else 1
            return cls(lanes, start_seconds, lane_steps=each if lanes > 1 else steps)
        each = 60.0 * (minutes or 0.0) * RACE_SHARE / lanes
        lanes = lanes if each >= MIN_LANE_SECONDS else 1
        return cls(lanes, start_seconds, lane_until=start_seconds + each if lanes > 1 else 0.0)


class Race:
    """`resume_or_start(...)`, then `run(...)`; `search.state` is the lane running (the winner at the end)."""

    def __init__(self, search: Search, lanes: int = LANES):
        self.search, self.path, self.wanted = search, Path(search.state_path), lanes     # wanted: a new design's lanes
        self.plan: Plan | None = None
        self.lanes: list[State] = []
        self._frozen: dict[int, str] = {}          # the lanes not running, serialised once
        self._progress = search.progress
        # every step writes the race (all lanes), not one lane's state; progress names the lane
        search.save, search.progress = self.save, (self._tell if search.progress else None)

    # -- start / resume ------------------------------------------------------------------------
    def resume_or_start(self, restart: bool = False, minutes: float | None = None, steps: int | None = None) -> State:
        if self.path.is_file() and not restart:
            self._load()
            self.search._say(f"resuming lane {self._current() + 1}/{self.plan.lanes} at step "
                             f"{self.search.state.step}, similarity {self.search.state.score:.3f}")
            return self.search.state
        start = self.search.start()
        self.plan = Plan.for_budget(start.seconds, minutes, steps, self.wanted)
        self.lanes = [start] + [self._lane(start, r) for r in range(1, self.plan.lanes)]
        self.search.state = start
        self.save()
        return start

    def _lane(self, start: State, r: int) -> State:
        """Lane r: the start with its own random stream (lane 0 keeps the seed's own: one lane is the plain search)."""
        lane = copy.deepcopy(start)
        lane.rng = np.random.default_rng([self.search.seed, r]).bit_generator.state
        return lane

    # -- run -----------------------------------------------------------------------------------
    def run(self, minutes: float | None = None, steps: int | None = None) -> State:
        """Steps until `steps` (in all lanes together, across runs) or `minutes` (this run) are spent."""
        deadline = time.monotonic() + 60 * minutes if minutes is not None else math.inf

        def left() -> float | None:
            return (deadline - time.monotonic()) / 60 if minutes is not None else None
        if self.plan.winner is None:
            for r in range(self.plan.lanes):
                while not self._finished(r) and (left() is None or left() > 0) and (steps is None or self.steps < steps):
                    self._enter(r)
                    lane = self.lanes[r]
                    cap = self.plan.lane_steps
                    if steps is not None:             # the run's own step budget, over every lane
                        cap = min(math.inf if cap is None else cap, lane.step + steps - self.steps)
                    if self.plan.lane_steps is not None:
                        self.search.run(minutes=left(), steps=cap)
                    else:
                        budget = (self.plan.lane_until - lane.seconds) / 60
                        self.search.run(minutes=budget if left() is None else min(budget, left()), steps=cap)
                if not self._finished(r):
                    return self.search.state                 # the run's budget ended inside the race: resumed later
            self._choose()
        self._enter(self.plan.winner)
        if steps is None:
            return self.search.run(minutes=left())
        others = sum(lane.step for i, lane in enumerate(self.lanes) if i != self.plan.winner)
        return self.search.run(minutes=left(), steps=steps - others)

    def _finished(self, r: int) -> bool:
        lane = self.lanes[r]
        if self.plan.lanes == 1:
            return True
        if self.plan.lane_steps is not None:
            return lane.step >= self.plan.lane_steps
        return lane.seconds >= self.plan.lane_until

    def _choose(self) -> None:
        """The lane heard closest to the target on every rotating sentence (each lane's incumbent
        first speaks the ones it has not spoken)."""
        scores = []
        for r in range(self.plan.lanes):
            self._enter(r)
            scores.append(self.search.hear_everywhere() if self.plan.lanes > 1 else self.lanes[r].score)
        self.plan.winner, self.plan.scores = int(np.argmax(scores)), [float(x) for x in scores]
        if self.plan.lanes > 1:
            self.search._say("race: " + ", ".join(f"lane {r + 1} {s:.3f}" for r, s in enumerate(scores))
                             + f"; lane {self.plan.winner + 1} goes on")
        self.save()

    def _enter(self, r: int) -> None:
        if self.search.state is not self.lanes[r]:
            self._frozen.pop(r, None)
            self.search.state = self.lanes[r]

    def _tell(self, text: str) -> None:
        racing = self.plan is not None and self.plan.lanes > 1 and self.plan.winner is None
        lane = next((r for r, state in enumerate(self.lanes) if state is self.search.state), None)
        self._progress(f"lane {lane + 1}/{self.plan.lanes}: {text}" if racing and lane is not None else text)

    def pack(self) -> np.ndarray:
        """The design so far: the winner's, or while the race runs the lane scoring best yet."""
        if self.plan.winner is None:
            self._enter(max(range(len(self.lanes)), key=lambda r: self.lanes[r].score))
        return self.search.pack()

    def _current(self) -> int:
        if self.plan.winner is not None:
            return self.plan.winner
        return next((r for r in range(self.plan.lanes) if not self._finished(r)), self.plan.lanes - 1)

    # -- totals over every lane ----------------------------------------------------------------
    @property
    def steps(self) -> int:
        return sum(lane.step for lane in self.lanes)

    @property
    def seconds(self) -> float:
        """Search seconds over every lane (the start counted once)."""
        return sum(lane.seconds for lane in self.lanes) - (len(self.lanes) - 1) * self.plan.start_seconds

    # -- the file ------------------------------------------------------------------------------
    def save(self) -> None:
        running = self.search.state
        parts = []
        for r, lane in enumerate(self.lanes):
            if lane is running:
                parts.append(json.dumps(lane.__dict__))
                continue
            if r not in self._frozen:
                self._frozen[r] = json.dumps(lane.__dict__)
            parts.append(self._frozen[r])
        head = json.dumps({"race": RACE_VERSION, "key": self.search.key, "plan": asdict(self.plan)})
        with AtomicFile(self.path) as out:
            out.fh.write((head[:-1] + ', "lanes": [' + ", ".join(parts) + "]}").encode())
            out.commit()

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text())
            if not isinstance(data, dict) or data.get("race") != RACE_VERSION or \
                    any(lane.get("version") != STATE_VERSION for lane in data.get("lanes", [])):
                raise StateMismatchError(f"{self.path}: not a voice design state of this version; pass --restart "
                                         "to replace it")
            self.search.check_key(data.get("key"))
            self.plan = Plan(**data["plan"])
            self.lanes = [State(**lane) for lane in data["lanes"]]
            if len(self.lanes) != self.plan.lanes:
                raise ValueError("lanes")
        except StateMismatchError:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as exc:     # JSONDecodeError is a ValueError
            raise StateMismatchError(f"{self.path}: not a voice design state ({type(exc).__name__}); pass "
                                     "--restart to replace it") from None
        self.search.state = self.lanes[self._current()]
