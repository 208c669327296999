"""Racing lanes: the budget's first share split between searches with their own random streams,
the best of them on every rotating sentence finishing the design; resumable lane by lane."""
from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import numpy as np
import pytest

from kcc.speech.voice_design import race as race_module
from kcc.speech.voice_design.encoder import SpeakerEncoder
from kcc.speech.voice_design.race import LANES, RACE_SHARE, RACE_VERSION, Plan, Race
from kcc.speech.voice_design.search import PoolCache, Scorer, Search, StateMismatchError, mean_similarity
from test_voice_design_search import PitchSynth, pack_at

# four one-chunk "sentences" of one phoneme count: PitchSynth speaks the same utterance for each, so
# the guard's length range (scaled by phonemes) holds and only the similarity decides a step
GROUPS = [[SimpleNamespace(ids=[5, 6, 7], phonemes="abc")] for _ in range(4)]
LANE = 4                                        # MIN_LANE_STEPS here: races that run in seconds
STEPS = 2 * LANES * LANE                        # the smallest budget that races


@pytest.fixture(scope="module", autouse=True)
def short_lanes():
    real = race_module.MIN_LANE_STEPS
    race_module.MIN_LANE_STEPS = LANE
    yield
    race_module.MIN_LANE_STEPS = real


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    encoder = SpeakerEncoder()
    synth = PitchSynth()
    scorer = Scorer(synth, [c for g in GROUPS[:2] for c in g], encoder, GROUPS[:2])
    rotation = Scorer(synth, [c for g in GROUPS for c in g], encoder, GROUPS)
    packs = {"low": pack_at(-0.4), "mid": pack_at(0.0), "high": pack_at(0.45)}
    target = scorer.embed(scorer.audio(pack_at(0.2)))            # between "mid" and "high"
    root = tmp_path_factory.mktemp("race")
    cache = PoolCache(root / "pool.json", "stand-in")
    Search(scorer, packs, target, "en-us", 0, root / "warm.json", pool_cache=cache, rotation=rotation).start()
    return scorer, rotation, packs, target, cache


def race_at(world, path, seed=0, lines=None):
    scorer, rotation, packs, target, cache = world
    search = Search(scorer, packs, target, "en-us", seed, path, pool_cache=cache, rotation=rotation,
                    progress=None if lines is None else lines.append)
    return Race(search)


@pytest.fixture(scope="module")
def raced(world, tmp_path_factory):
    """One whole race of STEPS steps, and its progress lines."""
    lines = []
    race = race_at(world, tmp_path_factory.mktemp("raced") / "d.json", lines=lines)
    race.resume_or_start(steps=STEPS)
    race.run(steps=STEPS)
    return race, lines


@pytest.mark.parametrize("minutes, steps, lanes", [
    (None, STEPS, LANES), (None, STEPS - 1, 1), (10.0, None, LANES), (1.0, None, 1)])
def test_the_plan_races_only_a_budget_that_gives_every_lane_enough(minutes, steps, lanes):
    plan = Plan.for_budget(12.0, minutes, steps)
    assert plan.lanes == lanes and plan.winner is None
    if steps is not None:
        assert plan.lane_steps == (int(steps * RACE_SHARE / LANES) if lanes > 1 else steps)
    elif lanes > 1:
        assert plan.lane_until == pytest.approx(12.0 + 60 * minutes * RACE_SHARE / LANES)


def test_every_lane_runs_its_share_then_the_best_on_every_sentence_goes_on(raced, world):
    race, _ = raced
    each = race.plan.lane_steps
    assert race.plan.lanes == LANES and race.steps == STEPS
    winner = race.plan.winner
    assert [lane.step for r, lane in enumerate(race.lanes) if r != winner] == [each] * (LANES - 1)
    assert race.lanes[winner].step == STEPS - (LANES - 1) * each
    # each lane's incumbent was heard on every rotating sentence when the race ended, and the
    # winner is the lane heard closest to the target there
    scores = race.plan.scores
    assert winner == int(np.argmax(scores)) and len(set(scores)) > 1     # the lanes walked apart
    for r, lane in enumerate(race.lanes):
        assert sorted(lane.incumbent, key=int) == [str(i) for i in range(len(GROUPS))]
        if r != winner:
            assert lane.score == pytest.approx(scores[r])
            assert lane.score == pytest.approx(mean_similarity(list(lane.incumbent.values()), race.search.target))
    assert race.search.state is race.lanes[winner]
    np.testing.assert_array_equal(race.pack(), race.search.pack())


def test_lanes_walk_their_own_random_streams_and_lane_one_is_the_plain_search(raced, world, tmp_path):
    race, _ = raced
    assert len({json.dumps(lane.rng) for lane in race.lanes}) == LANES
    scorer, rotation, packs, target, cache = world
    first = race_at(world, tmp_path / "d.json")
    first.resume_or_start(steps=STEPS)
    first.run(steps=first.plan.lane_steps)          # lane 1 alone, then the budget ends
    assert [lane.step for lane in first.lanes] == [first.plan.lane_steps] + [0] * (LANES - 1)
    plain = Search(scorer, packs, target, "en-us", 0, tmp_path / "plain.json", pool_cache=cache, rotation=rotation)
    plain.start()
    plain.run(steps=first.plan.lane_steps)
    assert plain.state.logits == first.lanes[0].logits and plain.state.offset == first.lanes[0].offset


