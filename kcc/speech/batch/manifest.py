"""Batch manifests -> items: JSONL (one object per line), CSV (a header row of the same
columns), or plain text (one utterance per line, id = the line number).

Columns: id, text or phonemes (exactly one), and optional voice, lang, speed, seed, format; a
missing option takes the batch default. A line that cannot become an item (bad JSON, a bad id,
both or neither of text / phonemes, a bad option, a repeated id) becomes a `Rejected` record
naming the line and the reason; reading goes on. Ids become file names, so only safe names pass:
no path separators, no leading dot ('.', '..', hidden files), no control characters, at most
MAX_ID_BYTES of UTF-8, and not a name the batch itself writes.
"""
from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Iterator

from kcc.files import read_user_file
from kcc.speech.batch.audio import FORMATS
from kcc.speech.g2p.g2p import G2PError, canonical_language, decode_text
from kcc.speech.engine import check_seed, check_speed

COLUMNS = ("id", "text", "phonemes", "voice", "lang", "speed", "seed", "format")
OPTIONS = ("voice", "lang", "speed", "seed", "format")
MAX_ID_BYTES = 200                       # leaves room for '.json' / '.opus' and the temp-file prefix
MAX_MANIFEST_BYTES = 256 << 20           # read counting bytes: `kcc batch /dev/zero` ends, by name
MAX_FIELD_BYTES = 128 << 10              # one field (a text, an id...); a longer one is a Rejected line
RUN_MANIFEST = "kcc-batch.json"          # the run manifest in OUTDIR
RESERVED_IDS = frozenset({"kcc-batch"})  # its stem: no item may write kcc-batch.json


class ManifestError(ValueError):
    """The manifest as a whole cannot be read (missing, too large, not UTF-8, a CSV without an id
    column, a CSV quote left open)."""


def _has_surrogate(s: str) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in s)


def shown(value) -> str | None:
    """`value` as text that can be written anywhere (a lone surrogate, which JSON escapes can
    carry, as its \\udxxx escape), or None when it is not a string."""
    if not isinstance(value, str):
        return None
    return value.encode("utf-8", "backslashreplace").decode("utf-8") if _has_surrogate(value) else value


def text_problem(record: dict) -> str | None:
    """Why a record's keys or string values cannot be an item's text (a lone surrogate: not
    encodable as UTF-8 in a file name, a sidecar or the run manifest; a field over
    MAX_FIELD_BYTES), or None."""
    for key, value in record.items():
        for what, s in (("a column name", key), (f"column {shown(key)!r}", value)):
            if isinstance(s, str) and _has_surrogate(s):
                return f"{what} is not valid text (a lone surrogate: {shown(s)[:60]!r})"
            if isinstance(s, str) and len(s) > MAX_FIELD_BYTES // 4 and len(s.encode("utf-8")) > MAX_FIELD_BYTES:
                return f"{what} holds {len(s.encode('utf-8'))} bytes; a field may hold at most {MAX_FIELD_BYTES >> 10} KiB"
    return None


@dataclass(frozen=True)
class Defaults:
    voice: str | None = None
    lang: str = "en-us"
    speed: float = 1.0
    seed: int = 0
    format: str = "wav"


@dataclass(frozen=True)
class Item:
    id: str
    line: int                            # 1-based line of the manifest (CSV: the record's first line)
    text: str | None = None
    phonemes: str | None = None
    voice: str | None = None
    lang: str = "en-us"
    speed: float = 1.0
    seed: int = 0
    format: str = "wav"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Rejected:
    line: int
    reason: str
    id: str | None = None                # the id as given, when there was one
    extra: dict = field(default_factory=dict)


def id_problem(item_id) -> str | None:
    """Why `item_id` cannot be a file name in OUTDIR, or None when it can."""
    if not isinstance(item_id, str):
        return f"id must be a string, got {type(item_id).__name__}"
    if not item_id:
        return "id is empty"
    if "/" in item_id or "\\" in item_id:
        return "id contains a path separator"
    if item_id.startswith("."):
        return "id starts with '.' (no '.', '..' or hidden names)"
    if any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in item_id):
        return "id contains a control character"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in item_id):
        return "id is not valid UTF-8"
    if item_id != item_id.strip():
        return "id starts or ends with whitespace"
    if len(item_id.encode("utf-8")) > MAX_ID_BYTES:
        return f"id is longer than {MAX_ID_BYTES} bytes"
    if item_id.lower() in RESERVED_IDS:
        return f"id {item_id!r} is reserved (the run manifest is {RUN_MANIFEST})"
    return None


def check_option(name: str, value, defaults: Defaults):
    """A validated option value (the default when missing); raises ValueError naming the problem."""
    if value is None or value == "":
        return getattr(defaults, name)
    if name == "voice":
        if not isinstance(value, str) or not value.strip():
            raise ValueError("voice must be a non-empty string")
        if "/" in value or "\\" in value:
            raise ValueError(f"voice {value!r}: a manifest names catalog voices, not paths")
        return value.strip()
    if name == "lang":
        if not isinstance(value, str):
            raise ValueError(f"lang must be a string, got {value!r}")
        return canonical_language(value)      # its G2PError is a ValueError naming the choices
    if name == "format":
        if value not in FORMATS:
            raise ValueError(f"format {value!r} is not one of {', '.join(FORMATS)}")
        return value
    if name == "speed":
        return check_speed(value)            # a SayError is a ValueError
    if name == "seed":
        return check_seed(value)             # the one seed check (kcc.speech.engine); a SayError is a ValueError
    raise AssertionError(name)


