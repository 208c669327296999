"""istftnet Decoder up to its generator: the F0 / N curve convs, asr_res, encode and the four
decode AdainResBlk1d."""
from __future__ import annotations

from kcc.model.circuit import Circuit
from kcc.model.kokoro import F0_FRAMES_PER_FRAME, HIDDEN, MAX_DECODER_FRAMES, STYLE_DIM
from kcc.model.layers import DECODER_SPELLING, adain_resblk1d, conv_weights

TIME = ("batch", "time", "channel")
DECODE_IN = 1024 + 2 + 64        # decode blocks read (x, asr_res 64, F0 1, N 1) concatenated

DESCRIPTION = (
    "istftnet Decoder.forward up to its generator: F0/N stride-2 convs, asr_res, the encode "
    "AdainResBlk1d and four decode AdainResBlk1d (the last upsamples time x2), each residual = "
    "conv2(leaky(adain2(conv1(pool(leaky(adain1(x))))))), shortcut = conv1x1(upsample(x)), out = "
    "(residual + shortcut) * rsqrt(2). f0 and n are [B, 2F] rows (one channel). Batch 1 only: "
    "upstream runs the decoder unbatched and instance norm has no padding mask.")

F0_CONV_GATE = {
    "max_abs": 1e-4, "max_rmse": 5e-5,
    "why": (
        "F0_conv runs on the F0 curve in Hz, so its outputs reach the hundreds (|y| up to ~300 with "
        "these weights): one f32 ulp there is 1.5e-5 (128..256) or 3.1e-5 (256..512), and torch's own"
        " f32 sum of 3 taps + bias is off the exact value by 1-2 ulps, so the absolute 2e-5 bounds "
        "cannot hold; 1e-4 / 5e-5 allow ~3 ulps at 512. Cosine and relative RMSE (~1e-7 measured) "
        "keep the FP32 gate.")}


def decoder() -> Circuit:
    c = Circuit("kokoro_decoder", DESCRIPTION, {"B": (1, 1), "F": (1, MAX_DECODER_FRAMES)}, capture="decoder")
    curve = f"({F0_FRAMES_PER_FRAME}*F)"
    c.input("asr", "f32", ["B", "F", HIDDEN])
    c.input("f0", "f32", ["B", curve])
    c.input("n", "f32", ["B", curve])
    c.input("style_dec", "f32", ["B", STYLE_DIM])
    b = c.block("curves")
    f0c = b.op("conv1d", {"x": "f0"}, "f0c", w=conv_weights(c, "f0_conv", "decoder.F0_conv"),
               attrs={"stride": 2, "padding": 1})
    nc = b.op("conv1d", {"x": "n"}, "nc", w=conv_weights(c, "n_conv", "decoder.N_conv"),
              attrs={"stride": 2, "padding": 1})
    asr_r = b.op("conv1d", {"x": "asr"}, "asr_r", w=conv_weights(c, "asr_res", "decoder.asr_res.0"))
    b.checkpoint("kokoro.decoder.f0_conv", f0c, TIME, gate=F0_CONV_GATE)
    b.checkpoint("kokoro.decoder.n_conv", nc, TIME)
    b.checkpoint("kokoro.decoder.asr_res", asr_r, TIME)

    b = c.block("encode")
    x = b.op("concat", {"a": "asr", "b": f0c, "c": nc}, "enc_in")
    x = adain_resblk1d(c, b, "encode", "enc", "decoder.encode", x, "style_dec", "enc",
                       spelling=DECODER_SPELLING, upsample=False, learned_sc=True)
    b.checkpoint("kokoro.decoder.encode", x, TIME)
    for i in range(4):
        last = i == 3
        b = c.block(f"decode{i}")
        h = b.op("concat", {"a": x, "b": asr_r, "c": f0c, "d": nc}, f"dec{i}_in")
        x = adain_resblk1d(c, b, f"decode{i}", f"dec{i}", f"decoder.decode.{i}", h, "style_dec",
                           "gen_in" if last else f"dec{i}", spelling=DECODER_SPELLING, upsample=last,
                           learned_sc=True, channels=DECODE_IN)
        b.checkpoint(f"kokoro.decoder.decode.{i}", x, TIME)
    b.checkpoint("kokoro.decoder.generator_input", x, TIME)
    c.outputs = [x]
    return c
