"""Signal ops of the neural-source-filter vocoder: harmonic source, STFT / iSTFT, seeded noise.

- `harmonic_source`: frame-rate f0 [B, N] -> excitation [B, up*N] (SineGen + the 9->1 merge
  Linear + tanh of iSTFTNet's SourceModuleHnNSF). Upstream's random draws are inputs:
  `init_phase` [B, H] (torch.rand; column 0, the fundamental, is ignored as upstream zeroes it)
  and `noise` [B, up*N, H] (torch.randn_like). Weights: `mix_w` [1, H], `mix_b` [1].
- `stft`: x [B, L] -> [B, L/hop + 1, n_fft + 2] = [magnitude | phase] per frame (torch.stft,
  centred, reflect pad, periodic Hann of n_fft taps, one-sided; abs and angle).
- `istft`: [B, frames, n_fft + 2] -> [B, (frames - 1) * hop] (torch.istft, centred, same window).
  attr `spec`: "polar" (row = [magnitude | phase]) or "exp_sin" (row = [log magnitude | u],
  magnitude exp(.), phase sin(u): the iSTFTNet head after conv_post).
- `random_fill`: seed [1] i32 -> f32 tensor of attr `shape` (extents may be dim expressions),
  uniform [0, 1) or standard normal, from a counter-based splitmix64 stream (random_fill_f32.c).
  Production replacement for upstream's torch.rand / torch.randn_like; never bit-equal to torch.

    {"op": "harmonic_source", "in": {"f0": "f0", "init_phase": "rand_ini", "noise": "sine_noise"},
     "w": {"mix_w": "src_w", "mix_b": "src_b"}, "attrs": {"upsample": 300}, "out": "har_source"}
"""
from __future__ import annotations

from kcc.kernels.registry import F32, I64, IN_F32, IN_I32, OUT_F32, WEIGHT, Contract, Kernel, register
from kcc.ops.core import BindContext, OpDef, c_float, define_op, expect

MAX_HARM = 64      # KCC_SINE_MAX_HARM in sine_source_f32.c
MAX_FFT = 64       # KCC_STFT_MAX_FFT in stft_f32.c
SPECS = {"polar": 0, "exp_sin": 1}
DISTS = {"uniform": 0, "normal": 1}

register(Kernel(
    name="kcc_harmonic_noise_source_f32",
    source="sine_source_f32.c",
    args=(("f0", IN_F32), ("init_phase", IN_F32), ("noise", IN_F32), ("mix_w", WEIGHT), ("mix_b", WEIGHT),
          ("n_batch", I64), ("n_frame", I64), ("n_noise_rows", I64), ("up", I64), ("n_harm", I64),
          ("sample_rate", F32), ("sine_amp", F32), ("noise_std", F32), ("voiced_threshold", F32),
          ("out", OUT_F32)),
    contract=Contract(
        accumulation="phase: f32 ops in torch's order (interpolation index/blend as fmaf, as torch's "
                     "AVX2/AVX-512 kernels contract them), cumsum in f64 rounded per prefix like torch's "
                     "CPU cumsum, so the phase is bit-equal to torch's; sinf/tanhf (libm, <=1 ulp); the "
                     "9-term merge in f64",
        tolerance=2e-5,
        notes="differences vs torch come from sin/tanh ulps (Sleef vs libm) and the merge order only; "
              "expect ~1e-7 abs. Must be built without FP contraction beyond the explicit fmaf "
              "(the strict ISO C11 flags give that on GCC)"),
))

register(Kernel(
    name="kcc_hann_window_f32",
    source="stft_window_f32.c",
    args=(("n_fft", I64), ("win", OUT_F32)),
    contract=Contract(accumulation="f32, torch.hann_window's formula and order", tolerance=1.2e-7,
                      notes="shared helper of the STFT kernels (cosf may differ from torch's by 1 ulp)"),
))

register(Kernel(
    name="kcc_stft_polar_f32",
    source="stft_f32.c",
    requires=("kcc_hann_window_f32",),
    args=(("x", IN_F32), ("n_batch", I64), ("n_len", I64), ("n_fft", I64), ("hop", I64), ("out", OUT_F32)),
    contract=Contract(
        accumulation="windowed samples rounded to f32 (as torch), direct DFT, |X| and atan2 in f64, "
                     "each output rounded once",
        tolerance=2e-5,
        notes="torch uses pocketfft in f32 (a few ulps of the frame energy); a bin with a negative real "
              "part and an imaginary part within that rounding of zero can land on the other side of "
              "the -pi/pi cut (a 2*pi phase difference); DC and Nyquist are exactly real (+pi for < 0)"),
))

