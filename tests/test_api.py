"""The public Python API (kcc.api): kcc.Kokoro and kcc.KPipeline on the real Kokoro-82M.

The model is loaded once for the module (the cached artifact; compiled on a first run). Upstream
kokoro's README examples run here with only their import line changed (and the voice, while the
catalog lacks af_heart)."""
from __future__ import annotations

import asyncio
import contextlib
import io
import subprocess
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest

import kcc
from kcc.speech.g2p.g2p import G2P, espeak_available
from kcc.speech.engine import plan, say
from kcc.speech.request import chunking

ENGLISH = "Hello there. This is a short test of the public interface."


@pytest.fixture(scope="module")
def tts():
    if not espeak_available()[0]:
        pytest.skip(f"espeak G2P unavailable: {espeak_available()[1]}")
    try:
        model = kcc.Kokoro(log=None)
    except Exception as exc:                      # no network for the wheels, no compiler, ...
        pytest.skip(f"the real model is not available here: {type(exc).__name__}: {exc}")
    yield model
    model.close()
    from kcc import api                   # the README example's KPipeline made a shared Kokoro: let go of
    for shared in api._DEFAULT_MODELS.values():   # its mapping too, so later test files in this process
        shared.close()                    # (tests/test_weight_release.py counts resident weight pages)
    api._DEFAULT_MODELS.clear()           # see only their own
    import gc
    gc.collect()


@pytest.fixture(scope="module")
def voice(tts):
    """af_heart, the voice upstream's README names, once the catalog has it; else the first voice."""
    names = tts.get_voices()
    return "af_heart" if "af_heart" in names else names[0]


def _rms(a: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(a, dtype=np.float64))))


# -- the package surface ---------------------------------------------------------------------------
def test_import_kcc_stays_light():
    """`import kcc` loads neither the API nor numpy: every `kcc` command imports it first."""
    code = "import sys, kcc; print(sorted(m for m in ('kcc.api', 'numpy', 'kcc.speech', 'kcc.compiler') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1])
    assert out.stdout.strip() == "[]"


def test_every_export_resolves_and_errors_are_exceptions():
    for name in kcc.__all__:
        value = getattr(kcc, name)
        assert value is not None
        if name.endswith("Error") or name == "NothingToSay":
            assert issubclass(value, Exception), name
    assert kcc.Kokoro.__module__ == "kcc.api" and kcc.KPipeline.__module__ == "kcc.api"
    assert issubclass(kcc.NothingToSay, kcc.SayError) and issubclass(kcc.KPipelineError, ValueError)
    with pytest.raises(AttributeError):
        kcc.NoSuchThing          # noqa: B018
    assert (Path(kcc.__file__).parent / "py.typed").is_file()


# -- options refused before any model is loaded ---------------------------------------------------
@pytest.mark.parametrize("kw, error", [
    ({"max_frames": 10}, "ModelOptionsError"), ({"max_frames": 10**6}, "ModelOptionsError"),
    ({"max_frames": True}, "ModelOptionsError"), ({"max_frames": 100.5}, "ModelOptionsError"),
    ({"precision": "fp16"}, "PrecisionError"), ({"precision": "FP32 "}, "PrecisionError"),
    ({"threads": 0}, "ThreadsError"), ({"threads": -2}, "ThreadsError"), ({"threads": 10**6}, "ThreadsError"),
])
def test_bad_model_options_are_refused_by_name_before_loading(monkeypatch, kw, error):
    from kcc.model import model_store
    monkeypatch.setattr(model_store, "load_model", lambda *a, **k: pytest.fail("loaded the model"))
    with pytest.raises(getattr(kcc, error)):
        kcc.Kokoro(log=None, **kw)


# -- Kokoro -----------------------------------------------------------------------------------------
def test_create_returns_float32_audio_at_24k(tts, voice):
    audio, rate = tts.create(ENGLISH, voice=voice)
    assert rate == 24000 and audio.dtype == np.float32 and audio.ndim == 1
    assert 2.0 < audio.size / rate < 8.0                    # 11 words
    assert _rms(audio) > 0.02 and np.isfinite(audio).all() and np.abs(audio).max() <= 1.5


