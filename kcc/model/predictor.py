"""The prosody predictor: the duration encoder and head (integer durations), then alignment
expansion and the F0 / N curves."""
from __future__ import annotations

from kcc.model.circuit import Circuit
from kcc.model.kokoro import CONTEXT_TOKENS, HIDDEN, MAX_BATCH, MAX_FRAMES, PREDICTOR_IN, STYLE_DIM
from kcc.model.layers import PREDICTOR_SPELLING, adain_resblk1d, bilstm

TOKENS = ("batch", "token", "channel")
FRAMES = ("batch", "frame", "channel")

DURATION_DESCRIPTION = (
    "Kokoro DurationEncoder + duration head, as forward_with_tokens runs them. x = concat(d_en, "
    "style broadcast over time), padded rows zeroed; 3 x [bidirectional LSTM (packed) -> "
    "AdaLayerNorm (fc(style) by a linear op, then LN without affine and (1+gamma)*x+beta) -> "
    "concat style -> mask] gives d [B, T, C+S]; then predictor.lstm -> duration_proj -> durations"
    " = max(1, round_half_even(sum sigmoid / speed)) as int32 (0 at padded tokens). "
    "predictor.lstm runs packed: upstream's forward_with_tokens calls it on the plain tensor, "
    "which is the same thing whenever lengths == T (its only case: it sets lengths to T); packing"
    " keeps padded batch rows from leaking into the reverse direction. Checks before any output: "
    "style finite (concat_style), 0 < speed <= 5 and finite, lengths in [1, T]. The durations "
    "checkpoint is the int32 tensor (compared as numbers with the f32 capture of upstream's "
    "integer pred_dur; equality is exact).")

PROSODY_DESCRIPTION = (
    "Kokoro alignment expansion and prosody (forward_with_tokens: en = d^T @ pred_aln_trg, "
    "F0Ntrain(en, s); asr = t_en @ pred_aln_trg). Two-phase run: the frame count F = "
    "sum(durations) is a runtime dim no input's shape carries, so the caller (having run "
    "kokoro_duration) passes it; expand_by_durations copies each token's row over its frames (the"
    " one-hot matmul without the dense matrix) and refuses durations that do not sum to exactly F"
    " or are negative. Then predictor.shared bidirectional LSTM over all F frames (upstream calls"
    " it unpacked) and two branches of 3 AdainResBlk1d (the 2nd upsamples x2: depthwise "
    "weight-normed ConvTranspose1d k3 s2 on the residual path, nearest upsample + conv1x1 on the "
    "shortcut; out = (res + shortcut) * rsqrt(2)) -> F0_proj / N_proj conv1x1 -> [1, 2F]. "
    "style_pred is checked finite first. Dropout is inactive at inference and omitted.")

F0_GATE = {
    "max_abs": 1e-3, "max_rmse": 2e-4,
    "why": (
        "f0 is on a Hz scale (|f0| reaches ~2e2 on the seeded checkpoints, as real pitch does), where"
        " one f32 ulp is 1.5e-5: an absolute 2e-5 would demand ~1 ulp after 3 residual blocks and a "
        "256-channel projection. The scale-free gates stay at FP32 strictness (cosine >= 0.99999, "
        "rel_rmse <= 2e-5; measured rel_rmse 4e-7); max_abs 1e-3 and rmse 2e-4 are ~5e-6 and ~1e-6 of"
        " max |f0|.")}

ADA_LN_EPS = 1e-5


