"""Upstream kokoro 0.9.4's KPipeline programs on kcc.KPipeline: Result fields, MTokens with
timestamps, output.audio / output.pred_dur answering .numpy() / .cpu() as torch tensors do
(with and without torch importable), load_voice / load_single_voice, language codes and
aliases, model=False. Written here in the shape of upstream's README and its usage."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

import kcc
from kcc.api import ALIASES, LANG_CODES, MToken
from kcc.speech.g2p.g2p import espeak_available
from kcc.speech.tensor_like import TensorLike
from kcc.speech.voices import load_voice


@pytest.fixture(scope="module")
def tts():
    if not espeak_available()[0]:
        pytest.skip(f"espeak G2P unavailable: {espeak_available()[1]}")
    model = kcc.Kokoro(log=None)
    yield model
    model.close()


@pytest.fixture(scope="module")
def results(tts):
    pipeline = kcc.KPipeline(lang_code="a", model=tts)
    return list(pipeline("The quick brown fox jumps over the lazy dog.\nHello, world!", voice="af_heart"))


def test_result_fields_as_upstream(results):
    assert [r.text_index for r in results] == [0, 1]
    r = results[0]
    assert r.graphemes == "The quick brown fox jumps over the lazy dog."
    assert r.output.audio is r.audio and r.output.pred_dur is r.pred_dur
    assert isinstance(r.output, kcc.KPipeline.Output)
    assert r.audio.dtype == np.float32 and r.audio.ndim == 1
    assert r.pred_dur.dtype == np.int64 and int(r.pred_dur.sum()) * 600 == r.audio.size
    assert r.pred_dur.size == len(kcc.tokenizer.Tokenizer().tokenize(r.phonemes)) + 2   # <bos> ... <eos>


def test_tokens_are_mtokens_with_timestamps(results):
    tokens = results[0].tokens
    assert all(isinstance(t, MToken) for t in tokens)
    assert [t.text for t in tokens] == ["The", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "."]
    assert [t.whitespace for t in tokens] == [" "] * 8 + ["", ""]
    assert tokens[1].phonemes == "kwˈɪk" and all(t.tag == "" for t in tokens)
    starts = [t.start_ts for t in tokens]
    assert starts == sorted(starts) and all(t.end_ts >= t.start_ts for t in tokens)
    assert 0.0 <= starts[0] < 0.5 and tokens[-2].end_ts <= results[0].audio.size / 24000 + 1e-6
    second = results[1].tokens                               # each Result's timestamps start at its own audio
    assert second[0].text == "Hello" and second[0].start_ts < 0.5


def test_audio_answers_upstreams_tensor_calls(results):
    audio = results[0].audio
    assert type(audio.numpy()) is np.ndarray and np.shares_memory(audio.numpy(), audio)
    np.testing.assert_array_equal(audio.cpu().numpy(), audio.numpy())
    np.testing.assert_array_equal(audio.detach().cpu().numpy(), audio)
    assert audio.to("cpu") is audio and audio.device == "cpu"
    assert results[0].output.pred_dur.cpu().numpy().sum() * 600 == audio.size
    assert results[0].pred_dur[0].item() >= 1


def test_tensor_calls_work_without_torch():
    """In a process where torch cannot be imported, the same calls answer."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from kcc.speech.tensor_like import TensorLike\nimport numpy as np\n"
            "a = TensorLike.of(np.arange(4, dtype=np.float32))\n"
            "print(type(a.cpu().numpy()).__name__, a.detach().numpy().tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["ndarray", "[0.0,", "1.0,", "2.0,", "3.0]"]


def test_torch_takes_the_audio_where_torch_is_installed(results):
    torch = pytest.importorskip("torch")
    t = torch.from_numpy(results[0].audio.numpy())
    assert t.dtype == torch.float32 and t.numel() == results[0].audio.size


def test_load_voice_and_load_single_voice():
    pipeline = kcc.KPipeline(lang_code="a", model=False)
    one = pipeline.load_single_voice("af_bella")
    assert isinstance(one, TensorLike) and one.shape == (510, 1, 256)
    np.testing.assert_array_equal(one, load_voice("af_bella"))
    mean = pipeline.load_voice("af_bella,af_sky")
    np.testing.assert_allclose(mean, (load_voice("af_bella") + load_voice("af_sky")) / 2, rtol=1e-6, atol=1e-7)
    assert pipeline.load_voice("af_bella;af_sky", delimiter=";").shape == (510, 1, 256)
    assert pipeline.load_voice("af_bella,af_sky") is mean          # cached, as upstream's self.voices
    assert "af_bella" in pipeline.voices
    with pytest.raises(kcc.VoiceError):
        pipeline.load_single_voice("zz_nobody")


def test_a_voice_tensor_from_load_voice_speaks(tts):
    pipeline = kcc.KPipeline(lang_code="a", model=tts)
    pack = pipeline.load_voice("af_heart")
    by_pack = next(iter(pipeline("Hello.", voice=pack))).audio
    by_name = next(iter(pipeline("Hello.", voice="af_heart"))).audio
    np.testing.assert_array_equal(by_pack, by_name)


def test_language_codes_and_aliases_as_upstream():
    assert set(LANG_CODES) == {"a", "b", "e", "f", "h", "i", "p", "j", "z"}
    for alias, code in ALIASES.items():
        assert kcc.KPipeline(lang_code=alias, model=False).language == kcc.KPipeline(lang_code=code,
                                                                                       model=False).language


def test_model_false_gives_graphemes_and_phonemes_only():
    results = list(kcc.KPipeline(lang_code="b", model=False)("Hello there."))
    assert len(results) == 1 and results[0].audio is None and results[0].pred_dur is None
    assert results[0].phonemes == "həlˈQ ðˈɛː."                 # misaki's British phonemes
    assert [(t.text, t.whitespace, t.phonemes, t.start_ts) for t in results[0].tokens] == [
        ("Hello", " ", "həlˈQ", None), ("there", "", "ðˈɛː", None), (".", "", ".", None)]


def test_readme_advanced_usage_shape_a_torch_voice_tensor(tts, tmp_path):
    """Upstream's README loads a voice with torch.load(..., weights_only=True) and passes the tensor."""
    torch = pytest.importorskip("torch")
    torch.save(torch.from_numpy(load_voice("af_heart")), tmp_path / "voice.pt")
    voice_tensor = torch.load(tmp_path / "voice.pt", weights_only=True)
    pipeline = kcc.KPipeline(lang_code="a", model=tts)
    for gs, ps, audio in pipeline("Hello there.\nGoodbye.", voice=voice_tensor, speed=1, split_pattern=r"\n+"):
        by_name = next(iter(pipeline(gs, voice="af_heart"))).audio
        np.testing.assert_array_equal(audio.cpu().numpy(), by_name.numpy())
    assert pipeline.load_voice(voice_tensor).shape == (510, 1, 256)
