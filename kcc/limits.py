"""Every resource limit kcc enforces, read from the constants the code checks (the README's
Limits table is generated from this list by scripts/update_readme.py, so it cannot drift)."""
from __future__ import annotations

from kcc.compiler.artifact_eviction import MAX_CACHED_ARTIFACTS_PER_MODEL
from kcc.files import TEMP_MAX_AGE_S
from kcc.model.kokoro import MAX_PHONEMES, MAX_SEED, MAX_SPEED, MIN_SPEED
from kcc.model.loader import MAX_MAX_FRAMES, MIN_MAX_FRAMES
from kcc.speech.batch.item import DEFAULT_MAX_CHARS
from kcc.speech.batch.manifest import MAX_FIELD_BYTES, MAX_ID_BYTES, MAX_MANIFEST_BYTES
from kcc.speech.book.bounds import LIMITS as BOOK
from kcc.speech.book.layout import ITEM_CHARS
from kcc.speech.g2p.overrides import MAX_LEXICON_BYTES
from kcc.speech.cli.say import MAX_TEXT_BYTES
from kcc.speech.request import STREAM_FIRST_PHONEMES, STREAM_GROWTH
from kcc.speech.text import PACK_PHONEMES
from kcc.speech.serve.app import HttpLimits
from kcc.speech.serve.connection import ConnectionLimits
from kcc.speech.serve.listener import FD_HEADROOM, MAX_OPEN_CEILING, ListenerLimits
from kcc.speech.serve.service import G2P_PIECE_CHARS
from kcc.speech.serve.service import Limits as ServiceLimits
from kcc.speech.serve.voice_set import CACHE_PACKS
from kcc.speech.serve.wyoming_events import WyomingLimits
from kcc.speech.worker_budget import MAX_WORKERS, SERVER_BASE_BYTES, WORKER_MEMORY_BYTES
from kcc.speech.voice_design.run import MAX_MINUTES
from kcc.speech.voice_design.target import MAX_TARGET_BYTES, MAX_TARGET_S, MIN_VOICE_S
from kcc.speech.voices import MAX_BLEND_PARTS, MAX_STYLE_ABS, PLAUSIBLE_ABS
from kcc.weights.bounded_read import CHECKPOINT_LIMITS, VOICE_BANK_LIMITS, VOICE_LIMITS


