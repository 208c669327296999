"""Audiobooks (`kcc book INPUT -o OUT`): a book file -> chapters -> batch items -> one .m4b with
chapter markers, or one audio file per chapter, with captions and JSON sidecars.

sources.py reads EPUB / Markdown / HTML / plain text / PDF into a Book (text.py), through
markup.py (HTML / XHTML: linear scans, libxml2, one tree walk, page furniture dropped) and
pdf.py (running heads dropped, the outline as chapters), all within bounds.py's limits and work
budget; layout.py cuts its chapters into batch items and records where each sits; the batch engine
(kcc.speech.batch) synthesises the items, resumably, locally or on Ray; assemble.py joins a
chapter's items with the configured pauses into its file (tagged: tags.py), sidecar and
captions (captions.py, also the whole book's); m4b.py writes the one-file audiobook; job.py runs the whole thing, cli.py is its command line.
"""
from __future__ import annotations

# The per-chapter audio formats (-o DIR --format): here, not in assemble.py (numpy, the encoder,
# the word timestamps' G2P), so that `kcc book --help` lists them without importing those.
AUDIO_FORMATS = ("wav", "flac", "mp3", "opus", "aac")
