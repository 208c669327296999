"""First-chunk planning (kcc.speech.request.chunking, kcc.speech.text.iter_chunks' ramp) and the
server's chunk scheduler (kcc.speech.serve.scheduler): pure functions and event order, no clocks."""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

from kcc.model.pipeline import SynthesisCancelled
from kcc.speech.request import chunk_plan, chunk_ramp
from kcc.speech.g2p.g2p import Word
from kcc.model.pipeline import CONTINUING_TRAIL_FRAMES, continuing_durations
from kcc.speech.engine import ends_sentence, plan, synthesize_chunks
from kcc.speech.audio.timestamps import SAMPLES_PER_FRAME
from kcc.speech.serve.scheduler import ChunkScheduler, SchedulerClosed
from kcc.speech.serve.request import SpeechRequest
from kcc.speech.serve.service import Limits
from kcc.speech.sentences import starts_phrase
from kcc.speech.text import iter_chunks, phoneme_string, word_level

from test_say import FakeSynth, LetterG2P, sentences
from test_server import RawStream, post, serving

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs far away into the woods."


def words_of(text):
    return LetterG2P()(text)


def flat(chunks):
    return [(w.text, w.phonemes) for c in chunks for w in c]


# -- the ramp --------------------------------------------------------------------------------------
def test_chunk_ramp_grows_to_the_limit():
    assert chunk_ramp(10, 200) == [10, 30, 90]
    assert chunk_ramp(10, 200, growth=2.0) == [10, 20, 40, 80, 160]
    assert chunk_ramp(200, 200) == [] and chunk_ramp(300, 200) == []


@pytest.mark.parametrize("first, limit, growth, why", [
    (0, 200, 3.0, "chunk limits must be positive, got first=0"), (10, 0, 3.0, "chunk limits must be positive, got .* limit=0"),
    (10, 200, 1.0, r"the ramp must grow, got growth=1\.0"), (10, 200, 0.5, r"the ramp must grow, got growth=0\.5")])
def test_chunk_ramp_refuses_bad_settings(first, limit, growth, why):
    with pytest.raises(ValueError, match=why):
        chunk_ramp(first, limit, growth)


# -- boundaries --------------------------------------------------------------------------------------
def ends_where_the_text_allows(chunk, following, limit) -> bool:
    """A stream's short chunk ends at a mark, before a phrase's first word, or (no such place
    within 3 x its limit) at a word boundary past that."""
    return (word_level(chunk[-1]) is not None or word_level(chunk[-2]) is not None
            or starts_phrase(following[0].text) or len(phoneme_string(chunk + following[:1])) > 3 * limit)


@pytest.mark.parametrize("ramp", [[9], [9, 27], [10, 30, 90], [12, 36]])
def test_ramped_chunks_keep_every_word_whole_and_in_order(ramp):
    words = words_of(sentences(8))
    chunks = list(iter_chunks(words, 200, ramp))
    assert flat(chunks) == [(w.text, w.phonemes) for w in words]        # nothing lost, nothing split
    assert [id(w) for c in chunks for w in c] == [id(w) for w in words]  # the very Word objects
    for k, c in enumerate(chunks[:-1]):
        assert len(phoneme_string(c)) <= 200
        if k < len(ramp):
            assert ends_where_the_text_allows(c, chunks[k + 1], ramp[k]), [w.text for w in c]
    assert max(len(phoneme_string(c)) for c in chunks) > ramp[-1]       # later chunks are longer


def test_first_chunk_ends_at_a_phrase_mark_when_one_fits():
    chunks = list(iter_chunks(words_of("Sentence number one, then more words follow here now."), 100, [20]))
    assert [w.text for w in chunks[0]] == ["Sentence", "number", "one", ","]


def test_first_chunk_without_a_mark_ends_before_a_phrase_rather_than_inside_one():
    chunks = list(iter_chunks(words_of(TEXT), 200, [9]))
    assert [w.text for w in chunks[0]] == ["The", "quick", "brown", "fox", "jumps"]   # | over the lazy dog
    assert [w.text for w in chunks[1]][:4] == ["over", "the", "lazy", "dog"]


