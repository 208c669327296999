"""Import upstream kokoro==0.9.4 model code without its G2P pipeline.

`kokoro/__init__.py` imports KPipeline, which pulls misaki[en] (spaCy and friends). The model
modules do not need it, so the package is registered with its search path but without running
its __init__, and the submodules import normally from the installed wheel.
"""
from __future__ import annotations

import importlib
import importlib.util
import json
import sys
import types
from pathlib import Path

CONFIG_DIR = Path(__file__).with_name("configs")
KOKORO_VERSION = "0.9.4"


def kokoro_modules():
    """Return (model, modules, istftnet) from the installed kokoro package."""
    if "kokoro" not in sys.modules:
        spec = importlib.util.find_spec("kokoro")
        if spec is None or not spec.submodule_search_locations:
            raise ImportError("kokoro==0.9.4 is not installed (pip install --no-deps kokoro==0.9.4)")
        pkg = types.ModuleType("kokoro")
        pkg.__path__ = list(spec.submodule_search_locations)
        pkg.__spec__ = spec          # importlib.util.find_spec("kokoro") must still answer
        pkg.__file__ = spec.origin
        pkg.__version__ = KOKORO_VERSION
        sys.modules["kokoro"] = pkg
    return (importlib.import_module("kokoro.model"), importlib.import_module("kokoro.modules"),
            importlib.import_module("kokoro.istftnet"))


def load_config(name_or_path: str) -> dict:
    """'small' / 'full' name a config in oracle/configs; anything else is a JSON path."""
    path = CONFIG_DIR / f"{name_or_path}.json"
    if not path.exists():
        path = Path(name_or_path)
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def versions() -> dict:
    import numpy
    import torch
    import transformers
    return {"kokoro": KOKORO_VERSION, "torch": torch.__version__,
            "transformers": transformers.__version__, "numpy": numpy.__version__}


def kmodel_from_path(path, config: str = "full", disable_complex: bool = False):
    """Upstream KModel on the checkpoint at `path`, loaded by upstream's own loader, with proof
    that every saved tensor arrived (KModel's fallback load is strict=False and would not say)."""
    import torch
    model_mod, _, _ = kokoro_modules()
    kmodel = model_mod.KModel(repo_id="hexgrad/Kokoro-82M", config=load_config(config), model=str(path),
                              disable_complex=disable_complex).eval()
    saved = torch.load(path, map_location="cpu", weights_only=True)
    for section, state in saved.items():
        live = getattr(kmodel, section).state_dict()
        for k, v in state.items():
            if not torch.equal(live[k[7:] if k.startswith("module.") else k], v):
                raise RuntimeError(f"upstream KModel did not load {section}.{k}")
    return kmodel