register(Kernel(
    name="kcc_istft_f32",
    source="istft_f32.c",
    requires=("kcc_hann_window_f32",),
    args=(("x", IN_F32), ("n_batch", I64), ("n_frames", I64), ("n_fft", I64), ("hop", I64), ("mode", I64),
          ("out", OUT_F32)),
    contract=Contract(
        accumulation="bins m*cos(p), m*sin(p) in f32 (as torch's complex path); inverse DFT, windowing, "
                     "overlap-add and the squared-window envelope in f64; each output rounded once",
        tolerance=2e-5,
        notes="relative to the output scale: the error is torch's own f32 irfft/overlap-add rounding; "
              "refuses (before writing) an envelope below 1e-11 as torch does"),
))

register(Kernel(
    name="kcc_random_fill_f32",
    source="random_fill_f32.c",
    args=(("seed", IN_I32), ("stream", I64), ("dist", I64), ("n", I64), ("out", OUT_F32)),
    contract=Contract(
        accumulation="splitmix64 counter stream, 53-bit uniforms, Box-Muller in f64",
        tolerance=0.0,
        notes="deterministic per (seed, stream, index); statistically, not bitwise, like torch.rand/randn"),
))


def _times(factor: int, e):
    """Extent factor*e: an int, or a C expression string."""
    return factor * e if isinstance(e, int) else f"({factor}*{e})"


# -- harmonic_source ---------------------------------------------------------------------------

def _src_infer(name, ins, ws, a):
    f0, ini, noise = ins["f0"], ins["init_phase"], ins["noise"]
    up = a["upsample"]
    expect(isinstance(up, int) and up >= 1, name, f"attr upsample must be an integer >= 1, got {up!r}")
    expect(len(f0) == 2, name, f"f0 must be [B, frames], got {list(f0)}")
    expect(len(ws["mix_w"]) == 2 and ws["mix_w"][0] == 1, name,
           f"mix_w must be [1, harmonics] (the merge Linear's weight), got {list(ws['mix_w'])}")
    h = ws["mix_w"][1]
    expect(1 <= h <= MAX_HARM, name, f"{h} harmonics; the kernel supports 1..{MAX_HARM}")
    expect(tuple(ws["mix_b"]) == (1,), name, f"mix_b must be [1], got {list(ws['mix_b'])}")
    expect(len(ini) == 2 and ini[0] == f0[0] and ini[1] == h, name,
           f"init_phase must be [{f0[0]}, {h}], got {list(ini)}")
    expect(len(noise) == 3 and noise[0] == f0[0] and noise[2] == h, name,
           f"noise must be [{f0[0]}, {up}*frames, {h}], got {list(noise)}")
    want = _times(up, f0[1])
    if isinstance(noise[1], int) and isinstance(want, int):
        expect(noise[1] == want, name, f"noise has {noise[1]} rows, expected upsample*frames = {want}")
    expect(a["sample_rate"] > 0, name, f"sample_rate must be > 0, got {a['sample_rate']!r}")
    return (f0[0], want), "f32"


def _src_bind(ctx: BindContext):
    a = ctx.attrs
    return "kcc_harmonic_noise_source_f32", {
        "f0": ctx.in_ptr["f0"], "init_phase": ctx.in_ptr["init_phase"], "noise": ctx.in_ptr["noise"],
        "mix_w": ctx.w_ptr["mix_w"], "mix_b": ctx.w_ptr["mix_b"], "n_batch": ctx.dim("f0", 0),
        "n_frame": ctx.dim("f0", 1), "n_noise_rows": ctx.dim("noise", 1), "up": str(a["upsample"]),
        "n_harm": str(ctx.w_shape["mix_w"][1]), "sample_rate": c_float(a["sample_rate"]),
        "sine_amp": c_float(a["sine_amp"]), "noise_std": c_float(a["noise_std"]),
        "voiced_threshold": c_float(a["voiced_threshold"]), "out": ctx.out_ptr,
    }


