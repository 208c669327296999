"""iSTFTNet generator (istftnet.Generator) and the seeded stand-ins for its random draws."""
from __future__ import annotations

import math

from kcc.model.circuit import Circuit
from kcc.model.kokoro import (GEN_CHANNELS, HARMONICS, MAX_F0_FRAMES, NOISE_RES_KERNELS, NOISE_STD,
                              RESBLOCK_KERNELS, SAMPLE_RATE, SINE_AMP, SOURCE_UPSAMPLE, STFT_HOP, STFT_N_FFT,
                              STYLE_DIM, UPSAMPLE_KERNELS, UPSAMPLE_RATES, VOICED_THRESHOLD)
from kcc.model.layers import adain_resblock1, conv_weights

FRAMES = ("batch", "frame", "channel")
SAMPLES = ("batch", "sample")
GEN = "decoder.generator"
F0_DIMS = {"N": (2, MAX_F0_FRAMES)}
SAMPLE_ROWS = f"({SOURCE_UPSAMPLE}*N)"

DESCRIPTION = (
    "iSTFTNet generator (kokoro==0.9.4 istftnet.Generator): harmonic-plus-noise source from f0 (N"
    " = 2F frames, 300 samples each), its STFT, two upsampling stages (noise conv + "
    "AdaINResBlock1 source branch, weight-normed ConvTranspose1d, mean of three AdaINResBlock1), "
    "conv_post, exp/sin head and iSTFT -> 24 kHz waveform [B, 300N]. Upstream's torch.rand / "
    "torch.randn_like draws are the inputs rand_ini and sine_noise (op random_fill makes seeded "
    "ones).")

SOURCE_NOISE_DESCRIPTION = (
    "Seeded stand-ins for upstream SineGen's random draws: rand_ini ~ U[0,1) [1,9] (initial "
    "harmonic phases) and sine_noise ~ N(0,1) [1,300N,9] (additive noise), from the documented "
    "counter-based RNG (op random_fill: splitmix64 + Box-Muller). Production synthesis runs this "
    "before kokoro_generator; parity tests feed upstream's own draws instead. N (= 2F f0 frames) "
    "is carried by no input: the caller passes it.")

HAR_GATE = {
    "min_cosine": 0.998, "max_rmse": 0.1, "max_rel_rmse": 0.06, "max_abs": 6.2832,
    "why": (
        "phase channels 11..21 are angle() of the STFT. Frame 0 is centred on sample 0 with reflect "
        "padding, so its spectrum is real up to f32 rounding: a bin with a negative real part is +pi "
        "or -pi by the sign of torch's MKL rounding noise, which a direct f64 DFT cannot reproduce (2"
        " such bins in this capture: max_abs = 2*pi). Phases of bins near zero magnitude are "
        "ill-conditioned (error ~ noise/|X|, 9e-4 here). Magnitudes and complex bin values hold 2e-5,"
        " and 2*pi jumps occur only in frame 0: tests/test_signal_ops.py checks exactly that. "
        "Downstream checkpoints are NOT loosened: upstream's output depends on that rounding sign "
        "(see tests/test_generator.py).")}

# The leaky_relu that opens each stage; the one after the last stage is torch's default slope.
STAGE_SLOPE, FINAL_SLOPE = 0.1, 0.01


def source_noise() -> Circuit:
    c = Circuit("kokoro_source_noise", SOURCE_NOISE_DESCRIPTION, F0_DIMS)
    c.input("seed", "i32", [1])
    b = c.block("draws")
    b.op("random_fill", {"seed": "seed"}, "rand_ini",
         attrs={"shape": [1, HARMONICS + 1], "dist": "uniform", "stream": 0})
    b.op("random_fill", {"seed": "seed"}, "sine_noise",
         attrs={"shape": [1, SAMPLE_ROWS, HARMONICS + 1], "dist": "normal", "stream": 1})
    c.outputs = ["rand_ini", "sine_noise"]
    return c