def test_a_phrase_start_needs_two_words_before_it():
    chunks = list(iter_chunks(words_of("Go with us to the sea, now."), 200, [4]))
    assert [w.text for w in chunks[0]] == ["Go", "with", "us"]            # not "Go | with us": one word is no phrase


def test_no_phrase_in_sight_cuts_at_a_word_past_three_times_the_limit():
    text = "Seventeen elephants gracefully trampled unexpectedly purple geraniums yesterday."
    chunks = list(iter_chunks(words_of(text), 200, [10]))
    first = phoneme_string(chunks[0])
    assert 10 < len(first) <= 30 and len(phoneme_string(chunks[0] + chunks[1][:1])) > 30
    assert flat(chunks) == [(w.text, w.phonemes) for w in words_of(text)]


def test_a_word_longer_than_the_first_limit_stays_whole():
    chunks = list(iter_chunks(words_of("Incomprehensibilities abound here, truly and really."), 100, [5]))
    assert [w.text for w in chunks[0]] == ["Incomprehensibilities"]      # past 3 x 5 phonemes: the word alone, whole


@pytest.mark.parametrize("text", ["Hello there.", "Yes.", "Hi, all of you."])
def test_a_short_sentence_stays_one_chunk(text):
    ramp, min_rest = chunk_plan(6, 200)
    assert min_rest == 12
    assert len(list(iter_chunks(words_of(text), 200, ramp, min_rest))) == 1
    # without min_rest a short run still ends only at a mark: "Hi, | all of you." is the one cut
    assert len(list(iter_chunks(words_of(text), 200, ramp))) == (2 if "," in text else 1)


def test_min_rest_keeps_a_short_tail_with_its_chunk_but_not_a_long_one():
    text = "The quick brown fox jumps, over the lazy dog."
    assert len(list(iter_chunks(words_of(text), 200, [30], min_rest=30))) == 1       # 11 phonemes would follow
    assert len(list(iter_chunks(words_of(text), 200, [24], min_rest=10))) == 2


def test_the_ramp_runs_across_paragraphs():
    text = "One two.\nThree four, five six seven, eight nine ten eleven, twelve thirteen."
    chunks = plan(text, LetterG2P(), limit=200, first_limit=[8, 18])
    sizes = [len(c.phonemes) for c in chunks]
    assert chunks[0].text == "One two." and sizes[0] == 8      # the first paragraph fits the first limit
    assert chunks[1].text == "Three four," and sizes[1] <= 18         # the second gets the ramp's next,
    assert sizes[2] > 18 and len(sizes) == 3                            # cut at the text's comma


@pytest.mark.parametrize("bad", [[0], [5, -1], [2.5], ["x"]])
def test_bad_ramp_limits_are_refused(bad):
    with pytest.raises(ValueError, match=r"first chunk limits must be positive whole numbers, got \["):
        list(iter_chunks(words_of(TEXT), 200, bad))


# -- the plan comes from the request, never from load -------------------------------------------------
def test_the_server_plans_a_whole_file_as_say_and_a_stream_by_the_fixed_ramp(tmp_path):
    with serving(tmp_path, limits=Limits(first_chunk_phonemes=40, chunk_phonemes=200)) as srv:
        whole = SpeechRequest.build("Hi.", stream=False)
        streamed = SpeechRequest.build("Hi.", stream=True)
        assert srv.service.chunk_plan(whole) == {"limit": 510, "first_limit": None, "min_rest": 0}
        assert srv.service.chunk_plan(streamed) == {"limit": 200, "first_limit": [40, 120], "min_rest": 80}
        srv.service._measure(5.0, 10)                   # a very slow machine: the plan does not change
        assert srv.service.chunk_plan(streamed) == {"limit": 200, "first_limit": [40, 120], "min_rest": 80}


