"""Compute precision of a build: fp32 (the default, the X-Ray path), bf16 and int8 (opt-in).

`BuildOptions(precision=...)`, else KCC_PRECISION, else fp32. fp32 compiles exactly as before.
bf16 rewrites, after the other passes, the convolutions on the GEMM pack that dominate a
synthesis (the decoder's and generator's convs, the transposed convs, their fused AdaIN and
block-DFT forms) into their bf16 ops: weights packed once at lowering as bf16 pairs, activations
rounded to bf16 per block of GEMM rows, products summed in f32 (vdpbf16ps where the CPU has
AVX512_BF16; kcc/kernels/c/gemm_tile_bf16.c). Everything else (encoders, LSTMs, attention,
norms, STFT / iSTFT) stays fp32, so durations come from the fp32 front stages.

Reduced precision is not bit-checked against torch: it passes the listening gate instead
(bench/precision_gate.py, `gate(precision)`; tests/test_precision_gate.py): Whisper WER, log-mel
distance to fp32 against the int8 onnxruntime export's distance to torch, durations, high-band
energy.

int8 rewrites the GEMM-path convs (conv1d's GEMM variant, conv_transpose1d's polyphase variant,
adain_conv1d, and dft_conv1d, which
becomes a direct int8 conv: vpdpbusd's 64 multiply-adds an instruction outweigh the DFT's saving,
and the f32 spectra leave the blob) into their int8 ops (kcc/ops/conv_int8.py): weights quantised
at lowering per output channel, activations per time step inside the kernel, exact s32 sums
(kcc/kernels/c/gemm_tile_s8.c). Everything else (encoders, LSTMs, norms, STFT / iSTFT) stays fp32.

At load (kcc.model.model_store) bf16 falls back to fp32 on a CPU without AVX512_BF16, or when
the portable build is forced below the AVX-512 level: the library's ISO C emulation does no
fewer multiply-adds than the fp32 tiles and measured 2-2.5x slower (bench/results/precision.md).
int8 runs wherever its tiles use vector integer instructions (int8_tiles): vpdpbusd with
AVX512_VNNI or AVX-VNNI, else AVX2's exact vpmaddwd, which on a Zen 3 takes about twice fp32's
time (the direct int8 convs against fp32's block DFTs) for a sixth of its weight bytes, said once at
load; below AVX2 its ISO C emulation would be slower still, so it falls back to fp32 there.
"""
from __future__ import annotations

import dataclasses
import os

from kcc.ir import Graph
from kcc.compiler import isa          # called as isa.X(): tests stand in for the CPU there

from kcc.precisions import PRECISIONS, add_precision_argument  # noqa: E402,F401  (the light names; re-exported)
DEFAULT = "fp32"
# Ops the bf16 pass rewrites: fp32 op -> its bf16 twin (kcc/ops/conv.py, fused.py, dft_conv.py).
BF16_OPS = {"conv1d": "conv1d_bf16", "conv_transpose1d": "conv_transpose1d_bf16",
            "adain_conv1d": "adain_conv1d_bf16", "dft_conv1d": "dft_conv1d_bf16"}
# Ops the int8 pass rewrites (kcc/ops/conv_int8.py); dft_conv1d becomes the direct conv1d_int8.
INT8_OPS = {"conv1d": "conv1d_int8", "conv_transpose1d": "conv_transpose1d_int8", "adain_conv1d": "adain_conv1d_int8",
            "dft_conv1d": "conv1d_int8"}


class PrecisionError(ValueError):
    """A precision kcc does not know."""


def check(precision: str) -> str:
    """`precision` if kcc can compile it, else PrecisionError naming what is possible."""
    if precision not in PRECISIONS:
        raise PrecisionError(f"unknown precision {precision!r} (--precision / KCC_PRECISION / "
                             f"BuildOptions.precision): one of {', '.join(PRECISIONS)}")
    return precision


def from_env() -> str:
    """BuildOptions' default: KCC_PRECISION when set (checked when a build uses it), else fp32."""
    return os.environ.get("KCC_PRECISION") or DEFAULT


def _cpu_flags() -> set[str]:
    return isa._cpu_flags()


def cpu_has_bf16() -> bool:
    """This CPU runs the bf16 tiles natively: x86-64 with AVX-512 (the v4 level) and AVX512_BF16."""
    return isa.is_x86_64() and "avx512" in isa.runnable_levels() and "avx512_bf16" in _cpu_flags()


def int8_tiles(level: str | None = None) -> str | None:
    """The int8 tiles a build dispatching at `level` (None: this CPU's own) runs here, as
    gemm_tile_s8.c picks them: 'avx512_vnni' (vpdpbusd zmm, at the AVX-512 level), 'avx_vnni'
    (vpdpbusd ymm), 'avx2' (vpmaddwd on widened operands); None: the ISO C emulation (below AVX2,
    or not x86-64)."""
    if not isa.is_x86_64():
        return None
    level = level or isa.dispatched_level()
    flags = _cpu_flags()
    if level == "avx512" and "avx512_vnni" in flags:
        return "avx512_vnni"
    if level in ("avx2", "avx2fma", "avx512"):
        return "avx_vnni" if "avx_vnni" in flags else "avx2"
    return None


