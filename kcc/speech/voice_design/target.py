"""The target recording(s): decoded (any container PyAV reads), mono, resampled to the encoder's
16 kHz, checked, and reduced to one speaker embedding.

Each refusal is a named TargetAudioError (a ValueError): not audio, silence, too short
(< MIN_VOICE_S of voice after pauses are trimmed), too long (> MAX_TARGET_S, checked on the
container's declared duration before decoding and again on the samples). A recording whose
1.6 s partials disagree with each other (several speakers) is kept, with a
SeveralVoicesWarning; one that never pauses between syllables (music, noise) is refused.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kcc.speech.voice_design import mel
from kcc.speech.voice_design.mel import resample
from kcc.speech.voice_design.pitch import pitch_stats
from kcc.speech.voice_design.encoder import SpeakerEncoder, unit

MIN_VOICE_S = 3.0
MAX_TARGET_S = 300.0                      # 5 minutes: the embedding saturates long before
MAX_TARGET_BYTES = 512 << 20              # the file itself, before any decoding
SILENT_PEAK = 1e-3                        # -60 dBFS: nothing to hear
# Mean cosine of each 1.6 s partial to the recording's mean embedding. One kcc voice speaking two
# sentences: 0.915..0.924 (af_heart, am_adam, bf_emma, bm_george); two of them taking turns every
# 2 s: 0.838..0.869 (tests/test_voice_design_target.py). A real one-speaker recording can score as
# low: JFK's 11 s inaugural excerpt (a 1961 broadcast, whisper.cpp's sample) 0.842. So it warns
# and asks, never refuses.
MIN_CONSISTENCY = 0.89
# Speech stops and starts: the share of 20 ms frames quieter than half the mean RMS (Scheirer &
# Slaney's low-energy ratio) is 0.33..0.35 on kcc speech with its pauses trimmed; sustained
# notes 0.07, steady noise 0.0.
MIN_LOW_ENERGY_RATIO = 0.15


class TargetAudioError(ValueError):
    """A target recording cannot be used; the message names the file and why."""


class NotAudioError(TargetAudioError):
    """The file is not audio a decoder reads (or has no audio stream)."""


class SilentTargetError(TargetAudioError):
    """The recording holds no audible voice."""


class TargetTooShortError(TargetAudioError):
    """Less than MIN_VOICE_S seconds of voice once pauses are trimmed."""


class TargetTooLongError(TargetAudioError):
    """Longer than MAX_TARGET_S seconds (or MAX_TARGET_BYTES on disk)."""


class NotSpeechError(TargetAudioError):
    """The recording sounds like music or noise: no syllables, no pauses between them."""


class SeveralVoicesWarning(UserWarning):
    """The recording's parts sound like different speakers (or music): the design aims at their mean."""


def decode(path: str | Path) -> tuple[np.ndarray, int]:
    """(mono float32 samples, their rate) of any audio file PyAV opens."""
    import av
    path = Path(path)
    if not path.is_file():
        raise NotAudioError(f"{path}: no such file")
    if path.stat().st_size > MAX_TARGET_BYTES:
        raise TargetTooLongError(f"{path}: {path.stat().st_size >> 20} MiB; a target is at most "
                                 f"{MAX_TARGET_BYTES >> 20} MiB and {MAX_TARGET_S:.0f} s")
    try:
        with av.open(str(path)) as box:
            if not box.streams.audio:
                raise NotAudioError(f"{path}: no audio stream")
            stream = box.streams.audio[0]
            rate = stream.rate or stream.codec_context.sample_rate
            if box.duration is not None and box.duration / 1e6 > MAX_TARGET_S + 1:
                raise TargetTooLongError(f"{path}: {box.duration / 1e6:.0f} s; a target is at most {MAX_TARGET_S:.0f} s")
            to_mono = av.AudioResampler(format="flt", layout="mono", rate=rate)
            parts, total = [], 0
            for frame in box.decode(stream):
                for out in to_mono.resample(frame):
                    parts.append(out.to_ndarray().reshape(-1))
                    total += parts[-1].size
                if total > (MAX_TARGET_S + 1) * rate:
                    raise TargetTooLongError(f"{path}: longer than {MAX_TARGET_S:.0f} s")
            for out in to_mono.resample(None):
                parts.append(out.to_ndarray().reshape(-1))
    except TargetAudioError:
        raise
    except (av.error.FFmpegError, ValueError, UnicodeDecodeError) as exc:
        raise NotAudioError(f"{path}: not audio kcc can decode ({type(exc).__name__}: {exc})") from None
    wav = np.concatenate(parts) if parts else np.zeros(0, np.float32)
    if wav.size == 0:
        raise NotAudioError(f"{path}: the audio stream holds no samples")
    return wav.astype(np.float32), int(rate)