def test_scheduler_runs_the_earliest_key_first_and_skips_cancelled():
    sched = ChunkScheduler(1)
    hold, order, threads = threading.Event(), [], []
    try:
        threads.append(threading.Thread(target=sched.run, args=(0.0, lambda: hold.wait(10))))
        threads[0].start()
        while sched.busy == 0:
            hold.wait(0.01)
        gone = threading.Event()
        gone.set()
        for key in (3.0, 1.0, 2.0, 0.5):
            cancel = gone if key == 0.5 else None
            t = threading.Thread(target=lambda k=key, c=cancel: order.append(_outcome(sched, k, order, c)))
            threads.append(t)
            t.start()
        while sched.waiting() < 4:
            hold.wait(0.01)
        hold.set()
        for t in threads:
            t.join(10)
    finally:
        hold.set()
        sched.close()
    ran = [x for x in order if isinstance(x, float)]
    assert ran == [1.0, 2.0, 3.0] and "cancelled 0.5" in order


def _outcome(sched, key, order, cancel):
    try:
        sched.run(key, lambda: order.append(key), cancel)
    except SynthesisCancelled:
        return f"cancelled {key}"
    return None


def test_scheduler_close_fails_waiting_chunks_and_refuses_new_ones():
    sched = ChunkScheduler(1)
    hold, box = threading.Event(), {}
    runner = threading.Thread(target=sched.run, args=(0.0, lambda: hold.wait(10)))
    runner.start()
    while sched.busy == 0:
        hold.wait(0.01)

    def waiter():
        try:
            sched.run(1.0, lambda: "ran")
        except SchedulerClosed as exc:
            box["error"] = exc
    w = threading.Thread(target=waiter)
    w.start()
    while sched.waiting() < 1:
        hold.wait(0.01)
    closer = threading.Thread(target=sched.close)
    closer.start()
    w.join(10)
    assert isinstance(box.get("error"), SchedulerClosed)
    hold.set()
    closer.join(10)
    runner.join(10)
    with pytest.raises(SchedulerClosed):
        sched.run(2.0, lambda: "late")


class HoldSecond(FakeSynth):
    """Holds the first request's second chunk until told, so other requests arrive meanwhile."""

    def __init__(self):
        super().__init__()
        self.release, self.holding = threading.Event(), threading.Event()

    def synthesize(self, ids, ref_s, speed=1.0, seed=0, lead_frames=None, continues=False):
        if seed == 1 and not self.holding.is_set():
            self.holding.set()
            self.release.wait(10)
        return super().synthesize(ids, ref_s, speed, seed, lead_frames, continues)


def test_a_new_requests_first_chunk_goes_before_another_requests_later_chunks(tmp_path):
    synth = HoldSecond()
    limits = Limits(workers=1, max_queue=2, first_chunk_phonemes=20)
    with serving(tmp_path, synth, limits=limits) as srv:
        a = RawStream(srv.port, json.dumps({"input": sentences(8), "response_format": "pcm"}).encode())
        try:
            assert a.status == 200 and a.chunk()
            assert synth.holding.wait(10)                       # A's chunk 2 holds the only worker
            box = {}
            asker = threading.Thread(target=lambda: box.update(b=post(srv.port, {"input": "Brief words here.",
                                                                                "response_format": "pcm"})))
            asker.start()
            while srv.service.scheduler.waiting() < 1:          # B's first chunk waits for the worker
                synth.release.wait(0.01)
            synth.release.set()
            asker.join(20)
            assert box["b"][0] == 200 and box["b"][2]
            while a.chunk():
                pass
        finally:
            synth.release.set()
            a.close()
    assert [c["seed"] for c in synth.calls][:4] == [0, 1, 0, 2]   # B's one chunk (seed 0) before A's third


def test_urgency_is_when_the_listener_runs_out_of_audio():
    import asyncio
    from kcc.speech.serve.service import Job
    loop = asyncio.new_event_loop()
    try:
        streamed, whole = Job(loop, 1e9, streamed=True), Job(loop, 1e9, streamed=False)
        assert streamed.urgency() == (0, streamed.arrived)          # no audio yet: first, by arrival
        for job in (streamed, whole):
            job.first_audio, job.audio_s = job.arrived + 0.2, 3.0
        assert streamed.urgency()[0] == 1 and streamed.urgency()[1] == pytest.approx(streamed.arrived + 3.2)
        assert whole.urgency() == (1, whole.arrived)                # nobody plays it before the end
        # a newcomer's first chunk goes before a playing listener's next, however soon it runs out
        newcomer = Job(loop, 1e9, streamed=True)
        streamed.audio_s = 0.0
        assert newcomer.urgency() < streamed.urgency()
    finally:
        loop.close()