def generator() -> Circuit:
    c = Circuit("kokoro_generator", DESCRIPTION, {"B": (1, 1), **F0_DIMS}, capture="generator")
    c.input("gen_in", "f32", ["B", "N", GEN_CHANNELS])
    c.input("f0", "f32", ["B", "N"])
    c.input("style_dec", "f32", ["B", STYLE_DIM])
    c.input("rand_ini", "f32", ["B", HARMONICS + 1])
    c.input("sine_noise", "f32", ["B", SAMPLE_ROWS, HARMONICS + 1])
    b = c.block("source")
    mix = {"mix_w": c.weight("src_w", f"{GEN}.m_source.l_linear.weight"),
           "mix_b": c.weight("src_b", f"{GEN}.m_source.l_linear.bias")}
    src = b.op("harmonic_source", {"f0": "f0", "init_phase": "rand_ini", "noise": "sine_noise"}, "har_source",
               w=mix, attrs={"upsample": SOURCE_UPSAMPLE, "sample_rate": float(SAMPLE_RATE), "sine_amp": SINE_AMP,
                             "noise_std": NOISE_STD, "voiced_threshold": VOICED_THRESHOLD})
    har = b.op("stft", {"x": src}, "har", attrs={"n_fft": STFT_N_FFT, "hop": STFT_HOP})
    b.checkpoint("kokoro.generator.source", src, SAMPLES, layout="flat")
    b.checkpoint("kokoro.generator.har", har, FRAMES, gate=HAR_GATE)

    x = "gen_in"
    n_stages, n_kernels = len(UPSAMPLE_RATES), len(RESBLOCK_KERNELS)
    for i, (rate, kernel) in enumerate(zip(UPSAMPLE_RATES, UPSAMPLE_KERNELS)):
        last = i == n_stages - 1
        b = c.block(f"stage{i}")
        if i == 0:
            x = b.op("leaky_relu", {"x": x}, "s0_act", attrs={"slope": STAGE_SLOPE})
        # The source branch: the spectrum strided down to this stage's rate, one AdaINResBlock1.
        stride = math.prod(UPSAMPLE_RATES[i + 1:])
        noise_conv = {"weight": c.weight(f"nc{i}", f"{GEN}.noise_convs.{i}.weight"),
                      "bias": c.weight(f"nc{i}_b", f"{GEN}.noise_convs.{i}.bias")}
        s = b.op("conv1d", {"x": har}, f"s{i}_src", w=noise_conv,
                 attrs={"stride": stride, "padding": (stride + 1) // 2 if not last else 0})
        s = adain_resblock1(c, b, f"nr{i}", f"{GEN}.noise_res.{i}", s, "style_dec", NOISE_RES_KERNELS[i])
        up = b.op("conv_transpose1d", {"x": x}, f"s{i}_up", w=conv_weights(c, f"up{i}", f"{GEN}.ups.{i}"),
                  attrs={"stride": rate, "padding": (kernel - rate) // 2})
        h = up if not last else b.op("reflection_pad", {"x": up}, f"s{i}_pad", attrs={"left": 1, "right": 0})
        x = b.op("add", {"a": h, "b": s}, f"s{i}_x")
        blocks = [i * n_kernels + j for j in range(n_kernels)]
        outs = [adain_resblock1(c, b, f"rb{j}", f"{GEN}.resblocks.{j}", x, "style_dec", k)
                for j, k in zip(blocks, RESBLOCK_KERNELS)]
        # The mean of the resblocks, with the next leaky_relu folded in.
        x = b.op("add", dict(zip("abc", outs)), f"s{i}_out",
                 attrs={"divisor": n_kernels, "act": "leaky_relu", "slope": FINAL_SLOPE if last else STAGE_SLOPE})
        b.checkpoint(f"kokoro.generator.ups{i}", up, FRAMES)
        for j, out in zip(blocks, outs):
            b.checkpoint(f"kokoro.generator.resblocks.{j}", out, FRAMES)

    b = c.block("head")
    post = b.op("conv1d", {"x": x}, "post", w=conv_weights(c, "post", f"{GEN}.conv_post"), attrs={"padding": 3})
    wave = b.op("istft", {"x": post}, "waveform", attrs={"n_fft": STFT_N_FFT, "hop": STFT_HOP, "spec": "exp_sin"})
    b.checkpoint("kokoro.generator.conv_post", post, FRAMES)
    b.checkpoint("kokoro.waveform", wave, SAMPLES, layout="flat")
    c.outputs = [wave]
    return c
