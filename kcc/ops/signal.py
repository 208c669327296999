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

import numpy as np

from kcc.kernels.registry import Contract, F32, I64, IN_F32, IN_I32, Kernel, OUT_F32, WEIGHT, c_constant, register
from kcc.ops.core import BindContext, Case, OpDef, c_float, define_op, expect

MAX_HARM = c_constant("sine_source_f32.c", "KCC_SINE_MAX_HARM")
MAX_FFT = c_constant("stft_window_f32.c", "KCC_STFT_MAX_FFT")
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


def _lerp(n_in: int, n_out: int, scale: float):
    """torch's linear interpolation (align_corners=False) from n_in to n_out points: left and
    right source indices and the right weight."""
    src = np.maximum(scale * (np.arange(n_out) + 0.5) - 0.5, 0.0)
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    return i0, np.where(i0 < n_in - 1, i0 + 1, i0), np.clip(src - i0, 0.0, 1.0)


def _src_reference(ins, ws, a):
    """SineGen + the merge Linear + tanh in f64 (see the module docstring and sine_source_f32.c)."""
    f0, ini, noise = (ins[r].astype(np.float64) for r in ("f0", "init_phase", "noise"))
    up, (b, n) = a["upsample"], f0.shape
    h = ws["mix_w"].shape[1]
    f0_up = f0[:, np.minimum(np.arange(n * up) // up, n - 1)]                        # [B, L]
    rad = np.mod(f0_up[..., None] * np.arange(1, h + 1) / a["sample_rate"], 1.0)     # [B, L, H]
    rad[:, 0, 1:] += ini[:, 1:]
    d0, d1, wd = _lerp(n * up, n, float(up))
    phase = np.cumsum(rad[:, d0] * (1 - wd)[:, None] + rad[:, d1] * wd[:, None], axis=1) * 2 * np.pi * up
    u0, u1, wu = _lerp(n, n * up, 1.0 / up)
    phase = phase[:, u0] * (1 - wu)[:, None] + phase[:, u1] * wu[:, None]
    uv = (f0_up > a["voiced_threshold"]).astype(np.float64)[..., None]
    amp = uv * a["noise_std"] + (1 - uv) * a["sine_amp"] / 3
    s = np.sin(phase) * a["sine_amp"] * uv + amp * noise
    return np.tanh(s @ ws["mix_w"].astype(np.float64)[0] + float(ws["mix_b"][0]))


def _src_cases():
    rng = np.random.default_rng(110)

    def case(name, b, n, up, h, sample_rate):
        f0 = np.abs(120 + 60 * rng.standard_normal((b, n))).astype(np.float32)
        f0[:, ::3] = 0.0                                                               # unvoiced frames
        return Case(name, {"f0": f0, "init_phase": rng.random((b, h)).astype(np.float32),
                           "noise": rng.standard_normal((b, up * n, h)).astype(np.float32)},
                    {"mix_w": (rng.standard_normal((1, h)) / np.sqrt(h)).astype(np.float32),
                     "mix_b": rng.standard_normal(1).astype(np.float32)},
                    {"upsample": up, "sample_rate": sample_rate})
    return [case("nine_harmonics", 2, 5, 6, 9, 400.0), case("fundamental_only", 1, 3, 7, 1, 1000.0),
            case("one_frame", 1, 1, 4, 2, 900.0)]


def _src_cost(v) -> int:
    """Per output sample and harmonic: phase step, cumsum, wrap, sin, amplitude, voicing,
    noise (10); then the merge Linear and tanh (2 per harmonic + 2)."""
    h = v.w["mix_w"][1]
    return v.n_out * (12 * h + 2)


define_op(OpDef("harmonic_source", ("f0", "init_phase", "noise"), ("mix_w", "mix_b"),
                {"upsample": None, "sample_rate": 24000.0, "sine_amp": 0.1, "noise_std": 0.003,
                 "voiced_threshold": 10.0},
                _src_infer, _src_bind, reference=_src_reference, cases=_src_cases, cost=_src_cost))


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


def _hann(n: int) -> np.ndarray:
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)                         # periodic


def _stft_reference(ins, ws, a):
    """torch.stft (centred, reflect pad, periodic Hann, one-sided) as [|X| | angle X] by a direct
    DFT in f64; DC and Nyquist are exactly real, as in the kernel (+pi when negative)."""
    n, hop = a["n_fft"], a["hop"]
    x = np.pad(ins["x"].astype(np.float64), [(0, 0), (n // 2, n // 2)], mode="reflect")
    frames = ins["x"].shape[1] // hop + 1
    idx = np.arange(frames)[:, None] * hop + np.arange(n)[None, :]
    seg = x[:, idx] * _hann(n)                                                        # [B, F, n]
    k = np.arange(n // 2 + 1)[:, None] * np.arange(n)[None, :] * 2 * np.pi / n
    re, im = seg @ np.cos(k).T, -(seg @ np.sin(k).T)
    im[..., 0] = im[..., -1] = 0.0
    return np.concatenate([np.hypot(re, im), np.arctan2(im, re)], axis=-1)


def _istft_reference(ins, ws, a):
    """torch.istft (centred, periodic Hann, window-square envelope) in f64."""
    n, hop = a["n_fft"], a["hop"]
    x = ins["x"].astype(np.float64)
    b, frames, _ = x.shape
    mag, ph = x[..., :n // 2 + 1], x[..., n // 2 + 1:]
    if a["spec"] == "exp_sin":
        mag, ph = np.exp(mag), np.sin(ph)
    seg = np.fft.irfft(mag * np.exp(1j * ph), n=n, axis=-1) * _hann(n)               # [B, F, n]
    total = n + hop * (frames - 1)
    out, env = np.zeros((b, total)), np.zeros(total)
    for f in range(frames):
        out[:, f * hop:f * hop + n] += seg[:, f]
        env[f * hop:f * hop + n] += _hann(n) ** 2
    keep = slice(n // 2, n // 2 + (frames - 1) * hop)
    return out[:, keep] / env[keep]


def _phase_cut(out: np.ndarray, slack: float = 1e-3) -> np.ndarray:
    """[|X| | angle X] with every phase moved into (-pi + slack, pi + slack]: a bin whose imaginary
    part is rounding noise around zero (every bin of the reflection-symmetric frame 0) has angle
    +pi or -pi by that noise's sign, in torch as in the kernel; the reference cannot know which."""
    bins = out.shape[-1] // 2
    ph = out[..., bins:].astype(np.float64)
    return np.concatenate([out[..., :bins], np.where(ph <= -np.pi + slack, ph + 2 * np.pi, ph)], axis=-1)


def _fft_cases(istft: bool):
    def cases():
        rng = np.random.default_rng(120 + istft)
        out = []
        for name, (b, length, n, hop, spec) in {"kokoro_20_5": (2, 37, 20, 5, "polar"),
                                                "n16_hop4_exp_sin": (1, 23, 16, 4, "exp_sin"),
                                                "n8_hop8": (1, 9, 8, 8, "polar"),
                                                "n4_hop1": (1, 6, 4, 1, "polar")}.items():
            attrs = {"n_fft": n, "hop": hop, **({"spec": spec} if istft else {})}
            if istft:
                if hop > n // 2:
                    continue                                   # the window-square envelope has zeros
                x = np.concatenate([np.abs(rng.standard_normal((b, length, n // 2 + 1))) * (spec == "polar")
                                    + 0.5 * rng.standard_normal((b, length, n // 2 + 1)) * (spec != "polar"),
                                    3 * rng.standard_normal((b, length, n // 2 + 1))], axis=-1)
            else:
                x = rng.standard_normal((b, length))
            out.append(Case(name, {"x": x.astype(np.float32)}, attrs=attrs))
        return out
    return cases


def _stft_cost(v) -> int:
    b, frames, width = v.out
    n, bins = width - 2, width // 2
    return b * frames * (n + 4 * n * bins + 4 * bins)        # window, direct DFT, |X| and angle


def _istft_cost(v) -> int:
    b, frames, width = v.ins["x"]
    n, bins = width - 2, width // 2
    spec = 6 if v.attrs["spec"] == "exp_sin" else 4           # to rectangular (+ exp, sin)
    return b * frames * (spec * bins + 4 * n * bins + 3 * n) + v.n_out


define_op(OpDef("stft", ("x",), (), {"n_fft": None, "hop": None}, _stft_infer, _stft_bind,
                reference=_stft_reference, cases=_fft_cases(False), cost=_stft_cost, compare_as=_phase_cut))
define_op(OpDef("istft", ("x",), (), {"n_fft": None, "hop": None, "spec": "polar"}, _istft_infer, _istft_bind,
                reference=_istft_reference, cases=_fft_cases(True), cost=_istft_cost))


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


def _mix64(z):
    z = z + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def rng_reference(seed: int, stream: int, dist: str, n: int) -> np.ndarray:
    """random_fill_f32.c's stream in numpy: splitmix64 counters; Box-Muller with numpy's libm in
    f64 (the C's own ln / sincos round to the same f32 but for rare last-bit ties)."""
    with np.errstate(over="ignore"):
        key = _mix64(np.array([seed & 0xFFFFFFFF], np.uint64)) ^ _mix64(np.array([stream + 0x632BE59BD9B4E019], np.uint64))
        i = np.arange(n + (n & 1), dtype=np.uint64)
        bits = _mix64(key + (i + np.uint64(1)) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(11)
    u = (bits.astype(np.float64) + 0.5) / 2.0 ** 53
    if dist == "uniform":
        return np.minimum(u[:n].astype(np.float32), np.float32(1 - 2 ** -24))
    r, th = np.sqrt(-2.0 * np.log(u[0::2])), 2.0 * np.pi * u[1::2]
    z = np.empty(u.size, np.float32)
    z[0::2], z[1::2] = (r * np.cos(th)).astype(np.float32), (r * np.sin(th)).astype(np.float32)
    return z[:n]


def _rng_reference(ins, ws, a):
    shape = tuple(a["shape"])
    return rng_reference(int(ins["seed"][0]), a["stream"], a["dist"], int(np.prod(shape))).reshape(shape)


def _rng_cases():
    seed = lambda v: {"seed": np.array([v], np.int32)}  # noqa: E731
    return [Case("uniform", seed(12345), attrs={"shape": [2, 5, 3], "dist": "uniform"}),
            Case("normal_odd_count", seed(-7), attrs={"shape": [1, 37], "dist": "normal", "stream": 1}),
            Case("normal_past_a_block", seed(4242), attrs={"shape": [3, 300], "dist": "normal", "stream": 9})]


define_op(OpDef("random_fill", ("seed",), (), {"shape": None, "dist": None, "stream": 0}, _rng_infer, _rng_bind,
                reference=_rng_reference, cases=_rng_cases,
                cost=lambda v: (5 if v.attrs["dist"] == "normal" else 1) * v.n_out))  # Box-Muller log/sqrt/cos/mul
