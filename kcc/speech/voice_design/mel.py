"""The speaker encoder's front-end in numpy: resemblyzer 0.1.4's audio.py without librosa or webrtcvad.

Any rate -> resample (band-limited, by the FFT; also the pitch guard's 8 kHz) -> 16 kHz mono float in
[-1, 1] -> normalize_volume (raise to -30 dBFS, never lower) ->
trim_long_silences (drop pauses longer than ~6 x 30 ms) -> a 40-band mel power spectrogram
(25 ms Hann window, 10 ms hop, centred with zero padding, Slaney mel scale and area norm: the
defaults of librosa.feature.melspectrogram that resemblyzer calls). normalize_volume and the mel
match resemblyzer's to float32 rounding (tests/test_voice_design_encoder.py, against a pinned
capture). The pause trimming keeps resemblyzer's smoothing and dilation but decides "voice" by
frame energy instead of WebRTC's VAD (a C library); on speech the two keep nearly the same
samples, and the encoder averages over 1.6 s windows, so the embedding moves little (measured in
the same test).
"""
from __future__ import annotations

import numpy as np

SAMPLE_RATE = 16_000
N_FFT = 400                     # 25 ms
HOP = 160                       # 10 ms
N_MELS = 40
PARTIAL_FRAMES = 160            # 1.6 s per partial utterance
TARGET_DBFS = -30.0
INT16_MAX = 2 ** 15 - 1
VAD_WINDOW = 480                # 30 ms
VAD_AVERAGE = 8
VAD_MAX_SILENCE = 6
# A 30 ms window is voice when its energy is within this many dB of the loud windows' level (the
# 95th percentile): speech syllables sit within ~30 dB of it, pauses and room tone far below.
VAD_RANGE_DB = 40.0


def resample(wav: np.ndarray, rate: int, to: int = SAMPLE_RATE) -> np.ndarray:
    """Band-limited resampling by the FFT (zero-padded to an even length so both rates' bins line
    up): deterministic, no SciPy; kcc's 24 kHz -> 16 kHz and any recording's rate."""
    wav = np.asarray(wav, dtype=np.float64).reshape(-1)
    if rate == to or wav.size == 0:
        return wav.astype(np.float32)
    n_out = int(round(wav.size * to / rate))
    spec = np.fft.rfft(wav)
    keep = min(spec.size, n_out // 2 + 1)
    out_spec = np.zeros(n_out // 2 + 1, complex)
    out_spec[:keep] = spec[:keep]
    return (np.fft.irfft(out_spec, n_out) * (n_out / wav.size)).astype(np.float32)


def normalize_volume(wav: np.ndarray, target_dbfs: float = TARGET_DBFS) -> np.ndarray:
    """Scale up to `target_dbfs` RMS; a louder input is left as it is (increase only)."""
    rms = np.sqrt(np.mean((wav * INT16_MAX) ** 2))
    change = target_dbfs - 20 * np.log10(rms / INT16_MAX)
    return wav if change < 0 else wav * (10 ** (change / 20))


def voice_windows(wav: np.ndarray) -> np.ndarray:
    """One bool per whole 30 ms window: loud enough to be speech."""
    n = len(wav) // VAD_WINDOW
    energy = np.mean(wav[:n * VAD_WINDOW].reshape(n, VAD_WINDOW).astype(np.float64) ** 2, axis=1)
    level = 10 * np.log10(energy + 1e-20)
    return level > np.percentile(level, 95) - VAD_RANGE_DB if n else np.zeros(0, bool)


def _moving_average(flags: np.ndarray, width: int) -> np.ndarray:
    padded = np.concatenate((np.zeros((width - 1) // 2), flags, np.zeros(width // 2)))
    ret = np.cumsum(padded, dtype=float)
    ret[width:] = ret[width:] - ret[:-width]
    return ret[width - 1:] / width


def _dilate(mask: np.ndarray, width: int) -> np.ndarray:
    """scipy.ndimage.binary_dilation with a centred structuring element of `width` ones."""
    half = width // 2
    padded = np.concatenate((np.zeros(half, bool), mask, np.zeros(width - 1 - half, bool)))
    out = np.zeros_like(mask)
    for k in range(width):
        out |= padded[k:k + len(mask)]
    return out


def trim_long_silences(wav: np.ndarray, flags: np.ndarray | None = None) -> np.ndarray:
    """The waveform with pauses longer than ~VAD_MAX_SILENCE windows cut (resemblyzer's smoothing
    and dilation of the per-window voice flags; `flags` given: those instead of voice_windows)."""
    wav = wav[:len(wav) - len(wav) % VAD_WINDOW]
    flags = voice_windows(wav) if flags is None else np.asarray(flags, bool)
    mask = np.round(_moving_average(flags.astype(float), VAD_AVERAGE)).astype(bool)
    mask = _dilate(mask, VAD_MAX_SILENCE + 1)
    return wav[np.repeat(mask, VAD_WINDOW)]


def _hz_to_mel(f):
    """Slaney's scale: linear below 1 kHz, logarithmic above (librosa htk=False)."""
    f = np.asarray(f, dtype=np.float64)
    min_log_hz, min_log_mel, logstep = 1000.0, 15.0, np.log(6.4) / 27.0
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-10) / min_log_hz) / logstep, f / (200.0 / 3))


def _mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    min_log_hz, min_log_mel, logstep = 1000.0, 15.0, np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), m * (200.0 / 3))


def mel_filters(sr: int = SAMPLE_RATE, n_fft: int = N_FFT, n_mels: int = N_MELS) -> np.ndarray:
    """[n_mels, n_fft/2+1] triangular filters, Slaney-normalised (librosa.filters.mel's defaults)."""
    fft_freqs = np.fft.rfftfreq(n_fft, 1.0 / sr)
    mel_f = _mel_to_hz(np.linspace(_hz_to_mel(0.0), _hz_to_mel(sr / 2.0), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fft_freqs[None, :]
    lower = -ramps[:-2] / fdiff[:-1, None]
    upper = ramps[2:] / fdiff[1:, None]
    weights = np.maximum(0, np.minimum(lower, upper))
    return weights * (2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels]))[:, None]


_FILTERS = mel_filters().astype(np.float32)
_WINDOW = (0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)).astype(np.float32)   # periodic Hann


def mel_spectrogram(wav: np.ndarray) -> np.ndarray:
    """[frames, 40] float32 mel power (not log), frames = 1 + len // 160."""
    y = np.pad(np.asarray(wav, dtype=np.float32), N_FFT // 2)
    n = 1 + (len(y) - N_FFT) // HOP
    frames = np.lib.stride_tricks.sliding_window_view(y, N_FFT)[::HOP][:n]
    power = np.abs(np.fft.rfft(frames * _WINDOW, axis=1)) ** 2
    return (power.astype(np.float32) @ _FILTERS.T).astype(np.float32)


def preprocess(wav: np.ndarray) -> np.ndarray:
    """resemblyzer.preprocess_wav on a 16 kHz waveform: volume up, long pauses out."""
    return trim_long_silences(normalize_volume(np.asarray(wav, dtype=np.float32)))