def for_this_cpu(options, log=None):
    """The options a load should build: bf16 becomes fp32 where its tiles would run emulated (no
    AVX512_BF16, or a portable build forced below avx512), int8 where they would (below AVX2), said
    once on `log`; int8 on AVX2 without VNNI is kept, and what it costs said once. Anything else is
    returned as it is, after check()."""
    precision = check(options.precision)
    if precision == DEFAULT:
        return options
    level = isa.requested(options.isa, options.native)
    if precision == "int8":
        tiles = int8_tiles(level)
        if tiles == "avx2" and log is not None:
            print("kcc: precision int8 runs on AVX2 integer multiply-adds here (no AVX512_VNNI or AVX-VNNI): "
                  "about twice fp32's time, for a sixth of its weight bytes", file=log)
        why = None if tiles else (f"the build is forced to dispatch level {level}" if level else
                                  "this CPU has no AVX2")
    else:
        why = ("this CPU has no AVX512_BF16" if not cpu_has_bf16()
               else f"the build is forced to dispatch level {level}" if level not in (None, "avx512") else None)
    if why is None:
        return options
    if log is not None:
        print(f"kcc: precision {precision} runs fp32 here ({why}: emulated {precision} would be slower)", file=log)
    return dataclasses.replace(options, precision="fp32")


def bf16_gemms(g: Graph) -> Graph:
    """The bf16 pass: each conv on the GEMM pack (conv1d's GEMM path, conv_transpose1d's polyphase
    path, adain_conv1d, dft_conv1d) becomes its bf16 op; kcc.compiler.lower.pack_weights then
    packs its weights as bf16 pairs."""
    for op in g.ops:
        new = BF16_OPS.get(op.type)
        if new is None:
            continue
        w = g.weights[op.weights["weight"]]
        if op.type in ("conv1d", "conv_transpose1d") and (w.pack != "conv_pack" or len(w.shape) != 4):
            continue                 # off the GEMM / polyphase paths (grouped, depthwise): their own f32 layouts
        op.type = new
    return g


def int8_convs(g: Graph) -> Graph:
    """The int8 pass: each GEMM-variant conv1d, polyphase conv_transpose1d, adain_conv1d and
    dft_conv1d whose input rows fit the int8 block (kcc.ops.conv_int8.fits_int8) becomes its int8
    op; a dft_conv1d becomes a direct conv1d_int8 (its spectrum role dropped, so no spectrum is
    packed), and an adain feeding it fuses in.
    kcc.compiler.lower.pack_weights then packs the weights as int8 + scales."""
    from kcc.ops import OPS
    from kcc.ops.conv_int8 import fits_int8
    for op in g.ops:
        new = INT8_OPS.get(op.type)
        if new is None:
            continue
        w = g.weights[op.weights["weight"]]
        if w.pack != "conv_pack" or len(w.shape) != 4:
            continue                 # off the GEMM path (grouped, depthwise): their own f32 layouts
        k, c_in, a = w.shape[0], w.shape[2], op.attrs
        if op.type == "conv_transpose1d":       # the 4-d pack is the polyphase variant's: taps q - m, m <= back
            fits = fits_int8(c_in, (k - 1) // a["stride"])
        else:                                   # the 4-d pack is the GEMM variant's
            fits = fits_int8(c_in, a["dilation"] * (k - 1), a.get("stride", 1))
        if not fits:
            continue
        if op.type == "dft_conv1d":
            op.weights = {"weight": op.weights["weight"], "bias": op.weights["bias"]}
            op.attrs = {**OPS["conv1d"].attrs, "padding": a["padding"], "dilation": a["dilation"], "act": a["act"],
                        "slope": a["slope"]}
        op.type = new
    return _fuse_adain_int8(g)


def _fuse_adain_int8(g: Graph) -> Graph:
    """adain -> conv1d_int8 becomes one adain_conv1d_int8 at the conv's place
    (kcc.compiler.passes.fuse_adain, as fp32 convs fuse): the convs the int8 pass takes from block
    DFTs read a materialised adain (the fp32 DFT conv has no fused form); fused, that tensor
    never exists (bit-identical: a row's quantum depends on that row alone)."""
    from kcc.compiler.passes import fuse_adain

    def direct_int8(g: Graph, conv):
        if conv.type != "conv1d_int8" or conv.attrs["stride"] != 1 or conv.attrs["groups"] != 1:
            return None
        w = g.weights[conv.weights["weight"]].shape
        return w[0], w[2]
    return fuse_adain(g, "adain_conv1d_int8", direct_int8)


def passes(precision: str) -> list:
    """Graph passes a precision adds after kcc.compiler.passes' (none for fp32)."""
    return {"bf16": [bf16_gemms], "int8": [int8_convs]}.get(check(precision), [])


def with_precision(options, value: str | None):
    """`options` with the precision a command line asked for (None: unchanged, i.e. KCC_PRECISION or
    fp32), checked: what `--precision` feeds into kcc.model.model_store.load_model."""
    return options if value is None else dataclasses.replace(options, precision=check(value))