def duration() -> Circuit:
    c = Circuit("kokoro_duration", DURATION_DESCRIPTION, {"B": (1, MAX_BATCH), "T": (1, CONTEXT_TOKENS)},
                capture="middle_t12")
    c.input("d_en", "f32", ["B", "T", HIDDEN])
    c.input("style_pred", "f32", ["B", STYLE_DIM])
    c.input("lengths", "i32", ["B"])
    c.input("speed", "f32", ["B"])
    b = c.block("style_in")
    x = b.op("concat_style", {"x": "d_en", "style": "style_pred", "lengths": "lengths"}, "x0")
    # DurationEncoder.lstms alternates LSTM (even index) and AdaLayerNorm (odd index).
    for i in range(3):
        b = c.block(f"layer{i}")
        h = bilstm(c, b, f"l{i}", f"predictor.text_encoder.lstms.{2 * i}", x, "lengths", f"h{i}",
                   packed=True, gates=f"l{i}_gates")
        fc = f"predictor.text_encoder.lstms.{2 * i + 1}.fc"
        mod = b.op("linear", {"x": "style_pred"}, f"mod{i}",
                   w={"weight": c.weight(f"ada{i}_w", f"{fc}.weight"), "bias": c.weight(f"ada{i}_b", f"{fc}.bias")})
        n = b.op("ada_layer_norm", {"x": h, "mod": mod}, f"n{i}", attrs={"eps": ADA_LN_EPS})
        x = b.op("concat_style", {"x": n, "style": "style_pred", "lengths": "lengths"}, "d" if i == 2 else f"x{i + 1}")
        if i == 0:
            b.checkpoint("kokoro.predictor.text_encoder.lstm.0", h, TOKENS)
        b.checkpoint(f"kokoro.predictor.text_encoder.ada_norm.{i}", n, TOKENS)
    b.checkpoint("kokoro.predictor.text_encoder.output", x, TOKENS)
    b = c.block("head")
    hd = bilstm(c, b, "dl", "predictor.lstm", x, "lengths", "hd", packed=True, gates="dl_gates")
    proj = "predictor.duration_proj.linear_layer"
    logits = b.op("linear", {"x": hd}, "logits",
                  w={"weight": c.weight("proj_w", f"{proj}.weight"), "bias": c.weight("proj_b", f"{proj}.bias")})
    dur = b.op("durations", {"logits": logits, "speed": "speed", "lengths": "lengths"}, "durations")
    b.checkpoint("kokoro.predictor.lstm", hd, TOKENS)
    b.checkpoint("kokoro.predictor.duration_logits", logits, ("batch", "token", "bin"))
    b.checkpoint("kokoro.predictor.durations", dur, ("batch", "token"))
    c.outputs = [x, dur]
    return c


def prosody() -> Circuit:
    c = Circuit("kokoro_prosody", PROSODY_DESCRIPTION, {"T": (1, CONTEXT_TOKENS), "F": (1, MAX_FRAMES)},
                capture="middle_t12")
    c.input("d", "f32", [1, "T", PREDICTOR_IN])
    c.input("durations", "i32", [1, "T"])
    c.input("style_pred", "f32", [1, STYLE_DIM])
    c.input("t_en", "f32", [1, "T", HIDDEN])
    b = c.block("inputs")
    style = b.op("check_finite", {"x": "style_pred"}, "style")
    en = b.op("expand_by_durations", {"x": "d", "durations": "durations"}, "en", attrs={"frames": "F"})
    asr = b.op("expand_by_durations", {"x": "t_en", "durations": "durations"}, "asr", attrs={"frames": "F"})
    b.checkpoint("kokoro.predictor.expanded", en, FRAMES)
    b.checkpoint("kokoro.asr", asr, FRAMES)
    b = c.block("shared")
    x = bilstm(c, b, "sh", "predictor.shared", en, None, "x", packed=False, gates="sh_gates")
    b.checkpoint("kokoro.predictor.shared", x, FRAMES)
    curves = {}
    for branch, block, out in (("F0", "f0", "f0"), ("N", "n", "n")):
        b = c.block(block)
        h = x
        # F0Ntrain: AdainResBlk1d(512, 512), (512, 256, upsample), (256, 256), then a conv1x1 to 1.
        for i in range(3):
            name = f"{branch}{i}"
            h = adain_resblk1d(c, b, name, name, f"predictor.{branch}.{i}", h, style, f"{name}_out",
                               spelling=PREDICTOR_SPELLING, upsample=i == 1, learned_sc=i == 1, channels=HIDDEN)
            if branch == "F0" and i == 1:
                b.checkpoint("kokoro.predictor.F0.1", h, FRAMES)
        w = {"weight": c.weight(f"{branch}_proj_w", f"predictor.{branch}_proj.weight"),
             "bias": c.weight(f"{branch}_proj_b", f"predictor.{branch}_proj.bias")}
        p = b.op("conv1d", {"x": h}, f"{out}_proj", w=w)
        curves[out] = b.op("squeeze", {"x": p}, out)
        b.checkpoint(f"kokoro.predictor.{out}", curves[out], ("batch", "frame"),
                     gate=F0_GATE if out == "f0" else None)
    c.outputs = [en, curves["f0"], curves["n"], asr]
    return c
