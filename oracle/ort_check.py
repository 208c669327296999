"""Prove an ONNX import: upstream KModel (torch) on the imported .pth vs onnxruntime on the ONNX.

Usage: python -m oracle.ort_check MODEL.onnx IMPORTED.pth VOICES.npz [--voice jf_alpha] [--json out.json]

Runs onnxruntime twice: on the int8 export as shipped, and on its float rewrite
(oracle.onnx_float: same graph, the importer's dequantised weights, no activation
quantisation), which torch on a correct import must match to float precision.

Both run the same phoneme ids with the same voice row. The export removed the random parts of
the sine generator (initial harmonic phases and additive noise), so torch runs with torch.rand /
torch.randn_like returning zeros. The ONNX quantises activations to uint8 on the fly, so its
waveform is not a sample-level reference: besides SNR of shared intermediates, compare
durations, voicing, the RMS envelope and log-STFT magnitudes.
"""
from __future__ import annotations

import argparse
import contextlib
import json

import numpy as np

# "koɲɲiʨiwa, ɡeŋki desɯ ka?" in Kokoro's Japanese phoneme set (misaki ja style).
PHRASE = "koɲɲiʨiwa, ɡeŋki desɯ ka?"
SAMPLE_RATE = 24000

# ONNX value -> the torch module whose forward output is the same tensor.
_SHARED = {
    "d_en": ("/encoder/bert_encoder/Add_output_0", "bert_encoder"),
    "F0_pred": ("/encoder/F0_proj/Conv_output_0", "predictor.F0_proj"),
    "N_pred": ("/encoder/N_proj/Conv_output_0", "predictor.N_proj"),
    "decoder_x": ("/decoder/decoder/decode.3/Div_4_output_0", "decoder.decode.3"),
    "ups0": ("/decoder/decoder/generator/ups.0/ConvTranspose_output_0", "decoder.generator.ups.0"),
    "har_source": ("/decoder/decoder/generator/m_source/l_tanh/Tanh_output_0", "decoder.generator.m_source.l_tanh"),
    "conv_post": ("/decoder/decoder/generator/conv_post/Conv_output_0", "decoder.generator.conv_post"),
}
_HAR_SPEC = "/decoder/decoder/generator/Concat_3_output_0"  # [1, 22, frames]: |STFT| and phase of the source
_DUR_SUM = "/encoder/predictor/ReduceSum_output_0"
_DUR_INT = "/encoder/Clip_output_0"


def phoneme_ids(text: str, vocab: dict) -> list[int]:
    missing = sorted({c for c in text if c not in vocab})
    if missing:
        raise ValueError(f"phonemes {missing} are not in the Kokoro vocab")
    return [vocab[c] for c in text]


def voice_row(voices_npz, voice: str, n_tokens: int) -> np.ndarray:
    pack = np.load(voices_npz)[voice]  # [510, 1, 256]; row = number of phonemes - 1
    return np.asarray(pack[n_tokens - 1], np.float32).reshape(1, 256)


def run_ort(model, ids: list[int], style: np.ndarray, speed: float = 1.0) -> dict[str, np.ndarray]:
    """Run the export (a path, or a ModelProto such as onnx_float.float_model's) exposing intermediates."""
    import onnx
    import onnxruntime as ort
    if not isinstance(model, onnx.ModelProto):
        model = onnx.load(str(model))
    wanted = [v for v, _ in _SHARED.values()] + [_DUR_SUM, _DUR_INT, _HAR_SPEC]
    have = {o.name for o in model.graph.output}
    for name in wanted:
        if name not in have:
            model.graph.output.append(onnx.helper.make_empty_tensor_value_info(name))
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep the values named
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    feeds = {"tokens": np.array([[0, *ids, 0]], np.int64), "style": style,
             "speed": np.array([speed], np.float32)}
    outs = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    res = {k: outs[v] for k, (v, _) in _SHARED.items()}
    res["dur_sum"], res["pred_dur"], res["audio"] = outs[_DUR_SUM], outs[_DUR_INT], outs["audio"]
    res["har_spec"] = outs[_HAR_SPEC]
    return {k: np.asarray(v).squeeze() for k, v in res.items()}


