"""A chapter's captions: the product's one caption writer (kcc.speech.audio.captions), a cue
also ending where a new item (paragraph, title) starts."""
from __future__ import annotations

from kcc.speech.audio.captions import FORMATS, cues, render  # noqa: F401  (re-exported for kcc.speech.book)
