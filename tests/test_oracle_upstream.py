"""The oracle's model-only import of upstream kokoro must look like a normal package afterwards.

oracle.upstream registers `kokoro` without running its __init__ (which pulls the G2P stack).
Other tests then ask importlib whether kokoro is installed and import kokoro.pipeline; both
broke once (find_spec raised "kokoro.__spec__ is None", 10 errors in CI).
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

pytest.importorskip("torch")
if importlib.util.find_spec("kokoro") is None:
    pytest.skip("kokoro==0.9.4 is not installed (pip install -e .[dev])", allow_module_level=True)

PROBE = """
import importlib.util, sys
from oracle.upstream import kokoro_modules
model, modules, istftnet = kokoro_modules()
spec = importlib.util.find_spec("kokoro")
assert spec is not None and spec.submodule_search_locations, spec
assert sys.modules["kokoro"].__version__ == "0.9.4"
assert hasattr(model, "KModel") and hasattr(istftnet, "Decoder")
print("ok", spec.name)
"""


def test_registered_kokoro_still_has_a_spec():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok kokoro"