class CountingCircuit:
    """A stage stand-in: records which thread asked for how many kernel threads."""

    def __init__(self, log):
        self.log = log
        self.graph = type("G", (), {"inputs": ["x"], "dims": {}})()
        self.plan = type("P", (), {"arena_bytes": 64, "alignment": 64})()

    def set_threads(self, n):
        self.log.append((threading.current_thread().name, n))
        return n

    def run(self, inputs, arena=None, with_checkpoints=False, dims=None):
        return type("R", (), {"outputs": {"y": inputs["x"]}, "checkpoints": {}})()


def test_the_thread_count_is_applied_in_every_synthesising_thread():
    """OpenMP keeps the thread count per calling thread: set_threads in the main thread alone
    left the server's worker threads at every core (measured: 2 in a worker after set_threads(1))."""
    import numpy as np
    from kcc.model.pipeline import THREADS, Synthesizer
    log = []
    synth = Synthesizer.from_circuits({"a": CountingCircuit(log)}, 16, "fake")
    synth.set_threads(1)
    log.clear()

    def work(want=None):
        if want is not None:
            THREADS.set(want)
        synth.run({"x": np.zeros(1, np.float32)})
        synth.run({"x": np.zeros(1, np.float32)})
    for name, want in (("w1", None), ("w2", 2), ("w3", lambda: 3)):
        t = threading.Thread(target=work, args=(want,), name=name)
        t.start()
        t.join()
    assert log == [("w1", 1), ("w2", 2), ("w3", 3)]              # once per thread and count, not per run


# -- the first chunk's leading silence ------------------------------------------------------------
def test_the_first_chunk_of_a_stream_has_its_leading_silence_capped(tmp_path):
    synth = FakeSynth()
    limits = Limits(workers=1, first_chunk_phonemes=20, first_lead_frames=3)
    with serving(tmp_path, synth, limits=limits) as srv:
        status, _, body = post(srv.port, {"input": sentences(4), "response_format": "pcm"})
    assert status == 200 and body
    leads = [c["lead_frames"] for c in synth.calls]
    assert len(leads) >= 2 and leads[0] == 3
    assert set(leads[1:]) == {None}                   # later chunks' onsets as predicted
    assert synth.calls[0]["continues"]                # the 20-phoneme first chunk is cut mid-sentence


# -- joins inside a sentence -----------------------------------------------------------------------
def _spoken(text, ramp, joins=True):
    synth = FakeSynth()
    chunks = plan(text, LetterG2P(), limit=200, first_limit=ramp)
    out = list(synthesize_chunks(chunks, synth, np.zeros((510, 256), np.float32), joins=joins))
    return chunks, synth.calls, out


def test_a_chunk_cut_inside_a_sentence_continues_and_a_sentence_end_does_not():
    chunks, calls, out = _spoken("Alpha bravo charlie, delta echo foxtrot. Golf hotel india juliet kilo.", [20, 20])
    assert [c.phonemes[-1] for c in chunks] == [",", ".", "."]
    assert [(c["lead_frames"], c["continues"]) for c in calls] == [(None, True), (None, False), (None, False)]
    for c, call in zip(out, calls):                   # the audio is the (continuing) durations' length
        free = FakeSynth.durations(call["ids"])
        assert np.array_equal(c.durations, continuing_durations(free) if call["continues"] else free)
        assert c.audio.size == int(c.durations.sum()) * SAMPLES_PER_FRAME


def test_a_last_chunk_without_final_punctuation_ends_as_an_utterance():
    chunks, calls, _ = _spoken("alpha bravo, charlie delta; echo foxtrot, golf hotel", [12])
    assert len(chunks) >= 2 and not any(ends_sentence(c) for c in chunks)
    assert [c["continues"] for c in calls] == [True] * (len(chunks) - 1) + [False]


