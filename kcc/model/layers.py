"""Upstream Kokoro modules that occur more than once, each written once as a circuit fragment.

A fragment takes the Circuit (for its weights), the Block its ops go into, a local name prefix,
the checkpoint prefix of the upstream module, and its input tensors; it returns its output
tensor's name.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from kcc.model.circuit import Block, Circuit
from kcc.model.kokoro import RESBLOCK_DILATIONS

RSQRT2 = math.sqrt(0.5)          # AdainResBlk1d: (residual + shortcut) / sqrt(2)
LSTM_PARTS = ("ih", "bih", "hh", "bhh")
_LSTM_REFS = {"ih": "weight_ih_l0", "bih": "bias_ih_l0", "hh": "weight_hh_l0", "bhh": "bias_hh_l0"}


def bilstm(c: Circuit, b: Block, name: str, ref: str, x: str, lengths: str | None, out: str, *,
           packed: bool, gates: str, by_direction: bool = False) -> str:
    """torch.nn.LSTM(bidirectional=True, batch_first=True), one layer: the input projections of
    both directions as one GEMM (lstm_gates), then the recurrence (bilstm). packed: lengths mask
    the sequences as pack_padded_sequence does. by_direction: the forward weights are declared
    before the reverse ones (else each tensor's forward / reverse pair in turn)."""
    suffixes = {"": "", "_r": "_reverse"}
    order = ([(p, s) for s in suffixes for p in LSTM_PARTS] if by_direction
             else [(p, s) for p in LSTM_PARTS for s in suffixes])
    w = {(p, s): c.weight(f"{name}_{p}{s}", f"{ref}.{_LSTM_REFS[p]}{suffixes[s]}") for p, s in order}
    b.op("lstm_gates", {"x": x}, gates,
         w={"w_fwd": w["ih", ""], "b_fwd": w["bih", ""], "w_rev": w["ih", "_r"], "b_rev": w["bih", "_r"]})
    ins = {"gates": gates} if lengths is None else {"gates": gates, "lengths": lengths}
    return b.op("bilstm", ins, out, attrs={"packed": packed},
                w={"w_hh_fwd": w["hh", ""], "b_hh_fwd": w["bhh", ""], "w_hh_rev": w["hh", "_r"],
                   "b_hh_rev": w["bhh", "_r"]})


def adain_weights(c: Circuit, name: str, ref: str) -> dict[str, str]:
    """AdaIN1d's InstanceNorm affine and style fc: the adain op's weight roles."""
    return {"norm_w": c.weight(f"{name}_nw", f"{ref}.norm.weight"),
            "norm_b": c.weight(f"{name}_nb", f"{ref}.norm.bias"),
            "fc_w": c.weight(f"{name}_fw", f"{ref}.fc.weight"),
            "fc_b": c.weight(f"{name}_fb", f"{ref}.fc.bias")}


def conv_weights(c: Circuit, name: str, ref: str, bias: bool = True) -> dict[str, str]:
    """A weight-normed Conv1d / ConvTranspose1d: the conv op's weight roles."""
    w = {"weight": c.weight(name, ref, weight_norm=True)}
    if bias:
        w["bias"] = c.weight(f"{name}_b", f"{ref}.bias")
    return w


# -- AdainResBlk1d (istftnet.py / modules.py) ----------------------------------------------

@dataclass(frozen=True)
class ResBlkSpelling:
    """How a circuit spells an AdainResBlk1d's weights and tensors. The decoder and the
    predictor circuits were first written by hand with different spellings; both are kept, so
    the weight blob layout and the generated C stay as they were."""
    weight_order: tuple[str, ...]      # of norm1, norm2, conv1, conv2, pool, shortcut
    norm_out: tuple[str, str]          # tensor suffixes after adain1 / adain2
    shortcut: str                      # local name suffix of the conv1x1 weight
    shortcut_attrs: dict | None        # the conv1x1's attrs ({} or absent)


DECODER_SPELLING = ResBlkSpelling(("norm1", "pool", "conv1", "norm2", "conv2", "shortcut"),
                                  ("n1", "n2"), "conv1x1", {})
PREDICTOR_SPELLING = ResBlkSpelling(("norm1", "norm2", "conv1", "conv2", "pool", "shortcut"),
                                    ("a1", "a2"), "sc", None)


def adain_resblk1d(c: Circuit, b: Block, wname: str, tname: str, ref: str, x: str, style: str, out: str,
                   *, spelling: ResBlkSpelling, upsample: bool, learned_sc: bool,
                   channels: int | None = None) -> str:
    """AdainResBlk1d: residual = conv2(leaky(adain2(conv1(pool(leaky(adain1(x))))))), shortcut
    = conv1x1(upsample(x)) (or x itself), out = (residual + shortcut) / sqrt(2). upsample: pool
    is the depthwise ConvTranspose1d k3 s2 over `channels`, the shortcut a nearest x2."""
    w: dict[str, dict[str, str]] = {}
    for part in spelling.weight_order:
        if part in ("norm1", "norm2"):
            w[part] = adain_weights(c, f"{wname}_{part}", f"{ref}.{part}")
        elif part in ("conv1", "conv2"):
            w[part] = conv_weights(c, f"{wname}_{part}", f"{ref}.{part}")
        elif part == "pool" and upsample:
            w[part] = conv_weights(c, f"{wname}_pool", f"{ref}.pool")
        elif part == "shortcut" and learned_sc:
            w[part] = conv_weights(c, f"{wname}_{spelling.shortcut}", f"{ref}.conv1x1", bias=False)
    leaky = {"act": "leaky_relu", "slope": 0.2}
    h = b.op("adain", {"x": x, "style": style}, f"{tname}_{spelling.norm_out[0]}", w=w["norm1"], attrs=leaky)
    if upsample:
        h = b.op("conv_transpose1d", {"x": h}, f"{tname}_pool", w=w["pool"],
                 attrs={"stride": 2, "padding": 1, "output_padding": 1, "groups": channels})
    h = b.op("conv1d", {"x": h}, f"{tname}_c1", w=w["conv1"], attrs={"padding": 1})
    h = b.op("adain", {"x": h, "style": style}, f"{tname}_{spelling.norm_out[1]}", w=w["norm2"], attrs=leaky)
    res = b.op("conv1d", {"x": h}, f"{tname}_res", w=w["conv2"], attrs={"padding": 1})
    sc = x
    if upsample:
        sc = b.op("upsample_nearest", {"x": sc}, f"{tname}_up", attrs={"factor": 2})
    if learned_sc:
        sc = b.op("conv1d", {"x": sc}, f"{tname}_sc", w=w["shortcut"], attrs=spelling.shortcut_attrs)
    return b.op("add", {"a": res, "b": sc}, out, attrs={"scale": RSQRT2})


# -- AdaINResBlock1 (istftnet.py): the generator's resblocks and source branch -------------

def adain_resblock1(c: Circuit, b: Block, name: str, ref: str, x: str, style: str, kernel: int) -> str:
    """AdaINResBlock1: for each dilation d, x = x + conv2(snake(adain2(conv1_d(snake(adain1(x))))))
    with 'same' padding; returns the last x ({name}_x2)."""
    for p, d in enumerate(RESBLOCK_DILATIONS):
        w1 = adain_weights(c, f"{name}_n1_{p}", f"{ref}.adain1.{p}")
        w1["alpha"] = c.weight(f"{name}_a1_{p}", f"{ref}.alpha1.{p}")
        c1 = conv_weights(c, f"{name}_c1_{p}", f"{ref}.convs1.{p}")
        w2 = adain_weights(c, f"{name}_n2_{p}", f"{ref}.adain2.{p}")
        w2["alpha"] = c.weight(f"{name}_a2_{p}", f"{ref}.alpha2.{p}")
        c2 = conv_weights(c, f"{name}_c2_{p}", f"{ref}.convs2.{p}")
        snake = {"act": "snake"}
        h = b.op("adain", {"x": x, "style": style}, f"{name}_h{p}a", w=w1, attrs=snake)
        h = b.op("conv1d", {"x": h}, f"{name}_h{p}b", w=c1, attrs={"padding": d * (kernel - 1) // 2, "dilation": d})
        h = b.op("adain", {"x": h, "style": style}, f"{name}_h{p}c", w=w2, attrs=snake)
        h = b.op("conv1d", {"x": h}, f"{name}_h{p}d", w=c2, attrs={"padding": (kernel - 1) // 2})
        x = b.op("add", {"a": h, "b": x}, f"{name}_x{p}")
    return x