define_op(OpDef("harmonic_source", ("f0", "init_phase", "noise"), ("mix_w", "mix_b"),
                {"upsample": None, "sample_rate": 24000.0, "sine_amp": 0.1, "noise_std": 0.003,
                 "voiced_threshold": 10.0},
                _src_infer, _src_bind))


# -- stft / istft ------------------------------------------------------------------------------

def _fft_attrs(name, a):
    n, hop = a["n_fft"], a["hop"]
    expect(isinstance(n, int) and 2 <= n <= MAX_FFT and n % 2 == 0, name,
           f"n_fft must be an even integer in [2, {MAX_FFT}], got {n!r}")
    expect(isinstance(hop, int) and 1 <= hop <= n, name, f"hop must be an integer in [1, n_fft], got {hop!r}")
    return n, hop


def _stft_infer(name, ins, ws, a):
    n, hop = _fft_attrs(name, a)
    x = ins["x"]
    expect(len(x) == 2, name, f"x must be [B, samples], got {list(x)}")
    if isinstance(x[1], int):
        expect(x[1] > n // 2, name, f"{x[1]} samples is too short for reflect padding of {n // 2}")
        frames = x[1] // hop + 1
    else:
        frames = f"({x[1]}/{hop}+1)"
    return (x[0], frames, n + 2), "f32"


def _stft_bind(ctx: BindContext):
    return "kcc_stft_polar_f32", {
        "x": ctx.in_ptr["x"], "n_batch": ctx.dim("x", 0), "n_len": ctx.dim("x", 1),
        "n_fft": str(ctx.attrs["n_fft"]), "hop": str(ctx.attrs["hop"]), "out": ctx.out_ptr}


def _istft_infer(name, ins, ws, a):
    n, hop = _fft_attrs(name, a)
    expect(a["spec"] in SPECS, name, f"spec {a['spec']!r} is not one of {sorted(SPECS)}")
    x = ins["x"]
    expect(len(x) == 3 and x[2] == n + 2, name, f"x must be [B, frames, {n + 2}], got {list(x)}")
    if isinstance(x[1], int):
        expect(x[1] >= 2, name, f"{x[1]} frames; the inverse needs at least 2")
        length = (x[1] - 1) * hop
    else:
        length = f"(({x[1]}-1)*{hop})"
    return (x[0], length), "f32"


def _istft_bind(ctx: BindContext):
    return "kcc_istft_f32", {
        "x": ctx.in_ptr["x"], "n_batch": ctx.dim("x", 0), "n_frames": ctx.dim("x", 1),
        "n_fft": str(ctx.attrs["n_fft"]), "hop": str(ctx.attrs["hop"]),
        "mode": str(SPECS[ctx.attrs["spec"]]), "out": ctx.out_ptr}


define_op(OpDef("stft", ("x",), (), {"n_fft": None, "hop": None}, _stft_infer, _stft_bind))
define_op(OpDef("istft", ("x",), (), {"n_fft": None, "hop": None, "spec": "polar"}, _istft_infer, _istft_bind))


# -- random_fill -------------------------------------------------------------------------------

def _rng_infer(name, ins, ws, a):
    expect(tuple(ins["seed"]) == (1,), name, f"seed must be a [1] i32 tensor, got {list(ins['seed'])}")
    expect(isinstance(a["dist"], str) and a["dist"] in DISTS, name, f"dist {a['dist']!r} is not one of {sorted(DISTS)}")
    expect(isinstance(a["stream"], int) and a["stream"] >= 0, name,
           f"stream must be an integer >= 0, got {a['stream']!r}")
    shape = a["shape"]
    expect(isinstance(shape, list) and shape and all((isinstance(e, int) and e >= 1) or isinstance(e, str)
                                                     for e in shape), name,
           f"shape must be a non-empty list of positive ints or dim expressions, got {shape!r}")
    return tuple(shape), "f32"


def _rng_bind(ctx: BindContext):
    n = ctx.numel(ctx.out_shape)
    return "kcc_random_fill_f32", {
        "seed": ctx.in_ptr["seed"], "stream": str(ctx.attrs["stream"]),
        "dist": str(DISTS[ctx.attrs["dist"]]), "n": n, "out": ctx.out_ptr}


define_op(OpDef("random_fill", ("seed",), (), {"shape": None, "dist": None, "stream": 0}, _rng_infer, _rng_bind))