def test_joins_false_speaks_every_chunk_as_an_utterance():
    _, calls, _ = _spoken("Alpha bravo charlie, delta echo foxtrot. Golf hotel.", [20, 20], joins=False)
    assert len(calls) >= 2 and not any(c["continues"] for c in calls)


@pytest.mark.parametrize("d, want", [
    ([12, 2, 3, 2, 17, 15], [12, 2, 3, 2, 4, CONTINUING_TRAIL_FRAMES]),   # final lengthening cut to 2 x median
    ([12, 2, 3, 2, 3, 1], [12, 2, 3, 2, 3, 1]),                           # short ends stay
    ([5, 1, 1, 9, 7], [5, 1, 1, 2, 2]),                                   # median 1 -> at most 2
    ([5, 9, 7], [5, 9, 2]),                                               # one token: nothing to compare it with
])
def test_continuing_durations(d, want):
    given = np.array(d, np.int32)
    got = continuing_durations(given)
    assert got.tolist() == want and got.dtype == np.int32
    assert given.tolist() == d                                            # a copy: the input is kept


@pytest.mark.parametrize("phonemes, end", [("ab.", True), ("ab?", True), ("ab!", True), ("ab…", True),
                                           ('ab."', True), ("ab.”)", True), ("ab,", False), ("ab", False),
                                           ("ab;", False), ("ab: ", False), ("ni↓xau↓.", True)])
def test_ends_sentence(phonemes, end):
    from types import SimpleNamespace
    assert ends_sentence(SimpleNamespace(phonemes=phonemes)) is end


@pytest.mark.parametrize("ms, frames", [(-1, None), (0, 1), (25, 1), (26, 2), (100, 4)])
def test_first_lead_ms_in_frames(ms, frames):
    from kcc.speech.serve.cli import lead_frames
    assert lead_frames(ms) == frames


def test_first_lead_ms_below_minus_one_is_refused():
    import argparse
    from kcc.speech.serve.cli import add_parsers, check_settings
    sub = argparse.ArgumentParser().add_subparsers()
    add_parsers(sub)
    args = sub.choices["serve"].parse_args(["--first-lead-ms", "-2"])
    with pytest.raises(ValueError, match="--first-lead-ms -2 is outside"):
        check_settings(args)


def test_lead_frames_caps_the_leading_token_and_nothing_else(small_ckpt_path):
    """Synthesizer.synthesize(lead_frames=k): the leading boundary token gets min(its predicted
    frames, k), every other duration is unchanged, the audio is that many frames long; None is
    the upstream path bit for bit; a cap that is not a whole number >= 1 is a SynthesisError.
    continues=True: the durations are continuing_durations of the free ones."""
    import numpy as np
    from kcc.model.pipeline import SynthesisError, Synthesizer
    from kcc.speech.audio.timestamps import SAMPLES_PER_FRAME
    synth = Synthesizer(small_ckpt_path, max_frames=300)
    style = (0.1 * np.random.default_rng(4).standard_normal((1, 256))).astype(np.float32)
    ids = [50, 83, 54, 156, 57, 135, 16, 65]
    free = synth.synthesize(ids, style)
    assert np.array_equal(synth.synthesize(ids, style, lead_frames=None).audio, free.audio)
    cap = max(1, int(free.durations[0]) - 2)
    capped = synth.synthesize(ids, style, lead_frames=cap)
    assert capped.durations[0] == cap < free.durations[0]
    assert np.array_equal(capped.durations[1:], free.durations[1:])
    assert capped.audio.size == int(capped.durations.sum()) * SAMPLES_PER_FRAME
    going_on = synth.synthesize(ids, style, continues=True)
    assert np.array_equal(going_on.durations, continuing_durations(free.durations))
    assert going_on.audio.size == int(going_on.durations.sum()) * SAMPLES_PER_FRAME
    with pytest.raises(SynthesisError, match="continues"):
        synth.synthesize(ids, style, continues=1)
    for bad in (0, -3, 2.5, "4", True):
        with pytest.raises(SynthesisError, match="lead_frames"):
            synth.synthesize(ids, style, lead_frames=bad)
