"""The book's declared language -> a G2P language and a default voice.

The one place `kcc book` asks which voice speaks a language: the project's language table
(kcc.speech.languages) through kcc.speech.voices, as `kcc say` and the server ask it.
"""
from __future__ import annotations

import warnings
from pathlib import Path

from kcc.speech.languages import from_tag
from kcc.speech.voices import default_voice_for, voice_catalog

FALLBACK_LANG = "en-us"


def book_language(declared: str | None) -> str:
    """A BCP 47 tag as books declare it ('en', 'en-GB', 'fr_FR', 'ja-JP') -> a kcc language
    (kcc.speech.languages.from_tag); an unknown or missing one is English, with a warning when
    one was declared."""
    if not declared:
        return FALLBACK_LANG
    lang = from_tag(declared)
    if not lang:
        warnings.warn(f"the book's language {declared!r} is not one kcc speaks; reading it as {FALLBACK_LANG}",
                      stacklevel=2)
    return lang or FALLBACK_LANG


def default_voice(lang: str, voices_dirs: list[Path] | tuple = ()) -> str:
    """The voice that reads a book in `lang` when none is asked for: the one every front-end picks
    (kcc.speech.voices.default_voice_for), offered the catalog with the user's voice directories."""
    return default_voice_for(lang, voice_catalog(voices_dirs))
