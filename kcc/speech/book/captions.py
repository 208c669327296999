"""Word timestamps -> SRT / WebVTT cues: words grouped into lines a reader can take in, a cue
ending at a sentence end, at a pause between items, or past CUE_SECONDS / CUE_CHARS."""
from __future__ import annotations

from pathlib import Path

from kcc.files import AtomicFile

CUE_SECONDS, CUE_CHARS = 6.0, 84
FORMATS = ("srt", "vtt")


def cues(words: list[dict], breaks: set[int] = frozenset()) -> list[tuple[float, float, str]]:
    """words: [{word, start_s, end_s}]; breaks: indexes of words that start a new item."""
    out, cur = [], []
    for i, w in enumerate(words):
        if not w["word"].strip():
            continue
        if cur and (i in breaks or w["end_s"] - cur[0]["start_s"] > CUE_SECONDS
                    or sum(len(x["word"]) + 1 for x in cur) + len(w["word"]) > CUE_CHARS):
            out.append(_cue(cur))
            cur = []
        cur.append(w)
        if w["word"].rstrip("\"'”’)»").endswith((".", "!", "?", "…")) and len(cur) > 2:
            out.append(_cue(cur))
            cur = []
    if cur:
        out.append(_cue(cur))
    return out


def _cue(ws: list[dict]) -> tuple[float, float, str]:
    text = ""
    for w in ws:
        glue = "" if not text or w["word"][:1] in ",.;:!?)”’…" else " "
        text += glue + w["word"]
    return ws[0]["start_s"], ws[-1]["end_s"], text


def _stamp(t: float, sep: str) -> str:
    ms = int(round(t * 1000))
    return f"{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}{sep}{ms % 1000:03d}"


def render(cue_list: list[tuple[float, float, str]], fmt: str) -> str:
    if fmt == "srt":
        return "".join(f"{n}\n{_stamp(a, ',')} --> {_stamp(b, ',')}\n{t}\n\n"
                       for n, (a, b, t) in enumerate(cue_list, 1))
    if fmt == "vtt":
        return "WEBVTT\n\n" + "".join(f"{_stamp(a, '.')} --> {_stamp(b, '.')}\n{t}\n\n" for a, b, t in cue_list)
    raise ValueError(f"subtitle format {fmt!r} is not one of {', '.join(FORMATS)}")


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