@dataclass
class Target:
    embedding: np.ndarray                 # [256] unit vector
    voiced_s: float                       # seconds of voice the encoder heard
    consistency: float                    # mean cosine of the partials to the mean
    f0: float = 0.0                       # median pitch of the voiced frames, Hz (0: none heard)


def check_voice(wav16k: np.ndarray, name: str) -> np.ndarray:
    """The preprocessed (volume, pauses) 16 kHz waveform, or the named error for silence or too short."""
    wav16k = np.nan_to_num(np.asarray(wav16k, dtype=np.float32))
    if wav16k.size == 0 or float(np.abs(wav16k).max()) < SILENT_PEAK:
        raise SilentTargetError(f"{name}: silence (peak below -60 dBFS): nothing to design a voice from")
    if wav16k.size > (MAX_TARGET_S + 1) * mel.SAMPLE_RATE:
        raise TargetTooLongError(f"{name}: {wav16k.size / mel.SAMPLE_RATE:.0f} s; a target is at most {MAX_TARGET_S:.0f} s")
    voiced = mel.preprocess(wav16k)
    if voiced.size < MIN_VOICE_S * mel.SAMPLE_RATE:
        raise TargetTooShortError(f"{name}: {voiced.size / mel.SAMPLE_RATE:.1f} s of voice once pauses are trimmed "
                                  f"({wav16k.size / mel.SAMPLE_RATE:.1f} s in all); a target needs at least {MIN_VOICE_S:.0f} s")
    ratio = low_energy_ratio(voiced)
    if ratio < MIN_LOW_ENERGY_RATIO:
        raise NotSpeechError(f"{name}: does not sound like speech (low-energy ratio {ratio:.2f}, speech has "
                             f">= {MIN_LOW_ENERGY_RATIO}): music or noise? Give a recording of one person speaking")
    return voiced


def low_energy_ratio(wav16k: np.ndarray, frame: int = 320) -> float:
    """The share of 20 ms frames whose RMS is below half the mean frame RMS."""
    n = wav16k.size // frame
    rms = np.sqrt(np.mean(wav16k[:n * frame].reshape(n, frame).astype(np.float64) ** 2, axis=1))
    return float(np.mean(rms < 0.5 * rms.mean())) if n else 0.0


def embed_target(wavs: list[tuple[np.ndarray, int, str]], encoder: SpeakerEncoder) -> Target:
    """One embedding for one or more recordings [(samples, rate, name)]: the normed mean of every
    partial of every recording (each recording weighs by its length)."""
    partials, seconds = [], 0.0
    for wav, rate, name in wavs:
        voiced = check_voice(resample(wav, rate), name)
        seconds += voiced.size / mel.SAMPLE_RATE
        partials.append(encoder.partials(voiced))
    every = np.concatenate(partials)
    mean = unit(every.mean(axis=0))
    consistency = float((every @ mean).mean())
    if consistency < MIN_CONSISTENCY:
        warnings.warn(f"the target's parts differ (consistency {consistency:.3f} < {MIN_CONSISTENCY}): several "
                      "speakers, or one recorded in changing conditions? The design aims at their average voice", SeveralVoicesWarning, stacklevel=2)
    # the pitch the design must keep near: each recording's median, weighed by its length
    heard = [(pitch_stats(wav, rate)[0], wav.size / rate) for wav, rate, _ in wavs]
    heard = [(f, s) for f, s in heard if f > 0]
    f0 = sum(f * s for f, s in heard) / sum(s for _, s in heard) if heard else 0.0
    return Target(mean, seconds, consistency, f0)


def load_targets(paths: list[str | Path], encoder: SpeakerEncoder) -> Target:
    return embed_target([(*decode(p), str(p)) for p in paths], encoder)
