"""The speaker encoder's weights: resemblyzer 0.1.4's pretrained.pt (Apache-2.0), read without torch.

The wheel (15.7 MB) is fetched once with `pip download --no-deps` (so neither torch nor librosa,
its declared dependencies, is installed) into the kcc cache, checked against its pinned SHA-256,
and its pretrained.pt (17.1 MB, a legacy torch pickle: kcc.weights.torch_legacy) checked against
its own pinned digest. What is kept: the GE2E encoder's 3-layer LSTM (40 -> 256) and its
256 -> 256 projection, as float32 numpy arrays keyed as in torch.
"""
from __future__ import annotations

import os
import zipfile
from pathlib import Path

import numpy as np

from kcc.files import cache_subdir, exclusive_lock, file_sha256
from kcc.weights.real_model import FetchError, download_pinned
from kcc.weights.torch_legacy import load_legacy_torch

WHEEL = ("resemblyzer", "0.1.4", "8f12eb2f1a9982d32e8db7856de754709b59c93a77bcf0ff536584b619a9dd1f")
WHEEL_FILE = "Resemblyzer-0.1.4-py3-none-any.whl"
MEMBER = "resemblyzer/pretrained.pt"
WEIGHTS_SHA256 = "39373b86598fa3da9fcddee6142382efe09777e8d37dc9c0561f41f0070f134e"
LAYERS, HIDDEN, N_MELS = 3, 256, 40
LABEL = "resemblyzer 0.1.4 GE2E speaker encoder (Apache-2.0)"
ENV_WEIGHTS = "KCC_SPEAKER_ENCODER"          # a pretrained.pt already on disk (offline machines)


class SpeakerEncoderError(FetchError):
    """The encoder's weights cannot be had or are not the pinned ones; the message says which."""


def weights_path(cache: Path | None = None, log=None) -> Path:
    """pretrained.pt in the cache (fetched and checked once), or $KCC_SPEAKER_ENCODER when set."""
    given = os.environ.get(ENV_WEIGHTS)
    path = Path(given) if given else (cache or cache_subdir("speaker_encoder")) / "pretrained.pt"
    if path.is_file() and file_sha256(path) == WEIGHTS_SHA256:
        return path
    if given:
        raise SpeakerEncoderError(f"{ENV_WEIGHTS}={given}: not resemblyzer 0.1.4's pretrained.pt "
                                  f"(SHA-256 {WEIGHTS_SHA256})")
    path.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(path.parent / ".fetch.lock"):
        if not (path.is_file() and file_sha256(path) == WEIGHTS_SHA256):
            wheel = download_pinned(path.parent / "wheels", [(*WHEEL, WHEEL_FILE)], "the speaker encoder (resemblyzer 0.1.4, "
                                     "about 16 MB)", log)[0]
            with zipfile.ZipFile(wheel) as z:
                blob = z.read(MEMBER)
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            tmp.write_bytes(blob)
            if file_sha256(tmp) != WEIGHTS_SHA256:
                tmp.unlink()
                raise SpeakerEncoderError(f"{wheel}: {MEMBER} differs from the pinned SHA-256 {WEIGHTS_SHA256}")
            os.replace(tmp, path)
    return path


def load_weights(path: Path | None = None, log=None) -> dict[str, np.ndarray]:
    """{'lstm.weight_ih_l0': ..., 'linear.weight': ..., ...} as float32 arrays."""
    path = path or weights_path(log=log)
    if file_sha256(path) != WEIGHTS_SHA256:
        raise SpeakerEncoderError(f"{path}: not resemblyzer 0.1.4's pretrained.pt (SHA-256 {WEIGHTS_SHA256})")
    state = load_legacy_torch(path)["model_state"]
    names = [f"lstm.{kind}_l{i}" for i in range(LAYERS) for kind in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
    names += ["linear.weight", "linear.bias"]
    return {n: np.asarray(state[n], dtype=np.float32) for n in names}
