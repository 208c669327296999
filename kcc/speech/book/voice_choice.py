"""The book's declared language -> a G2P language and a default voice.

The one place `kcc book` asks which voice speaks a language, so it can follow the project's
language table when there is one; today it takes the catalog's voices by their language
(kcc.speech.voices: the name's first letter), upstream's first-listed voice where present.
"""
from __future__ import annotations

import warnings
from pathlib import Path

from kcc.speech.g2p import G2PError, canonical_language
from kcc.speech.voices import DEFAULT_VOICE, voice_catalog

FALLBACK_LANG = "en-us"
_UPSTREAM_FIRST = {"en-us": "af_heart", "en-gb": "bf_emma", "ja": "jf_alpha", "zh": "zf_xiaobei", "es": "ef_dora",
                   "fr-fr": "ff_siwis", "hi": "hf_alpha", "it": "if_sara", "pt-br": "pf_dora"}


def book_language(declared: str | None) -> str:
    """A BCP 47 tag as books declare it ('en', 'en-GB', 'fr_FR', 'ja-JP') -> a kcc language;
    an unknown or missing one is English, with a warning when one was declared."""
    if not declared:
        return FALLBACK_LANG
    tag = declared.strip().lower().replace("_", "-")
    for candidate in (tag, tag.split("-")[0]):
        try:
            lang = canonical_language(candidate)
        except G2PError:
            continue
        if lang != "auto":
            return lang
    warnings.warn(f"the book's language {declared!r} is not one kcc speaks; reading it as {FALLBACK_LANG}",
                  stacklevel=2)
    return FALLBACK_LANG


def default_voice(lang: str, voices_dirs: list[Path] | tuple = ()) -> str:
    catalog = voice_catalog(voices_dirs)
    if _UPSTREAM_FIRST.get(lang) in catalog:
        return _UPSTREAM_FIRST[lang]
    same = sorted(name for name, info in catalog.items() if info.language == lang)
    return same[0] if same else DEFAULT_VOICE
