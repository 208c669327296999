"""Every resource limit kcc enforces, read from the constants the code checks (the README's
Limits table is generated from this list by scripts/update_readme.py, so it cannot drift)."""
from __future__ import annotations


def _mib(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n // 1024} KiB"


def _table() -> list[tuple[str, str, str]]:
    from kcc.speech.batch.item import DEFAULT_MAX_CHARS
    from kcc.speech.batch.manifest import MAX_ID_BYTES
    from kcc.speech.book.bounds import LIMITS as BOOK
    from kcc.speech.book.layout import ITEM_CHARS
    from kcc.weights.bounded_read import CHECKPOINT_LIMITS, VOICE_BANK_LIMITS, VOICE_LIMITS
    from kcc.model.kokoro import MAX_PHONEMES
    from kcc.speech.say import MAX_MAX_FRAMES, MAX_SPEED, MAX_TEXT_BYTES, MIN_MAX_FRAMES, MIN_SPEED
    from kcc.speech.serve.app import HttpLimits
    from kcc.speech.serve.service import Limits as ServiceLimits
    from kcc.speech.serve.voice_set import CACHE_PACKS, MAX_BLEND_PARTS
    from kcc.speech.voices import MAX_STYLE_ABS
    app, svc = HttpLimits(), ServiceLimits()
    rows = []
    for what, lim in (("checkpoint (.pth / .npz)", CHECKPOINT_LIMITS), ("voice file (.pt / .npy)", VOICE_LIMITS),
                      ("voice bank (.npz)", VOICE_BANK_LIMITS)):
        rows.append((what, "file / unpacked / per tensor / all tensors",
                     f"{_mib(lim.max_file_bytes)} / {_mib(lim.max_unpacked_bytes)} / "
                     f"{_mib(lim.max_tensor_bytes)} / {_mib(lim.max_total_bytes)}"))
    rows += [
        ("checkpoint", "zip members / pickle bytes / storage references",
         f"{CHECKPOINT_LIMITS.max_members} / {_mib(CHECKPOINT_LIMITS.max_pickle_bytes)} / {CHECKPOINT_LIMITS.max_storage_refs}"),
        ("voice", "largest style value |x| (real voices stay below 2)", f"{MAX_STYLE_ABS:g}"),
        ("text", "`--text-file` size", _mib(MAX_TEXT_BYTES)),
        ("text", "phonemes per chunk (fewer at slow speeds; longer words are cut)", str(MAX_PHONEMES)),
        ("say / synth", "speed; `--max-frames`; `--threads`",
         f"{MIN_SPEED:g}-{MAX_SPEED:g}; {MIN_MAX_FRAMES}-{MAX_MAX_FRAMES}; 1 to the cores available"),
        ("server", "input characters / body bytes / requests in flight",
         f"{app.max_input_chars} / {_mib(app.max_body_bytes)} / {app.max_connections}"),
        ("server", "synthesis workers / queue (503 past it) / request deadline",
         f"{svc.workers} / {svc.max_queue} / {svc.request_timeout_s:g} s"),
        ("server", "voices in a blend / cached voice packs", f"{MAX_BLEND_PARTS} / {CACHE_PACKS}"),
        ("server", "request body must arrive within", f"{app.body_timeout_s:g} s"),
        ("batch", "characters per item / id bytes", f"{DEFAULT_MAX_CHARS} / {MAX_ID_BYTES}"),
        ("book", "input file / chapters / characters per chapter / per book",
         f"{_mib(BOOK.max_file_bytes)} / {BOOK.max_chapters} / {BOOK.max_chapter_chars} / {BOOK.max_book_chars}"),
        ("book (EPUB zip)", "members / one member unpacked / all unpacked / unpacked:packed ratio",
         f"{BOOK.max_members} / {_mib(BOOK.max_member_bytes)} / {_mib(BOOK.max_unpacked_bytes)} / {BOOK.max_ratio}:1"),
        ("book", "HTML nesting depth / PDF pages / characters per synthesis item",
         f"{BOOK.max_depth} / {BOOK.max_pdf_pages} / {ITEM_CHARS}"),
    ]
    return rows


LIMITS = _table()
