"""Start-up savers for the English G2P: misaki's lexicons looked up on disk, espeak on demand.

misaki.en.Lexicon reads its gold / silver JSON, grows them (capitalised variants) and checks every
entry against the phoneme vocabulary: ~0.35 s a process, and still ~0.15 s to unmarshal the 365k
grown entries, for a sentence that looks up a few dozen words. So the grown dictionaries are
written once into an SQLite file in kcc's cache (keyed by misaki's version and its data files'
sizes and mtimes) and each process opens it and looks words up as misaki asks (a Mapping).
A damaged or mismatched cache file is rebuilt, never trusted. espeak-ng (phonemizer, ~0.45 s to
import) is needed only for words in no lexicon, so the fallback is built on its first use.
"""
from __future__ import annotations

import json
import sqlite3
from collections import OrderedDict
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path

from kcc.files import AtomicFile, cache_subdir

CACHE_VERSION = 1
_TABLES = ("golds", "silvers")


def _data_key(british: bool) -> str:
    from importlib import metadata       # ~60 ms: paid when a G2P is built, not by every `import kcc.speech.g2p.g2p`

    from misaki import data
    root = Path(data.__file__).parent
    stamp = []
    for part in ("gold", "silver"):
        st = (root / f"{'gb' if british else 'us'}_{part}.json").stat()
        stamp.append(f"{st.st_size}-{st.st_mtime_ns}")
    return f"v{CACHE_VERSION}-misaki{metadata.version('misaki')}-{'gb' if british else 'us'}-{'-'.join(stamp)}"


def _cache_path(british: bool) -> Path:
    d = cache_subdir("g2p")
    d.mkdir(parents=True, exist_ok=True)
    return d / f"lexicon-{_data_key(british)}.sqlite"


SEEN_WORDS = 4096                 # per table: a few pages of text's distinct words


class LexiconTable(Mapping):
    """One of misaki's grown dictionaries (word -> phonemes, or tag -> phonemes for heteronyms),
    read from the SQLite cache a word at a time."""

    def __init__(self, db: sqlite3.Connection, table: str):
        self._db, self._table = db, table
        # misaki asks for a word in several cases in a row: the last SEEN_WORDS answers (misses too)
        # are kept, least recently used dropped, so a server fed any words stays the same size
        self._seen: OrderedDict = OrderedDict()

    def _fetch(self, word):
        if word in self._seen:
            self._seen.move_to_end(word)
            return self._seen[word]
        row = self._db.execute(f"SELECT s, j FROM {self._table} WHERE k = ?", (word,)).fetchone() \
            if isinstance(word, str) else None
        value = None if row is None else row[0] if row[0] is not None else json.loads(row[1])
        self._seen[word] = value
        if len(self._seen) > SEEN_WORDS:
            self._seen.popitem(last=False)
        return value

    def __getitem__(self, word):
        value = self._fetch(word)
        if value is None:
            raise KeyError(word)
        return value

    def __contains__(self, word) -> bool:
        return self._fetch(word) is not None

    def get(self, word, default=None):
        value = self._fetch(word)
        return default if value is None else value

    def __iter__(self):
        return (k for (k,) in self._db.execute(f"SELECT k FROM {self._table}"))

    def __len__(self) -> int:
        return self._db.execute(f"SELECT COUNT(*) FROM {self._table}").fetchone()[0]


def _write(path: Path, lex) -> None:
    """lex's grown dictionaries as the cache file at `path`, renamed there only when complete. A
    cache that cannot be written (read-only, full) only costs the next start its time."""
    try:
        with AtomicFile(path) as out:
            out.close()                                  # SQLite writes the temporary by its name
            with closing(sqlite3.connect(out.tmp)) as db:
                for table in _TABLES:
                    db.execute(f"CREATE TABLE {table} (k TEXT PRIMARY KEY, s TEXT, j TEXT)")
                    db.executemany(f"INSERT INTO {table} VALUES (?, ?, ?)",
                                   ((k, v, None) if isinstance(v, str) else (k, None, json.dumps(v))
                                    for k, v in getattr(lex, table).items()))
                db.commit()
            out.commit()
    except (OSError, sqlite3.Error):
        pass


def _open(path: Path) -> sqlite3.Connection | None:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True, check_same_thread=False)
        for table in _TABLES:
            if db.execute(f"SELECT COUNT(*) FROM (SELECT 1 FROM {table} LIMIT 1)").fetchone()[0] != 1:
                return None
        return db
    except sqlite3.Error:
        return None


def lexicon(en, british: bool):
    """A misaki.en.Lexicon (module `en` passed in) whose dictionaries are read from the cache."""
    try:
        path = _cache_path(british)
    except OSError:
        return en.Lexicon(british)
    db = _open(path) if path.exists() else None
    if db is None:
        lex = en.Lexicon(british)                  # misaki's own reading and checks
        _write(path, lex)
        return lex
    lex = en.Lexicon.__new__(en.Lexicon)
    lex.british, lex.cap_stresses = british, (0.5, 2)
    lex.golds, lex.silvers = (LexiconTable(db, t) for t in _TABLES)
    return lex


class LazyEspeakFallback:
    """misaki.espeak.EspeakFallback, made on first use (a call, or its .backend)."""

    def __init__(self, british: bool):
        self.british = british
        self._real = None

    def _get(self):
        if self._real is None:
            from misaki import espeak
            self._real = espeak.EspeakFallback(british=self.british)
        return self._real

    @property
    def backend(self):
        return self._get().backend

    def __call__(self, token):
        return self._get()(token)