@contextlib.contextmanager
def deterministic_source():
    """torch.rand / torch.randn_like -> zeros, as the ONNX export has them (SineGen, SourceModule)."""
    import torch
    rand, randn_like = torch.rand, torch.randn_like
    torch.rand = lambda *a, **k: torch.zeros(*a, **{x: y for x, y in k.items() if x in ("device", "dtype")})
    torch.randn_like = lambda t, **k: torch.zeros_like(t)
    try:
        yield
    finally:
        torch.rand, torch.randn_like = rand, randn_like


def load_kmodel(pth):
    """Upstream KModel on `pth`, proving every saved tensor arrived."""
    from oracle.upstream import kmodel_from_path
    return kmodel_from_path(pth, "full")


def run_torch(kmodel, ids: list[int], style: np.ndarray, speed: float = 1.0,
              har_spec: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """KModel.forward_with_tokens with intermediates. `har_spec` ([22, frames], e.g. the
    export's own) replaces the generator's STFT of the sine source, isolating the generator
    weights from the two STFT implementations (phase = atan2 of tiny bins is ill-conditioned)."""
    import torch
    got: dict[str, np.ndarray] = {}
    hooks = []
    stft = kmodel.decoder.generator.stft
    if har_spec is not None:
        h = torch.from_numpy(np.asarray(har_spec, np.float32))[None]
        stft.transform = lambda x: (h[:, :h.shape[1] // 2], h[:, h.shape[1] // 2:])
    for key, (_, path) in _SHARED.items():
        mod = kmodel.get_submodule(path)
        hooks.append(mod.register_forward_hook(
            lambda m, i, o, key=key: got.__setitem__(key, o.detach().numpy().squeeze())))
    proj = kmodel.predictor.duration_proj
    hooks.append(proj.register_forward_hook(
        lambda m, i, o: got.__setitem__("dur_sum", torch.sigmoid(o).sum(-1).detach().numpy().squeeze())))
    try:
        with torch.no_grad(), deterministic_source():
            audio, pred_dur = kmodel.forward_with_tokens(
                torch.LongTensor([[0, *ids, 0]]), torch.from_numpy(style), speed)
    finally:
        for hk in hooks:
            hk.remove()
        stft.__dict__.pop("transform", None)
    got["audio"], got["pred_dur"] = audio.numpy().squeeze(), pred_dur.numpy().squeeze()
    return got


def istft_gain(o: dict) -> float:
    """Least-squares gain of the export's own iSTFT over torch.istft on the export's conv_post output."""
    import torch
    cp = torch.from_numpy(np.asarray(o["conv_post"], np.float32)[None])
    half = cp.shape[1] // 2
    spec, phase = torch.exp(cp[:, :half]), torch.sin(cp[:, half:])
    n_fft = 2 * (half - 1)
    ref = torch.istft(spec * torch.exp(phase * 1j), n_fft, n_fft // 4, n_fft,
                      window=torch.hann_window(n_fft, periodic=True)).numpy().squeeze().astype(np.float64)
    a = np.asarray(o["audio"], np.float64)[:len(ref)]
    return float(a @ ref[:len(a)] / (ref[:len(a)] @ ref[:len(a)]))


def snr_db(ref: np.ndarray, x: np.ndarray) -> float:
    ref, x = np.asarray(ref, np.float64), np.asarray(x, np.float64)
    err = np.sum((x - ref) ** 2)
    return float("inf") if err == 0 else float(10 * np.log10(np.sum(ref ** 2) / err))


def _frames(a: np.ndarray, n: int, hop: int) -> np.ndarray:
    count = 1 + max(0, (len(a) - n) // hop)
    return np.stack([a[i * hop:i * hop + n] for i in range(count)])


def rms_envelope(a: np.ndarray, n: int = 600, hop: int = 300) -> np.ndarray:
    return np.sqrt(np.mean(_frames(a.astype(np.float64), n, hop) ** 2, axis=1))


def log_stft(a: np.ndarray, n: int = 1024, hop: int = 256) -> np.ndarray:
    fr = _frames(a.astype(np.float64), n, hop) * np.hanning(n)
    return np.log(np.abs(np.fft.rfft(fr, axis=1)) + 1e-5)


def corr(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(np.corrcoef(a, b)[0, 1])


def compare(t: dict, o: dict) -> dict:
    """Metrics of torch (`t`, FP32 on the imported weights) against onnxruntime (`o`, int8)."""
    m: dict = {"tokens": int(t["pred_dur"].size)}
    m["duration_exact_fraction"] = float(np.mean(t["pred_dur"] == o["pred_dur"]))
    m["duration_max_abs_frames"] = int(np.max(np.abs(t["pred_dur"].astype(int) - o["pred_dur"].astype(int))))
    m["frames_torch"], m["frames_ort"] = int(t["pred_dur"].sum()), int(o["pred_dur"].sum())
    m["snr_db"] = {"dur_sum": snr_db(t["dur_sum"], o["dur_sum"]), "d_en": snr_db(t["d_en"], o["d_en"])}
    same_len = m["frames_torch"] == m["frames_ort"]
    if same_len:
        for k in ("F0_pred", "N_pred", "decoder_x", "ups0", "har_source", "conv_post", "audio"):
            m["snr_db"][k] = snr_db(t[k], o[k])
        vt, vo = t["F0_pred"] > 10, o["F0_pred"] > 10  # SineGen's voiced threshold
        m["voicing_agreement"] = float(np.mean(vt == vo))
        m["f0_corr_voiced"] = corr(t["F0_pred"][vt & vo], o["F0_pred"][vt & vo])
    if "istft_gain" in o:
        m["ort_istft_gain"] = o["istft_gain"]
        m["snr_db"]["audio_gain_matched"] = snr_db(t["audio"], o["audio"] / o["istft_gain"]) if same_len else None
    ta, oa = t["audio"], o["audio"]
    n = min(len(ta), len(oa))
    et, eo = rms_envelope(ta[:n]), rms_envelope(oa[:n])
    m["samples_torch"], m["samples_ort"] = int(len(ta)), int(len(oa))
    m["rms_torch"], m["rms_ort"] = float(np.sqrt(np.mean(ta ** 2))), float(np.sqrt(np.mean(oa ** 2)))
    m["rms_envelope_corr"] = corr(et, eo)
    m["log_stft_corr"] = corr(log_stft(ta[:n]), log_stft(oa[:n]))
    m["voiced_fraction_torch"] = float(np.mean(t["F0_pred"] > 10))
    m["voiced_fraction_ort"] = float(np.mean(o["F0_pred"] > 10))
    loud = lambda e: float(np.mean(e > 10 ** (-40 / 20) * e.max()))  # within 40 dB of the peak frame
    m["active_fraction_torch"], m["active_fraction_ort"] = loud(et), loud(eo)
    m["finite_torch"] = bool(np.all(np.isfinite(ta)))
    return m


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("onnx")
    ap.add_argument("pth")
    ap.add_argument("voices")
    ap.add_argument("--vocab", help="vocab.json (default: the config's vocab)")
    ap.add_argument("--voice", default="jf_alpha")
    ap.add_argument("--text", default=PHRASE, help="phonemes")
    ap.add_argument("--json")
    ap.add_argument("--wav", help="write torch and ORT audio as PREFIX.torch.wav / PREFIX.ort.wav")
    args = ap.parse_args(argv)
    from oracle.upstream import load_config
    vocab = json.load(open(args.vocab))["vocab"] if args.vocab else load_config("full")["vocab"]
    ids = phoneme_ids(args.text, vocab)
    style = voice_row(args.voices, args.voice, len(ids))
    from oracle.onnx_float import float_model
    kmodel = load_kmodel(args.pth)
    t = run_torch(kmodel, ids, style)
    m = {}
    for tag, model in (("int8", args.onnx), ("float_rewrite", float_model(args.onnx))):
        o = run_ort(model, ids, style)
        o["istft_gain"] = istft_gain(o)
        m[tag] = compare(t, o)
    # Same float rewrite, torch fed the export's STFT of the source: isolates the generator weights.
    m["float_rewrite_same_source"] = compare(run_torch(kmodel, ids, style, har_spec=o["har_spec"]), o)
    print(json.dumps(m, indent=1))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(m, fh, indent=1)
    if args.wav:
        import wave
        for tag, a in (("torch", t["audio"]), ("ort", o["audio"])):
            with wave.open(f"{args.wav}.{tag}.wav", "wb") as w:
                w.setnchannels(1), w.setsampwidth(2), w.setframerate(SAMPLE_RATE)
                w.writeframes((np.clip(a, -1, 1) * 32767).astype(np.int16).tobytes())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
