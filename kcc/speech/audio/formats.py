"""Every audio format kcc writes: the one table of formats, and the format a file name asks for.

FORMATS is the one table of formats: its name (the server's response_format, `kcc say
--format`, a batch manifest's format), the file extensions that choose it, its media type and
its FFmpeg muxer and codec. `kcc say`, the server, Wyoming and batch all encode through it
(kcc.speech.audio.encoder). A table only, with neither numpy nor PyAV: every command line lists
its names in --help without loading an encoder.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kcc.model.kokoro import SAMPLE_RATE

@dataclass(frozen=True)
class Format:
    container: str            # FFmpeg muxer
    codec: str                # FFmpeg encoder
    media_type: str
    bit_rate: int | None = None
    options: tuple[tuple[str, str], ...] = ()
    extensions: tuple[str, ...] = ()     # file name endings that choose it (`kcc say -o`), lower case


FORMATS: dict[str, Format] = {
    "mp3": Format("mp3", "libmp3lame", "audio/mpeg", 64_000, extensions=(".mp3",)),
    # Ogg holds pages back up to 1 s by default; 100 ms pages let a stream start sooner.
    "opus": Format("ogg", "libopus", "audio/ogg; codecs=opus", 48_000, (("page_duration", "100000"),),
                   extensions=(".opus", ".ogg")),
    # AAC in ADTS: what a .aac file is; .m4a names the MP4 container (a seekable file only)
    "aac": Format("adts", "aac", "audio/aac", 64_000, extensions=(".aac",)),
    "m4a": Format("ipod", "aac", "audio/mp4", 64_000, extensions=(".m4a",)),
    "flac": Format("flac", "flac", "audio/flac", extensions=(".flac",)),
    "wav": Format("wav", "pcm_s16le", "audio/wav", extensions=(".wav",)),
    "pcm": Format("s16le", "pcm_s16le", f"audio/pcm;rate={SAMPLE_RATE};channels=1;encoding=s16le",
                  extensions=(".pcm", ".raw")),
}
# Formats a stream can carry (no seek back to finish the file): all but MP4's m4a. The server's
# response_format and `kcc say -o -` take these.
STREAMABLE: dict[str, Format] = {name: fmt for name, fmt in FORMATS.items() if name != "m4a"}


class AudioFormatError(ValueError):
    """The format is unknown, or cannot be told from a file name; the message lists the choices."""


def format_for(path: str | None, asked: str | None = None) -> str:
    """The format a file is written in: `asked` (--format) if given, else the one its extension
    names ("-", stdout: wav). An unknown or missing extension, an unknown format, or a format
    the extension contradicts is an AudioFormatError, raised before any synthesis."""
    known = ", ".join(e for f in FORMATS.values() for e in f.extensions)
    if asked is not None and asked not in FORMATS:
        raise AudioFormatError(f"unknown audio format {asked!r}; use one of {', '.join(FORMATS)}")
    if path is None or path == "-":
        if asked == "m4a":
            raise AudioFormatError("m4a (MP4) cannot be streamed to stdout; use aac, mp3, opus, flac or wav")
        return asked or "wav"
    ext = Path(path).suffix.lower()          # ".wav" alone is a hidden file with no extension
    by_ext = next((name for name, f in FORMATS.items() if ext in f.extensions), None)
    if asked is not None:
        if by_ext is not None and by_ext != asked and not {by_ext, asked} <= {"aac", "m4a"}:
            raise AudioFormatError(f"{path}: the extension {ext} names {by_ext}, but --format says {asked}")
        return asked
    if by_ext is None:
        what = f"the extension {ext!r}" if ext else "a name without an extension"
        raise AudioFormatError(f"{path}: {what} names no audio format kcc writes ({known}); "
                               "rename it or pass --format")
    return by_ext