def test_stream_yields_the_plans_chunks_with_timed_words(tts, voice):
    text = "First, a short opening. " + "Then a much longer sentence follows it, with several clauses in a row. " * 3
    chunks = list(tts.stream(text, voice=voice))
    expected = plan(text, G2P("auto"), speed=1.0, max_frames=tts.synthesizer.max_frames, **chunking(stream=True))
    assert [c.phonemes for c in chunks] == [e.phonemes for e in expected] and len(chunks) >= 2
    assert [c.text for c in chunks] == [e.text for e in expected]
    offset = 0
    for i, c in enumerate(chunks):
        assert c.index == i and c.sample_rate == 24000 and c.audio.dtype == np.float32
        assert c.offset_s == pytest.approx(offset / 24000, abs=1e-6)
        assert c.words[0].start_s == pytest.approx(c.offset_s, abs=1e-5)
        assert c.words[-1].end_s == pytest.approx(c.offset_s + c.audio.size / 24000, abs=1e-5)
        starts = [w.start_s for w in c.words]
        assert starts == sorted(starts) and all(w.end_s >= w.start_s for w in c.words)
        assert int(c.durations.sum()) * 600 == c.audio.size
        offset += c.audio.size
    whole, _ = tts.create(text, voice=voice)              # a whole file: `kcc say`'s chunks and samples
    np.testing.assert_array_equal(whole, say(text, tts.synthesizer, voice, g2p=G2P("auto")).audio)
    assert whole.size != sum(c.audio.size for c in chunks)  # the stream started with a short chunk


def test_astream_matches_stream_and_leaves_the_loop_free(tts, voice):
    text = "The event loop keeps running while this is spoken."
    ticks = []

    async def main():
        async def ticker():
            while True:
                ticks.append(1)
                await asyncio.sleep(0.01)
        t = asyncio.create_task(ticker())
        got = [c async for c in tts.astream(text, voice=voice)]
        pairs = [p async for p in tts.create_stream(text, voice=voice)]
        t.cancel()
        return got, pairs
    got, pairs = asyncio.run(main())
    sync = list(tts.stream(text, voice=voice))
    assert [c.phonemes for c in got] == [c.phonemes for c in sync]
    np.testing.assert_array_equal(np.concatenate([c.audio for c in got]), np.concatenate([c.audio for c in sync]))
    assert all(rate == 24000 and a.dtype == np.float32 for a, rate in pairs)
    np.testing.assert_array_equal(np.concatenate([a for a, _ in pairs]), np.concatenate([c.audio for c in sync]))
    assert len(ticks) > 20           # seconds of synthesis: a blocked loop would have ticked once


