"""Audiobooks (`kcc book INPUT -o OUT`): a book file -> chapters -> batch items -> one .m4b with
chapter markers, or one audio file per chapter, with captions and JSON sidecars.

sources.py reads EPUB / Markdown / HTML / plain text / PDF into a Book (bounded: bounds.py);
layout.py cuts its chapters into batch items and records where each sits; the batch engine
(kcc.speech.batch) synthesises the items, resumably, locally or on Ray; assemble.py joins a
chapter's items with the configured pauses into its file, sidecar and captions; m4b.py writes
the one-file audiobook; job.py runs the whole thing, cli.py is its command line.
"""
