"""The arrays kcc.KPipeline hands out where upstream kokoro hands out torch tensors.

Upstream programs call `.numpy()`, `.cpu().numpy()`, `.detach()` or `.to('cpu')` on
Result.audio and Result.pred_dur. A TensorLike is a numpy array that also answers those calls
(each returns the same data), so those programs run whether or not torch is installed: torch is
not a kcc dependency (~1 s and ~300 MB to import), and a real tensor would make every caller
pay for it. Everything numpy, soundfile and IPython accept, it is."""
from __future__ import annotations

import numpy as np


class TensorLike(np.ndarray):
    """A numpy array with torch's device / conversion calls as no-ops on the CPU."""

    @classmethod
    def of(cls, array) -> "TensorLike":
        return np.asarray(array).view(cls)

    def numpy(self, *, force: bool = False) -> np.ndarray:
        """The plain numpy array (a view of the same data), as tensor.numpy() gives."""
        return self.view(np.ndarray)

    def cpu(self) -> "TensorLike":
        return self

    def detach(self) -> "TensorLike":
        return self

    def to(self, *args, **kwargs) -> "TensorLike":
        """tensor.to('cpu') / .to(torch.float32)-style calls: the data is on the CPU already."""
        return self

    @property
    def device(self) -> str:
        return "cpu"