def test_one_kokoro_shared_by_threads_speaks_as_it_does_alone(tts, voice):
    texts = ["One thread speaks this.", "Another thread speaks that.", "A third one says something else."]
    alone = [tts.create(t, voice=voice)[0] for t in texts]
    together: dict[int, np.ndarray] = {}
    threads = [threading.Thread(target=lambda i=i: together.__setitem__(i, tts.create(texts[i], voice=voice)[0]))
               for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    for i, a in enumerate(alone):
        np.testing.assert_array_equal(together[i], a)


@pytest.mark.parametrize("speed", [0, -1, 0.2, 4.5, float("nan"), float("inf"), "fast", True, 10 ** 400])
def test_bad_speed_is_a_say_error(tts, speed):
    with pytest.raises(kcc.SayError, match="speed"):
        tts.create("Hello.", speed=speed)


@pytest.mark.parametrize("text", ["", "   ", "\n\n", "\t \r\n", "\u3000"])
def test_nothing_to_say_is_named(tts, text):
    with pytest.raises(kcc.NothingToSay):
        tts.create(text)


@pytest.mark.parametrize("voice", ["no_such_voice", "/nonexistent/voice.pt", np.zeros((3, 3), np.float32),
                                   np.full((510, 1, 256), np.nan, np.float32)])
def test_bad_voice_is_a_voice_error(tts, voice):
    with pytest.raises(kcc.VoiceError):
        tts.create("Hello.", voice=voice)


@pytest.mark.parametrize("pack, why", [
    (np.zeros((510, 1, 256), np.float32), "nearly\\) constant"),
    (np.full((510, 1, 256), 0.5, np.float32), "nearly\\) constant"),
    (np.full((510, 1, 256), 7.0, np.float32), "up to 7"),
])
def test_an_array_voice_is_held_to_a_voice_files_envelope(tts, voice, pack, why):
    """An array given as the voice passes the same plausibility check as a pack read from a file:
    an all-zero or constant pack spoke at 4-8x full scale before."""
    with pytest.raises(kcc.VoiceError, match=why):
        tts.create("Hello.", voice=pack)
    samples, _ = tts.create("Hello.", voice=tts.get_voice_style(voice))   # a real pack still speaks
    assert 0 < np.abs(samples).max() <= 1.0


@pytest.mark.parametrize("lang", ["xx", "klingon", "en_US_x", "", 5])
def test_bad_language_is_a_g2p_error(tts, lang):
    with pytest.raises(kcc.G2PError, match="not supported"):
        tts.create("Hello.", lang=lang)


@pytest.mark.parametrize("text", [None, 42, ["a", "b"]])
def test_text_must_be_a_string(tts, text):
    with pytest.raises(kcc.SayError, match="text must be a string"):
        tts.create(text)


def test_a_stream_raises_before_its_first_chunk_is_asked_for(tts):
    """A bad request fails the call itself, before any synthesis (nothing to iterate)."""
    with pytest.raises(kcc.VoiceError):
        tts.stream("Hello.", voice="no_such_voice")


def test_closed_kokoro_refuses(tmp_path):
    from kcc.model import loader
    with contextlib.ExitStack() as stack:
        fake = types.SimpleNamespace(max_frames=2048)
        stack.enter_context(pytest.MonkeyPatch.context()).setattr(loader, "load", lambda *a, **k: fake)
        k = kcc.Kokoro()
        k.close()
        with pytest.raises(kcc.SayError, match="closed"):
            k.create("Hello.")

        async def drain():
            return [c async for c in k.astream("Hello.")]
        with pytest.raises(kcc.SayError, match="closed"):
            asyncio.run(drain())


# -- KPipeline ------------------------------------------------------------------------------------
README_BASIC = '''\
from kcc import KPipeline
from IPython.display import display, Audio
import soundfile as sf
import torch
pipeline = KPipeline(lang_code='a')
text = \'\'\'
[Kokoro](/kˈOkəɹO/) is an open-weight TTS model with 82 million parameters. Despite its lightweight architecture, it delivers comparable quality to larger models while being significantly faster and more cost-efficient. With Apache-licensed weights, [Kokoro](/kˈOkəɹO/) can be deployed anywhere from production environments to personal projects.
\'\'\'
generator = pipeline(text, voice='af_heart')
for i, (gs, ps, audio) in enumerate(generator):
    print(i, gs, ps)
    display(Audio(data=audio, rate=24000, autoplay=i==0))
    sf.write(f'{i}.wav', audio, 24000)
'''


class _IPythonDisplay:
    """IPython.display's display / Audio where IPython is not installed: Audio checks its data
    as IPython's does for numpy input (one channel of finite floats) and keeps it."""
    shown: list = []

    @staticmethod
    def display(obj) -> None:
        _IPythonDisplay.shown.append(obj)

    class Audio:
        def __init__(self, data=None, rate=None, autoplay=False):
            data = np.asarray(data)
            assert data.ndim == 1 and data.dtype.kind == "f" and np.isfinite(data).all() and rate == 24000
            self.data, self.rate, self.autoplay = data, rate, autoplay


@pytest.fixture
def ipython(monkeypatch):
    try:
        import IPython.display  # noqa: F401
        return
    except ImportError:
        pass
    pkg, mod = types.ModuleType("IPython"), types.ModuleType("IPython.display")
    mod.display, mod.Audio = _IPythonDisplay.display, _IPythonDisplay.Audio
    pkg.display = mod
    monkeypatch.setitem(sys.modules, "IPython", pkg)
    monkeypatch.setitem(sys.modules, "IPython.display", mod)
    _IPythonDisplay.shown.clear()


def test_upstream_readme_example_runs_with_the_import_changed(tts, voice, ipython, tmp_path, monkeypatch):
    sf = pytest.importorskip("soundfile")
    pytest.importorskip("torch")
    monkeypatch.chdir(tmp_path)
    code = README_BASIC.replace("voice='af_heart'", f"voice={voice!r}")
    assert code.count("from kcc import KPipeline") == 1 and "kokoro import" not in code
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    lines = printed.getvalue().splitlines()
    text = code.split("'''")[1]
    g2p_only = [(r.graphemes, r.phonemes) for r in kcc.KPipeline(lang_code="a", model=False)(text)]
    assert lines == [f"{i} {gs} {ps}" for i, (gs, ps) in enumerate(g2p_only)] and len(lines) >= 1
    assert all("kˈOkəɹO" in ps for _, ps in g2p_only[:1])           # the inline pronunciation holds
    expected = plan(text.strip(), G2P("en-us"), first_limit=None)
    assert [ps for _, ps in g2p_only] == [e.phonemes for e in expected]
    total = 0.0
    for i in range(len(lines)):
        audio, rate = sf.read(tmp_path / f"{i}.wav", dtype="float32")
        assert rate == 24000 and audio.ndim == 1
        assert 1.0 < audio.size / rate < 40.0 and _rms(audio) > 0.02
        total += audio.size / rate
    assert 10.0 < total < 40.0                                     # 50 words
    assert not (tmp_path / f"{len(lines)}.wav").exists()


def test_kpipeline_results_unpack_and_index_like_upstreams(tts, voice):
    pipeline = kcc.KPipeline(lang_code="a", model=tts)
    results = list(pipeline("One line.\n\nAnother line.", voice=voice, speed=1.2, split_pattern=r"\n"))
    assert [r.text_index for r in results] == [0, 2]       # the blank line between is a segment of its own
    for r in results:
        gs, ps, audio = r
        assert (gs, ps) == (r.graphemes, r.phonemes) and audio is r.audio and r[2] is r.audio and len(r) == 3
        assert isinstance(audio, np.ndarray) and audio.dtype == np.float32 and _rms(audio) > 0.02
        assert r.pred_dur is not None and int(r.pred_dur.sum()) * 600 == audio.size
        assert r.tokens and r.tokens[0].text == gs.split()[0]
    slower = list(pipeline("One line.", voice=voice, speed=lambda n: 0.8))
    assert slower[0].audio.size > results[0].audio.size


def test_kpipeline_without_a_model_gives_phonemes_only():
    pipeline = kcc.KPipeline(lang_code="en-us", model=False)
    results = list(pipeline(["Hello world.", "  ", "Goodbye."]))
    assert [(r.graphemes, r.text_index, r.audio) for r in results] == [("Hello world.", 0, None), ("Goodbye.", 2, None)]
    assert results[0].phonemes == plan("Hello world.", G2P("en-us"))[0].phonemes


@pytest.mark.parametrize("kw", [{"device": "cuda"}, {"device": "mps"}, {"trf": True},
                                {"repo_id": "someone/other-model"}, {"en_callable": str.upper}, {"model": "yes"}])
def test_kpipeline_refuses_what_kcc_cannot_honour(kw):
    with pytest.raises(kcc.KPipelineError):
        kcc.KPipeline(lang_code="a", **{"model": False, **kw})


@pytest.mark.parametrize("code", ["q", "xx", "english", ""])
def test_kpipeline_unknown_language_is_a_g2p_error(code):
    with pytest.raises(kcc.G2PError):
        kcc.KPipeline(lang_code=code, model=False)


def test_kpipeline_needs_a_voice_and_a_sane_speed(tts, voice):
    pipeline = kcc.KPipeline(lang_code="a", model=tts)
    with pytest.raises(kcc.KPipelineError, match="Specify a voice"):
        pipeline("Hello.")
    for speed in (0, 9, float("nan")):
        with pytest.raises(kcc.SayError, match="speed"):
            pipeline("Hello.", voice=voice, speed=speed)
