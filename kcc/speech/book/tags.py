"""Tags on a per-chapter audio file (mutagen), so a player lists the chapters of `-o DIR` as a
book's tracks: title (the chapter's), album (the book's title), artist (its author), track
number of total. FLAC and Opus carry Vorbis comments, MP3 and WAV an ID3 tag; raw AAC (ADTS) has
no tag format and stays untagged (the .m4b carries the book's tags and chapters instead)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

TAGGED = ("flac", "opus", "mp3", "wav")


@dataclass(frozen=True)
class ChapterTags:
    title: str
    album: str
    artist: str
    track: int
    total: int


def tag_chapter(path: str | Path, fmt: str, tags: ChapterTags) -> bool:
    """Tags the file `path` (of audio format `fmt`) in place; False for a format without tags."""
    if fmt in ("flac", "opus"):
        from mutagen.flac import FLAC
        from mutagen.oggopus import OggOpus
        f = (FLAC if fmt == "flac" else OggOpus)(str(path))
        if f.tags is None:
            f.add_tags()
        f.tags["title"], f.tags["album"] = [tags.title], [tags.album]
        f.tags["tracknumber"], f.tags["tracktotal"] = [str(tags.track)], [str(tags.total)]
        if tags.artist:
            f.tags["artist"] = [tags.artist]
        f.save()
        return True
    if fmt in ("mp3", "wav"):
        from mutagen.id3 import ID3, TALB, TIT2, TPE1, TRCK
        from mutagen.wave import WAVE
        frames = [TIT2(encoding=3, text=tags.title), TALB(encoding=3, text=tags.album),
                  TRCK(encoding=3, text=f"{tags.track}/{tags.total}")]
        if tags.artist:
            frames.append(TPE1(encoding=3, text=tags.artist))
        if fmt == "wav":
            f = WAVE(str(path))
            if f.tags is None:
                f.add_tags()
            for frame in frames:
                f.tags.add(frame)
            f.save()
        else:
            id3 = ID3()
            for frame in frames:
                id3.add(frame)
            id3.save(str(path))
        return True
    return False


def read_chapter_tags(path: str | Path) -> dict[str, str]:
    """title / album / artist / track as mutagen reads them back (what the tests check)."""
    import mutagen
    f = mutagen.File(str(path))
    if f is None or f.tags is None:
        return {}
    t = f.tags
    if hasattr(t, "getall"):                   # ID3
        got = {k: str(t[f].text[0]) for k, f in (("title", "TIT2"), ("album", "TALB"), ("artist", "TPE1"),
                                                   ("track", "TRCK")) if f in t}
        return got
    return {k: t[v][0] for k, v in (("title", "title"), ("album", "album"), ("artist", "artist"),
                                     ("track", "tracknumber")) if v in t}
