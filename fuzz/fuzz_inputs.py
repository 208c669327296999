"""Bounded fuzzing of the files a user hands kcc: batch manifests (CSV, JSONL, plain text),
lexicons (TSV and JSON) and the contents of a --voices-dir.

Each case is a file (or a directory of files) built from pieces that have broken readers before:
quotes left open, delimiters and newlines of every kind, a BOM, NUL and control characters,
JSON escapes of lone surrogates, fields past 128 KiB, deep nesting, repeated keys, bytes that
are not UTF-8; for voices, files of random bytes and shapes under voice suffixes, truncated and
mis-typed arrays, directories and links named like voices. The invariants:

- manifest: read_manifest returns Items and Rejected records, or raises ManifestError; every
  Item's id is a safe file name, every string of every record encodes as UTF-8 (it goes into a
  file name, a sidecar and the run manifest), lines are in order;
- lexicon: load_lexicon returns, or raises LexiconError;
- voices dir: voice_catalog lists it, and load_pack of each name it lists (and of a few that it
  does not) returns a validated (510, 1, 256) float32 pack or raises VoiceError.

Anything else is a finding. Usage:
    python fuzz/fuzz_inputs.py [-n 2000] [--seed 0] [--seconds 60] [--surface manifest|lexicon|voices|all]
tests/test_fuzz_inputs.py runs a short loop of each surface and keeps each finding as a test.
"""
from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE)]      # kcc from this checkout; seeded.py beside this file

import numpy as np  # noqa: E402

from kcc.speech.batch.manifest import Item, ManifestError, Rejected, id_problem, read_manifest  # noqa: E402
from seeded import cases, exit_status, parser  # noqa: E402

_TEXT = [
    lambda r: r.choice(["hello", "Hello, world.", "ok", "a b c", "日本語", "שלום", "🙂", "e\u0301"]),
    lambda r: r.choice(['"', '""', '"""', "'", ",", ";", "\t", "|"]) * r.randrange(1, 4),
    lambda r: r.choice(["\n", "\r\n", "\r", "\u2028", "\x85", "\v", "\f"]),
    lambda r: r.choice(["\x00", "\x1b[31m", "\x7f", "\ufeff", "\u202e"]),
    lambda r: r.choice(["../x", "/etc/passwd", ".hidden", "kcc-batch", "CON", " pad ", "a" * 201]),
    lambda r: r.choice(["0", "-1", "1e309", "2147483648", "nan", "true", "null", "1.5"]),
    lambda r: "x" * r.choice([10, 1000, 140_000]),
]
_COLUMNS = ["id", "text", "phonemes", "voice", "lang", "speed", "seed", "format", "extra", "ID", ""]


def _field(r: random.Random) -> str:
    return "".join(r.choice(_TEXT)(r) for _ in range(r.randrange(1, 4)))


def _csv_case(r: random.Random) -> bytes:
    cols = r.sample(_COLUMNS, r.randrange(1, 6))
    if r.random() < 0.8 and "id" not in cols:
        cols[0] = "id"
    lines = [",".join(cols)]
    for _ in range(r.randrange(0, 8)):
        lines.append(",".join(_field(r) if r.random() < 0.7 else f'"{_field(r)}"' for _ in range(r.randrange(1, len(cols) + 2))))
    return _maybe_mangle(r, "\n".join(lines) + r.choice(["", "\n", "\r\n"]))


def _json_value(r: random.Random, depth: int = 0):
    kind = r.randrange(7 if depth < 3 else 4)
    if kind == 0:
        return _field(r)
    if kind == 1:
        return r.choice([0, -1, 2**31, 2**64, 1.5, float("1e308"), True, None])
    if kind == 2:
        return r.choice(["\ud800", "a\udfffb", "\udc80", "ok\ud83d"])       # lone surrogates, escaped by dumps
    if kind == 3:
        return ""
    if kind == 4:
        return [_json_value(r, depth + 1) for _ in range(r.randrange(3))]
    return {r.choice(_COLUMNS): _json_value(r, depth + 1) for _ in range(r.randrange(3))}


def _jsonl_case(r: random.Random) -> bytes:
    lines = []
    for _ in range(r.randrange(1, 8)):
        roll = r.random()
        if roll < 0.7:
            rec = {c: _json_value(r) for c in r.sample(_COLUMNS, r.randrange(1, 5))}
            if r.random() < 0.7:
                rec["id"] = _json_value(r) if r.random() < 0.3 else f"i{r.randrange(10)}"
                rec["text" if r.random() < 0.7 else "phonemes"] = _field(r)
            lines.append(json.dumps(rec, ensure_ascii=r.random() < 0.5))
        elif roll < 0.8:
            lines.append("[" * r.randrange(1, 3000))
        elif roll < 0.9:
            lines.append('{"id": "d", "id": "e", "text": "dup"}')
        else:
            lines.append(_field(r))
    return _maybe_mangle(r, "\n".join(lines))