def test_progress_names_the_lane_then_the_race_result(raced):
    _, lines = raced
    assert any(line.startswith(f"lane 2/{LANES}: ") for line in lines)
    result = next(line for line in lines if line.startswith("race: "))
    assert f"lane {raced[0].plan.winner + 1} goes on" in result


def test_an_interrupted_race_continues_lane_by_lane_to_the_same_voice(raced, world, tmp_path):
    path = tmp_path / "d.json"
    first = race_at(world, path)
    first.resume_or_start(steps=STEPS)
    first.run(steps=LANE + 2)            # Ctrl-C inside lane 2
    saved = json.loads(path.read_text())
    assert saved["plan"]["winner"] is None and [lane["step"] for lane in saved["lanes"]][:2] == [LANE, 2]
    again = race_at(world, path)
    again.resume_or_start()
    assert again.search.state is again.lanes[1] and again.search.state.step == 2
    again.run(steps=STEPS)
    assert (again.plan.winner, again.plan.scores) == (raced[0].plan.winner, raced[0].plan.scores)
    np.testing.assert_array_equal(again.pack(), raced[0].pack())


def test_the_pack_during_the_race_is_the_lane_scoring_best_so_far(world, tmp_path):
    race = race_at(world, tmp_path / "d.json")
    race.resume_or_start(steps=STEPS)
    race.run(steps=2 * LANE + 1)
    best = max(race.lanes, key=lambda lane: lane.score)
    pack = race.pack()
    assert race.search.state is best
    np.testing.assert_array_equal(pack, race.search.pack())


def test_a_short_budget_is_the_plain_search(world, tmp_path):
    race = race_at(world, tmp_path / "d.json")
    race.resume_or_start(steps=4)
    race.run(steps=4)
    assert race.plan.lanes == 1 and len(race.lanes) == 1 and race.steps == 4 and race.plan.winner == 0


def test_a_minutes_budget_runs_each_lane_its_seconds(world, tmp_path, monkeypatch):
    monkeypatch.setattr(race_module, "MIN_LANE_SECONDS", 0.2)
    race = race_at(world, tmp_path / "d.json")
    race.resume_or_start(minutes=0.06)
    assert race.plan.lanes == LANES and race.plan.lane_until > race.lanes[0].seconds
    race.run(minutes=0.06)
    if race.plan.winner is not None:           # all lanes done within the run's own minute share
        assert all(lane.seconds >= race.plan.lane_until for r, lane in enumerate(race.lanes) if r != race.plan.winner)
    else:
        assert any(lane.seconds < race.plan.lane_until for lane in race.lanes)


@pytest.mark.parametrize("text, why", [
    ("{not json", "not a voice design state"),
    ('{"version": 1, "key": "x", "step": 3}', "not a voice design state of this version"),
    ('{"race": 1, "key": "KEY", "plan": {"lanes": 1}, "lanes": []}', "not a voice design state of this version"),
    ('{"race": RACE, "key": "KEY", "plan": {"lanes": 1}, "lanes": [{"version": 1}]}',
     "not a voice design state of this version"),           # lanes walked by an earlier search
    ('{"race": RACE, "key": "other", "plan": {}, "lanes": []}', "another target"),
    ('{"race": RACE, "key": "KEY", "plan": {"lanes": 2}, "lanes": []}', "not a voice design state"),
])
def test_a_state_file_that_is_not_this_design_is_a_named_error(world, tmp_path, text, why):
    race = race_at(world, tmp_path / "d.json")
    (tmp_path / "d.json").write_text(text.replace("KEY", race.search.key).replace("RACE", str(RACE_VERSION)))
    with pytest.raises(StateMismatchError, match=why) as exc:
        race.resume_or_start()
    assert "--restart" in str(exc.value)


def test_restart_replaces_a_state_in_the_way(world, tmp_path):
    (tmp_path / "d.json").write_text("{not json")
    race = race_at(world, tmp_path / "d.json")
    race.resume_or_start(restart=True, steps=2)
    assert json.loads((tmp_path / "d.json").read_text())["plan"]["lanes"] == 1
    shutil.copy(tmp_path / "d.json", tmp_path / "e.json")
    with pytest.raises(StateMismatchError, match="another target"):
        race_at(world, tmp_path / "e.json", seed=1).resume_or_start()


def test_the_command_races_and_writes_the_winners_pack(tmp_path):
    """kcc voice design (run_design) on a budget that races: the steps of every lane add up to the
    budget, the pack written is the winner's, the state file holds the race."""
    from kcc.speech.audio.wav import write_wav
    from kcc.speech.voice_design import run as vrun
    from kcc.speech.voice_design.target import resample
    from test_voice_design_search import SPEECH
    target = write_wav(tmp_path / "me.wav", resample(SPEECH, 16_000, to=int(16_000 / 1.1)), sample_rate=16_000)
    req = vrun.DesignRequest(targets=[target], out=tmp_path / "me.npy", pool=["af_heart", "am_adam"], steps=STEPS)
    result = vrun.run_design(req, synth=PitchSynth())
    saved = json.loads((tmp_path / "me.npy.design.json").read_text())
    assert saved["plan"]["lanes"] == LANES and saved["plan"]["winner"] is not None
    assert result.steps == STEPS == sum(lane["step"] for lane in saved["lanes"])
    assert result.end == pytest.approx(saved["lanes"][saved["plan"]["winner"]]["score"])
    np.testing.assert_array_equal(np.load(tmp_path / "me.npy"), result.pack)