def make_item(record: dict, line: int, defaults: Defaults) -> Item | Rejected:
    """One manifest record (already a dict) -> an Item, or a Rejected naming why not."""
    raw_id = record.get("id")
    if isinstance(raw_id, int) and not isinstance(raw_id, bool):
        raw_id = str(raw_id)
    problem = id_problem(raw_id) or text_problem(record)
    if problem:
        return Rejected(line, problem, shown(raw_id))
    unknown = sorted(set(record) - set(COLUMNS))
    if unknown:
        return Rejected(line, f"unknown column(s) {unknown}; columns are {', '.join(COLUMNS)}", raw_id)
    text, phonemes = record.get("text") or None, record.get("phonemes") or None
    if (text is None) == (phonemes is None):
        return Rejected(line, "give exactly one of text and phonemes (non-empty)", raw_id)
    content = text if text is not None else phonemes
    if not isinstance(content, str):
        return Rejected(line, f"{'text' if text is not None else 'phonemes'} must be a string", raw_id)
    if not content.strip():
        return Rejected(line, "text is empty", raw_id)
    try:
        options = {name: check_option(name, record.get(name), defaults) for name in OPTIONS}
    except ValueError as exc:
        return Rejected(line, str(exc), raw_id)
    return Item(raw_id, line, text, phonemes, **options)


def _jsonl_records(lines: list[str]) -> Iterator[tuple[int, dict | str]]:
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            yield n, f"not valid JSON: {exc.msg} at column {exc.colno}"
            continue
        except (ValueError, RecursionError) as exc:      # a 5000-digit number; brackets nested past the stack
            yield n, f"not a JSON record kcc reads: {type(exc).__name__}: {str(exc)[:120]}"
            continue
        yield n, obj if isinstance(obj, dict) else f"expected a JSON object, got {type(obj).__name__}"


def _csv_records(text: str) -> Iterator[tuple[int, dict | str]]:
    # csv's own field limit (128 KiB, process-wide) would stop the reader mid-file; the whole
    # text is bounded by MAX_MANIFEST_BYTES, and a long field becomes a Rejected line (make_item).
    # strict: a quote left open does not swallow the records after it (the next quote, followed
    # by anything but a delimiter, or the end of the file inside quotes, is an error).
    csv.field_size_limit(max(csv.field_size_limit(), MAX_MANIFEST_BYTES))
    reader = csv.DictReader(io.StringIO(text, newline=""), strict=True)
    line = 1
    try:
        if not reader.fieldnames or "id" not in reader.fieldnames:
            raise ManifestError(f"CSV manifest needs a header row with an 'id' column, got {reader.fieldnames}")
        line = reader.line_num + 1
        for row in reader:
            if None in row:
                yield line, f"{len(row[None])} more field(s) than the header has"
            else:
                yield line, {k: v for k, v in row.items() if v not in (None, "")}
            line = reader.line_num + 1
    except csv.Error as exc:
        raise ManifestError(f"CSV manifest line {line}: {exc} (a quote opened on this line and never closed?); "
                            "nothing was run") from None


def _text_records(lines: list[str]) -> Iterator[tuple[int, dict]]:
    for n, line in enumerate(lines, 1):
        if line.strip():
            yield n, {"id": str(n), "text": line.strip()}


def detect_kind(path: Path) -> str:
    suffix = path.suffix.lower()
    return {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".csv": "csv"}.get(suffix, "text")


def read_manifest(path: str | Path, defaults: Defaults = Defaults(), kind: str | None = None) -> list[Item | Rejected]:
    """Every record of the manifest, in order: Items, and Rejected for what cannot be one.
    A repeated id (compared case-folded: OUTDIR may be on a case-insensitive disk) is Rejected
    at its second and later lines; the first keeps it. `kind`: jsonl, csv or text (default:
    from the suffix, .jsonl / .ndjson / .json / .csv, anything else is text)."""
    path = Path(path)
    data = read_user_file(path, MAX_MANIFEST_BYTES, "manifest", ManifestError)
    try:
        text = decode_text(data, f"manifest {path}")
    except G2PError as exc:
        raise ManifestError(str(exc)) from None
    text = text.removeprefix("\ufeff")
    kind = kind or detect_kind(path)
    lines = text.splitlines()
    records = {"jsonl": lambda: _jsonl_records(lines), "csv": lambda: _csv_records(text),
               "text": lambda: _text_records(lines)}
    if kind not in records:
        raise ManifestError(f"manifest kind {kind!r} is not one of {', '.join(records)}")
    return items_from_records(records[kind](), defaults)


def items_from_records(records, defaults: Defaults = Defaults()) -> list[Item | Rejected]:
    """(line, dict or a reason string) pairs -> Items and Rejected, repeated ids rejected."""
    out: list[Item | Rejected] = []
    seen: dict[str, int] = {}
    for line, rec in records:
        got = make_item(rec, line, defaults) if isinstance(rec, dict) else Rejected(line, rec)
        if isinstance(got, Item):
            first = seen.setdefault(got.id.casefold(), line)
            if first != line:
                got = Rejected(line, f"id {got.id!r} repeats the id on line {first}", got.id)
        out.append(got)
    return out


def item_from_dict(d: dict) -> Item:
    """The inverse of Item.to_dict (items travel as dicts to Ray workers)."""
    return replace(Item(d["id"], d["line"]), **{k: d[k] for k in COLUMNS[1:] if k in d})