def _text_case(r: random.Random) -> bytes:
    return _maybe_mangle(r, "\n".join(_field(r) for _ in range(r.randrange(1, 10))))


def _maybe_mangle(r: random.Random, text: str) -> bytes:
    raw = text.encode("utf-8", "surrogatepass")
    if r.random() < 0.1:
        raw = b"\xef\xbb\xbf" + raw
    if r.random() < 0.1:
        b = bytearray(raw)
        for _ in range(r.randrange(1, 4)):
            b.insert(r.randrange(len(b) + 1), r.randrange(256))
        raw = bytes(b)
    return raw


def _encodes(value) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def check_manifest(raw: bytes, kind: str, where: Path) -> str:
    path = where / f"m.{ {'jsonl': 'jsonl', 'csv': 'csv', 'text': 'txt'}[kind]}"
    path.write_bytes(raw)
    try:
        got = read_manifest(path)
    except ManifestError as exc:
        assert _encodes(str(exc)), f"a ManifestError message that cannot be written: {exc!r:.200}"
        return "refused"
    last = 0
    for rec in got:
        assert isinstance(rec, (Item, Rejected)), rec
        assert rec.line >= last, f"lines out of order: {rec.line} after {last}"
        last = rec.line
        for name, value in vars(rec).items():
            assert _encodes(value), f"{type(rec).__name__}.{name} cannot be written as UTF-8: {value!r:.120}"
        if isinstance(rec, Item):
            assert id_problem(rec.id) is None, f"an unsafe id passed: {rec.id!r:.120}"
        json.dumps([vars(r) for r in got], ensure_ascii=False).encode("utf-8")
    return "read"


# -- lexicons ---------------------------------------------------------------------------------
def _lexicon_case(r: random.Random) -> bytes:
    if r.random() < 0.5:
        lines = []
        for _ in range(r.randrange(0, 10)):
            parts = [_field(r), r.choice(["hˈɛlO", "kˌeɪsˈiːsˈiː", _field(r), ""])][:r.randrange(1, 3)]
            lines.append(r.choice(["\t", " ", "\t\t", ","]).join(parts) + r.choice(["", "\t", "\textra"]))
            if r.random() < 0.1:
                lines.append("# comment " + _field(r))
        return _maybe_mangle(r, "\n".join(lines))
    doc = {_field(r): r.choice(["hˈɛlO", _json_value(r), "", "x" * 5000]) for _ in range(r.randrange(0, 8))}
    text = json.dumps(doc if r.random() < 0.9 else [doc], ensure_ascii=r.random() < 0.5)
    return _maybe_mangle(r, text if r.random() < 0.9 else text[: r.randrange(len(text) + 1)])


def check_lexicon(raw: bytes, where: Path) -> str:
    from kcc.speech.g2p.overrides import LexiconError, load_lexicon
    path = where / r_choice_name(raw)
    path.write_bytes(raw)
    try:
        load_lexicon(path)
    except LexiconError:
        return "refused"
    return "read"


def r_choice_name(raw: bytes) -> str:
    return "lexicon.json" if raw[:1] in (b"{", b"[") else "lexicon.tsv"


# -- voices dir -------------------------------------------------------------------------------
_SUFFIXES = [".npy", ".npz", ".pt", ".NPY", ".npy.bak", ""]


def _npy_bytes(r: random.Random) -> bytes:
    import io
    shape = r.choice([(510, 1, 256), (510, 256), (1, 256), (0,), (511, 1, 256), (510, 1, 255), (2, 2)])
    dtype = r.choice([np.float32, np.float64, np.float16, np.int32, np.uint8, object, np.complex64])
    try:
        arr = (np.random.default_rng(r.randrange(1 << 30)).standard_normal(int(np.prod(shape))) *
               r.choice([0.1, 1, 1e3, 1e30])).reshape(shape).astype(dtype)
        if dtype == np.float32 and arr.size and r.random() < 0.3:
            arr.flat[r.randrange(arr.size)] = r.choice([np.nan, np.inf, -np.inf])
    except (TypeError, ValueError):
        arr = np.zeros(shape, np.float32)
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=True)
    data = buf.getvalue()
    roll = r.random()
    if roll < 0.15:
        return data[: r.randrange(len(data) + 1)]                      # truncated
    if roll < 0.25:
        b = bytearray(data)
        for _ in range(r.randrange(1, 20)):
            b[r.randrange(len(b))] = r.randrange(256)
        return bytes(b)
    if roll < 0.3:                                                      # a header that claims a huge shape
        return data.replace(str(shape).encode(), b"(100000000000, 1, 256)", 1)
    return data


