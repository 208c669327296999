"""A chapter's (or the whole book's) captions: the product's one caption writer
(kcc.speech.audio.captions), a cue also ending where a new item (paragraph, title) starts."""
from __future__ import annotations

from pathlib import Path

from kcc.files import AtomicFile
from kcc.speech.audio.captions import FORMATS, cues, render  # noqa: F401  (the one caption writer; re-exported)


def write_captions(path: Path, words: list[dict], fmt: str, breaks: set[int] = frozenset()) -> Path:
    """The one caption writer of `kcc book` (a chapter's and the whole book's): words -> cues ->
    `fmt`, written atomically."""
    data = render(cues(words, breaks), fmt).encode("utf-8")
    with AtomicFile(path) as out:
        out.fh.write(data)
        return out.commit()


def item_breaks(words: list[dict]) -> set[int]:
    """Indexes of the words that start a new item (a paragraph, a title): a cue ends before them."""
    return {i for i, w in enumerate(words) if i and w["item"] != words[i - 1]["item"]}
