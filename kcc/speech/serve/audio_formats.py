"""The server's response formats: the product's one table (kcc.speech.audio_formats), less the
formats a streamed response cannot carry (m4a: MP4 is finished by seeking back)."""
from kcc.speech.audio_formats import FORMATS as _ALL, STREAMABLE, Encoder, Format, encode  # noqa: F401

FORMATS = {name: fmt for name, fmt in _ALL.items() if name in STREAMABLE}