def _npz_bytes(r: random.Random) -> bytes:
    import io
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for _ in range(r.randrange(0, 4)):
            name = r.choice(["af_x", "../evil", "", "a" * 300, "b/c", "v"]) + r.choice([".npy", ""])
            z.writestr(name or "x.npy", _npy_bytes(r) if r.random() < 0.8 else os.urandom(r.randrange(200)))
    data = buf.getvalue()
    return data[: r.randrange(len(data) + 1)] if r.random() < 0.15 else data


def make_voices_dir(r: random.Random, d: Path) -> None:
    for i in range(r.randrange(1, 6)):
        name = r.choice(["v", "af_heart", "x y", "-dash", "ü", "a" * 100]) + str(i) + r.choice(_SUFFIXES)
        p = d / name
        roll = r.random()
        if roll < 0.35:
            p.write_bytes(_npy_bytes(r))
        elif roll < 0.55:
            p.write_bytes(_npz_bytes(r))
        elif roll < 0.75:
            p.write_bytes(os.urandom(r.choice([0, 1, 64, 4096, 300_000])))
        elif roll < 0.85:
            p.mkdir()
        elif roll < 0.95:
            p.symlink_to(r.choice(["/dev/zero", "/nonexistent", str(d), "/etc/hostname"]))
        else:
            p.write_bytes(b"PK\x03\x04" + os.urandom(r.randrange(100)))     # a zip that is not one


def check_voices_dir(d: Path, r: random.Random) -> str:
    from kcc.speech.voices import VoiceError, load_pack, voice_catalog
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        catalog = voice_catalog([d], real=False)
        names = list(catalog) + [f.name for f in d.iterdir()] + ["nobody", "v0"]
        loaded = 0
        for name in names:
            try:
                pack = load_pack(name, [d])
            except VoiceError:
                continue
            assert isinstance(pack, np.ndarray) and pack.dtype == np.float32, (name, getattr(pack, "dtype", None))
            assert np.isfinite(pack).all(), f"voice {name!r}: non-finite values passed validation"
            loaded += 1
    return "loaded" if loaded else "refused"


# -- the loop ---------------------------------------------------------------------------------
def one_case(surface: str, r: random.Random, where: Path) -> str:
    if surface == "manifest":
        kind = r.choice(["csv", "jsonl", "text"])
        raw = {"csv": _csv_case, "jsonl": _jsonl_case, "text": _text_case}[kind](r)
        return check_manifest(raw, kind, where)
    if surface == "lexicon":
        return check_lexicon(_lexicon_case(r), where)
    d = where / "voices"
    d.mkdir()
    make_voices_dir(r, d)
    return check_voices_dir(d, r)


def run(surface: str, n: int, seed: int, seconds: float | None = None, log=print) -> dict[str, int]:
    rng = random.Random(seed)
    counts: dict[str, int] = {}
    for i in cases(n, seconds):
        state = rng.getstate()
        with tempfile.TemporaryDirectory(prefix="kcc-fuzz-") as tmp:
            try:
                got = one_case(surface, rng, Path(tmp))
            except AssertionError as exc:
                raise AssertionError(f"{surface} case {i} (seed {seed}): {exc}") from exc
            except Exception as exc:
                rng.setstate(state)
                raise AssertionError(f"{surface} case {i} (seed {seed}): {type(exc).__name__}: {exc!s:.300}") from exc
        counts[got] = counts.get(got, 0) + 1
    log(f"fuzz_inputs {surface}: {sum(counts.values())} cases {counts}; no findings")
    return counts


def main(argv=None) -> int:
    ap = parser(__doc__, n=2000, seconds_help="stop each surface after this long")
    ap.add_argument("--surface", choices=["manifest", "lexicon", "voices", "all"], default="all")
    args = ap.parse_args(argv)
    surfaces = ["manifest", "lexicon", "voices"] if args.surface == "all" else [args.surface]

    def every_surface():
        for s in surfaces:
            run(s, args.n, args.seed, args.seconds)
    return exit_status("fuzz_inputs", every_surface)


if __name__ == "__main__":
    raise SystemExit(main())
