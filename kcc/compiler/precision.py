"""Compute precision of a build: fp32 (the default, the X-Ray path), bf16 (opt-in), int8 (reserved).

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

At load (kcc.model.model_store) bf16 falls back to fp32 on a CPU without AVX512_BF16, or when
the portable build is forced below the AVX-512 level: the library's ISO C emulation does no
fewer multiply-adds than the fp32 tiles and measured 2-2.5x slower (bench/results/precision.md).
"""
from __future__ import annotations

import os

from kcc.compiler.ir import Graph

PRECISIONS = ("fp32", "bf16", "int8")
DEFAULT = "fp32"
# Ops the bf16 pass rewrites: fp32 op -> its bf16 twin (kcc/ops/conv.py, fused.py, dft_conv.py).
BF16_OPS = {"conv1d": "conv1d_bf16", "conv_transpose1d": "conv_transpose1d_bf16",
            "adain_conv1d": "adain_conv1d_bf16", "dft_conv1d": "dft_conv1d_bf16"}


class PrecisionError(ValueError):
    """A precision that is unknown, or not implemented yet (int8 compute)."""


def check(precision: str) -> str:
    """`precision` if kcc can compile it, else PrecisionError naming what is possible."""
    if precision not in PRECISIONS:
        raise PrecisionError(f"unknown precision {precision!r} (--precision / KCC_PRECISION / "
                             f"BuildOptions.precision): one of {', '.join(PRECISIONS)}")
    if precision == "int8":
        raise PrecisionError("precision 'int8' (int8 dot products) is not implemented yet; use fp32 or bf16")
    return precision


def from_env() -> str:
    """BuildOptions' default: KCC_PRECISION when set (checked when a build uses it), else fp32."""
    return os.environ.get("KCC_PRECISION") or DEFAULT


def _cpu_flags() -> set[str]:
    from kcc.compiler.isa import _cpu_flags as flags
    return flags()


def cpu_has_bf16() -> bool:
    """This CPU runs the bf16 tiles natively: x86-64 with AVX-512 (the v4 level) and AVX512_BF16."""
    from kcc.compiler.isa import is_x86_64, runnable_levels
    return is_x86_64() and "avx512" in runnable_levels() and "avx512_bf16" in _cpu_flags()


def for_this_cpu(options, log=None):
    """The options a load should build: bf16 becomes fp32 where the bf16 tiles would run emulated
    (no AVX512_BF16, or a portable build forced below avx512),
    said once on `log`. Anything else is returned as it is, after check()."""
    import dataclasses

    from kcc.compiler.isa import requested
    precision = check(options.precision)
    if precision != "bf16":
        return options
    level = requested(options.isa, options.native)
    why = ("this CPU has no AVX512_BF16" if not cpu_has_bf16()
           else f"the build is forced to dispatch level {level}" if level not in (None, "avx512") else None)
    if why is None:
        return options
    if log is not None:
        print(f"kcc: precision bf16 runs fp32 here ({why}: emulated bf16 would be slower)", file=log)
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


def passes(precision: str) -> list:
    """Graph passes a precision adds after kcc.compiler.passes' (none for fp32)."""
    return [bf16_gemms] if check(precision) == "bf16" else []


def with_precision(options, value: str | None):
    """`options` with the precision a command line asked for (None: unchanged, i.e. KCC_PRECISION or
    fp32), checked: what `--precision` feeds into kcc.model.model_store.load_model."""
    import dataclasses
    return options if value is None else dataclasses.replace(options, precision=check(value))


def add_precision_argument(parser) -> None:
    """`--precision fp32|bf16|int8` for kcc say / synth / serve / batch (kcc/cli.py)."""
    parser.add_argument("--precision", choices=PRECISIONS, default=None,
                        help="compute precision: fp32 (default; KCC_PRECISION), bf16 (faster on CPUs with "
                             "AVX512_BF16, fp32 elsewhere; passes the listening gate), int8 (not yet)")