def _mib(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB" if n >= 1 << 20 else f"{n // 1024} KiB"


def _table() -> list[tuple[str, str, str]]:
    app, svc, conn, wy, lis = HttpLimits(), ServiceLimits(), ConnectionLimits(), WyomingLimits(), ListenerLimits()
    rows = []
    for what, lim in (("checkpoint (.pth / .npz)", CHECKPOINT_LIMITS), ("voice file (.pt / .npy)", VOICE_LIMITS),
                      ("voice bank (.npz)", VOICE_BANK_LIMITS)):
        rows.append((what, "file / unpacked / per tensor / all tensors",
                     f"{_mib(lim.max_file_bytes)} / {_mib(lim.max_unpacked_bytes)} / "
                     f"{_mib(lim.max_tensor_bytes)} / {_mib(lim.max_total_bytes)}"))
    rows += [
        ("checkpoint", "zip members / pickle bytes / storage references",
         f"{CHECKPOINT_LIMITS.max_members} / {_mib(CHECKPOINT_LIMITS.max_pickle_bytes)} / {CHECKPOINT_LIMITS.max_storage_refs}"),
        ("voice", "largest style value |x| a file may hold / a voice may have (real voices: 3.2)",
         f"{MAX_STYLE_ABS:g} / {PLAUSIBLE_ABS:g}"),
        ("voice", "voices in a blend (say, batch, server, Wyoming)", str(MAX_BLEND_PARTS)),
        ("text", "`--text-file` size", _mib(MAX_TEXT_BYTES)),
        ("text", "phonemes per chunk (fewer at slow speeds; longer words are cut) / whole sentences share "
         "a chunk up to (a longer sentence is a chunk of its own)", f"{MAX_PHONEMES} / {PACK_PHONEMES}"),
        ("say / synth", "speed; `--max-frames`; `--threads`",
         f"{MIN_SPEED:g}-{MAX_SPEED:g}; {MIN_MAX_FRAMES}-{MAX_MAX_FRAMES}; 1 to the cores available"),
        ("request (every door)", "seed; a stream's first chunk (phonemes, ending at a sentence, clause or comma, "
                                 "else before a phrase's first word, else past 3x at a word) and each next one's "
                                 "growth; a whole file's chunks end only where the text does",
         f"0-{MAX_SEED}; {STREAM_FIRST_PHONEMES}; {STREAM_GROWTH:g}x"),
        ("server", "a streamed chunk's phonemes: first / most (a whole file: as `kcc say`)",
         f"{svc.first_chunk_phonemes} / {svc.chunk_phonemes}"),
        ("server", "input characters / body bytes / requests in flight",
         f"{app.max_input_chars} / {_mib(app.max_body_bytes)} / {app.max_connections}"),
        ("server", "synthesis workers / queue (503 past it) / request deadline",
         f"{svc.workers} / {svc.max_queue} / {svc.request_timeout_s:g} s"),
        ("server", "cached voice packs", str(CACHE_PACKS)),
        ("server", "request body must arrive within", f"{app.body_timeout_s:g} s"),
        ("server, wyoming", "open connections, idle ones included (past it the oldest idle one is closed; `--max-open`)",
         f"the file limit less {FD_HEADROOM} (the soft limit is raised to the hard one), at most {MAX_OPEN_CEILING}"),
        ("server, wyoming", "first byte / TLS handshake must arrive within; failed accepts logged at most once per",
         f"{lis.first_byte_s:g} s / {lis.takeover_s:g} s; {lis.log_interval_s:g} s"),
        ("server", "request head must arrive within / writes paused (client not reading) at most",
         f"{conn.head_timeout_s:g} s / {conn.write_stall_s:g} s"),
        ("server", "a response's writing, first byte to last; a stream's reader may fall behind real time by",
         f"{app.response_timeout_s:g} s; {app.read_lag_s:g} s"),
        ("server", "characters per G2P call (cancel and deadline checked between)", str(G2P_PIECE_CHARS)),
        ("serve, wyoming, batch, book", "`--workers` at most; memory budget: base + per synthesis worker "
                                         "(`--workers` past the available memory is refused)",
         f"{MAX_WORKERS}; {_mib(SERVER_BASE_BYTES)} + {_mib(WORKER_MEMORY_BYTES)}"),
        ("wyoming", "event header / data / payload bytes; writes paused at most",
         f"{_mib(wy.max_header_bytes)} / {_mib(wy.max_data_bytes)} / {_mib(wy.max_payload_bytes)}; "
         f"{wy.write_stall_s:g} s"),
        ("wyoming", "next event must arrive within: the first / after an answer / in an open text stream",
         f"{wy.first_event_s:g} s / {wy.idle_s:g} s / {wy.streaming_idle_s:g} s"),
        ("batch", "characters per item / id bytes", f"{DEFAULT_MAX_CHARS} / {MAX_ID_BYTES}"),
        ("batch", "manifest size (counted as read) / one field (longer: a rejected line)",
         f"{_mib(MAX_MANIFEST_BYTES)} / {_mib(MAX_FIELD_BYTES)}"),
        ("lexicon", "file size (counted as read)", _mib(MAX_LEXICON_BYTES)),
        ("files", "a kcc temporary whose process may still live is swept after", f"{TEMP_MAX_AGE_S // 3600} h"),
        ("cache", "compiled models kept per model (one per `--max-frames`, options and kcc version; the least "
                  "recently used goes first, one a process has loaded never)", str(MAX_CACHED_ARTIFACTS_PER_MODEL)),
        ("book", "input file / chapters / characters per chapter / per book",
         f"{_mib(BOOK.max_file_bytes)} / {BOOK.max_chapters} / {BOOK.max_chapter_chars} / {BOOK.max_book_chars}"),
        ("book (EPUB zip)", "members / one member unpacked / all unpacked / unpacked:packed ratio",
         f"{BOOK.max_members} / {_mib(BOOK.max_member_bytes)} / {_mib(BOOK.max_unpacked_bytes)} / {BOOK.max_ratio}:1"),
        ("book", "HTML nesting depth / PDF pages / characters per synthesis item",
         f"{BOOK.max_depth} / {BOOK.max_pdf_pages} / {ITEM_CHARS}"),
        ("book (reading work)", "markup bytes parsed / document nodes / PDF content-stream bytes (a stream counted "
                                "on every page that draws it)",
         f"{_mib(BOOK.max_parse_bytes)} / {BOOK.max_nodes} / {_mib(BOOK.max_pdf_content_bytes)}"),
        ("voice design", "target recording: voice at least / audio at most / file bytes / `--minutes` at most",
         f"{MIN_VOICE_S:g} s / {MAX_TARGET_S / 60:g} min / {_mib(MAX_TARGET_BYTES)} / {MAX_MINUTES}"),
    ]
    return rows


LIMITS = _table()
