"""kcc/model is the one source of the shipped circuits: the committed JSON is exactly what it
builds, --check catches drift, and its Kokoro constants are upstream's."""
from __future__ import annotations

import json

import pytest

from kcc.circuits import CIRCUIT_DIR, shipped_circuits
from kcc.model import kokoro
from kcc.model.build_circuits import CIRCUITS, built_texts, main
from kcc.model.circuit import Circuit, ModelBuildError
from oracle.upstream import kokoro_modules, load_config


def test_every_shipped_circuit_is_built_and_committed_byte_for_byte():
    assert sorted(shipped_circuits()) == sorted(CIRCUITS)      # no hand-written stragglers
    texts = built_texts()
    for name, text in texts.items():
        committed = (CIRCUIT_DIR / f"{name}.json").read_text(encoding="utf-8")
        assert committed == text, f"{name}.json differs from kcc/model (run python -m kcc.model.build_circuits)"


def test_generator_resblocks_come_from_one_function():
    """The 8 AdaINResBlock1 (6 resblocks + 2 noise_res) are 15 ops each from adain_resblock1:
    3 passes x (adain, conv, adain, conv, add), dilations 1 / 3 / 5 with 'same' padding."""
    doc = json.loads(built_texts()["kokoro_generator"])
    ops = [op for block in doc["blocks"] for op in block["ops"]]
    for name, k in [("nr0", 7), ("nr1", 11)] + [(f"rb{j}", k) for j, k in enumerate((3, 7, 11) * 2)]:
        mine = [op for op in ops if op["out"].startswith(f"{name}_")]
        assert [op["op"] for op in mine] == ["adain", "conv1d", "adain", "conv1d", "add"] * 3, name
        convs = [op["attrs"] for op in mine if op["op"] == "conv1d"]
        assert convs == [{"padding": d * (k - 1) // 2, "dilation": d} if i % 2 == 0 else {"padding": (k - 1) // 2}
                         for d in (1, 3, 5) for i in range(2)], name
        assert mine[-1]["out"] == f"{name}_x2"


def test_check_names_a_stale_or_missing_circuit_and_write_fixes_it(tmp_path, capsys):
    assert main(["--dir", str(tmp_path)]) == 0                 # writes all eight
    assert sorted(p.stem for p in tmp_path.glob("*.json")) == sorted(CIRCUITS)
    assert main(["--check", "--dir", str(tmp_path)]) == 0
    stale = tmp_path / "kokoro_decoder.json"
    stale.write_text(stale.read_text().replace('"padding": 1', '"padding": 2', 1))
    (tmp_path / "kokoro_embedding.json").unlink()
    capsys.readouterr()
    assert main(["--check", "--dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "kokoro_decoder.json: differs" in err and "kokoro_embedding.json: differs" in err
    assert "kokoro_generator" not in err
    assert main(["--dir", str(tmp_path)]) == 0
    assert "wrote" in capsys.readouterr().out
    assert main(["--check", "--dir", str(tmp_path)]) == 0


def test_a_weight_declared_twice_is_refused():
    c = Circuit("x", "test", {"T": (1, 2)})
    c.weight("w", "a.weight")
    with pytest.raises(ModelBuildError, match="weight 'w' declared twice"):
        c.weight("w", "b.weight")


@pytest.mark.parametrize("config", ["small", "full"])
def test_kokoro_constants_match_the_upstream_config(config):
    cfg = load_config(config)
    ist = cfg["istftnet"]
    assert tuple(ist["upsample_rates"]) == kokoro.UPSAMPLE_RATES
    assert tuple(ist["upsample_kernel_sizes"]) == kokoro.UPSAMPLE_KERNELS
    assert tuple(ist["resblock_kernel_sizes"]) == kokoro.RESBLOCK_KERNELS
    assert all(tuple(d) == kokoro.RESBLOCK_DILATIONS for d in ist["resblock_dilation_sizes"])
    assert (ist["gen_istft_n_fft"], ist["gen_istft_hop_size"]) == (kokoro.STFT_N_FFT, kokoro.STFT_HOP)
    assert ist["upsample_initial_channel"] == kokoro.GEN_CHANNELS
    assert (cfg["hidden_dim"], cfg["style_dim"]) == (kokoro.HIDDEN, kokoro.STYLE_DIM)
    bert = cfg["plbert"]
    assert bert["max_position_embeddings"] == kokoro.CONTEXT_TOKENS == kokoro.MAX_PHONEMES + 2
    assert bert["num_hidden_layers"] == kokoro.ALBERT_LAYERS
    assert kokoro.ALBERT_HEADS[bert["hidden_size"]] == bert["num_attention_heads"]


def test_kokoro_source_constants_match_the_upstream_generator():
    """Generator hard-codes its source module (24 kHz, 8 harmonics, voiced above 10 Hz); read
    them off a constructed upstream module, and the 600 samples per alignment frame."""
    _, _, istftnet = kokoro_modules()
    ist = load_config("small")["istftnet"]
    gen = istftnet.Generator(style_dim=kokoro.STYLE_DIM, **ist)
    sine = gen.m_source.l_sin_gen
    assert sine.sampling_rate == kokoro.SAMPLE_RATE == 24000
    assert sine.harmonic_num == kokoro.HARMONICS and sine.upsample_scale == kokoro.SOURCE_UPSAMPLE == 300
    assert (sine.sine_amp, sine.noise_std, sine.voiced_threshold) == (
        kokoro.SINE_AMP, kokoro.NOISE_STD, kokoro.VOICED_THRESHOLD)
    assert gen.f0_upsamp.scale_factor == kokoro.SOURCE_UPSAMPLE
    assert kokoro.SAMPLES_PER_FRAME == kokoro.F0_FRAMES_PER_FRAME * sine.upsample_scale == 600
    # the strides and paddings the builder derives are the upstream modules' own
    ops = {op["out"]: op for block in json.loads(built_texts()["kokoro_generator"])["blocks"] for op in block["ops"]}
    for i, (up, nc, res) in enumerate(zip(gen.ups, gen.noise_convs, gen.noise_res)):
        assert ops[f"s{i}_up"]["attrs"] == {"stride": up.stride[0], "padding": up.padding[0]}
        assert ops[f"s{i}_src"]["attrs"] == {"stride": nc.stride[0], "padding": nc.padding[0]}
        assert res.convs1[0].kernel_size[0] == kokoro.NOISE_RES_KERNELS[i]


def test_stage_order_names_each_built_stage_once():
    stages = kokoro.FRONT + kokoro.BACK
    assert len(set(stages)) == len(stages) and set(CIRCUITS) - set(stages) == {"kokoro_embedding"}
    assert kokoro.FRONT[-1] == "kokoro_duration" and kokoro.BACK[-1] == "kokoro_generator"
    assert kokoro.NOISE in kokoro.BACK
