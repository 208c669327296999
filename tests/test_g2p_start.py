"""The English G2P starts fast and speaks exactly as misaki's own lexicon path: no spaCy import,
lexicons from the SQLite cache (rebuilt when damaged), espeak-ng loaded only for unknown words."""
from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest

from kcc.speech.g2p import en as g2p_en
from kcc.speech.g2p import en_cache as g2p_en_cache
from kcc.speech.g2p.en_cache import LazyEspeakFallback, LexiconTable, _cache_path, lexicon

ROOT = Path(__file__).resolve().parent.parent
ok, why = g2p_en.lexicon_available()
pytestmark = pytest.mark.skipif(not ok, reason=why)

SENTENCES = ["Hello from generated C.", "I'm sure it's fine, isn't it?", "The well-known man read it at 5:30 p.m.",
             "Dr. Smith's U.S.A. trip cost $1,200 (roughly).", "They'll use the record to record a record.",
             "I say [Kokoro](/kˈOkəɹO/) twice.", "Don't worry; we've got 3 cats, 2 dogs and a llama!"]


def _words(fn, text):
    return [(w.text, w.phonemes, w.whitespace) for w in fn(text)]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KCC_CACHE_DIR", str(tmp_path))
    return tmp_path


def test_cached_lexicon_speaks_like_misakis_own(cache, monkeypatch):
    cached = g2p_en.make_lexicon(False, LazyEspeakFallback(False))          # builds the cache
    assert _cache_path(False).exists()
    warm = g2p_en.make_lexicon(False, LazyEspeakFallback(False))            # reads it
    monkeypatch.setattr(g2p_en, "lexicon", lambda en, british: en.Lexicon(british))
    own = g2p_en.make_lexicon(False, LazyEspeakFallback(False))
    for text in SENTENCES:
        assert _words(warm, text) == _words(own, text) == _words(cached, text), text


def test_cache_maps_words_like_the_dicts(cache):
    en = g2p_en.misaki_en()
    lexicon(en, False)
    lex, own = lexicon(en, False), en.Lexicon(False)
    assert isinstance(lex.golds, LexiconTable) and len(lex.golds) == len(own.golds)
    for word in ("hello", "Hello", "read", "used", "the", "zzzqx", 3, None):
        for mine, theirs in ((lex.golds, own.golds), (lex.silvers, own.silvers)):
            assert (word in mine) == (word in theirs)
            assert mine.get(word) == theirs.get(word)
    with pytest.raises(KeyError):
        lex.golds["zzzqx"]
    assert lex.golds["used"] == own.golds["used"] and isinstance(lex.golds["used"], dict)


@pytest.mark.parametrize("damage", [b"", b"not a database", b"SQLite format 3\0" + b"\xff" * 200])
def test_damaged_cache_is_rebuilt_not_trusted(cache, damage):
    en = g2p_en.misaki_en()
    lexicon(en, False)
    path = _cache_path(False)
    path.write_bytes(damage)
    lex = lexicon(en, False)                           # falls back to misaki's own reading ...
    assert lex.golds["hello"] == en.Lexicon(False).golds["hello"]
    db = sqlite3.connect(path)                         # ... and writes a good cache again
    assert db.execute("SELECT COUNT(*) FROM golds").fetchone()[0] > 100000


def test_unwritable_cache_still_speaks(cache):
    os.chmod(cache, 0o500)
    try:
        if os.access(cache, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        fn = g2p_en.make_lexicon(False, LazyEspeakFallback(False))
        assert _words(fn, "Hello.")[0][1] == "həlˈO"
    finally:
        os.chmod(cache, 0o700)


class _FailingItems(dict):
    def items(self):
        raise sqlite3.OperationalError("database or disk is full")


@pytest.mark.parametrize("failure", ["no temporary file", "write fails midway"])
def test_a_cache_that_cannot_be_written_still_speaks_and_leaves_no_file(cache, monkeypatch, failure):
    """The cache directory exists but takes no file, or SQLite fails while writing (what a
    read-only or full disk does; root can write anywhere, so both are injected): misaki's own
    lexicon is used, and neither the cache file nor a temporary is left behind."""
    en = g2p_en.misaki_en()
    path = _cache_path(False)
    if failure == "no temporary file":
        def refuse(target):
            raise PermissionError(13, "Permission denied", str(target))
        monkeypatch.setattr(g2p_en_cache, "AtomicFile", refuse)
        lex = lexicon(en, False)
        assert lex.golds["hello"] == en.Lexicon(False).golds["hello"]
    else:
        g2p_en_cache._write(path, SimpleNamespace(golds={"hello": "həlˈO"}, silvers=_FailingItems()))
    assert list(path.parent.iterdir()) == []


_PROBE = textwrap.dedent("""
    import sys, warnings
    warnings.simplefilter("ignore")
    from kcc.speech.g2p.g2p import G2P
    g = G2P("en-us", "auto")
    known = [w.phonemes for w in g({known!r})]
    loaded = sorted(m for m in ("spacy", "thinc", "torch", "phonemizer") if m in sys.modules)
    unknown = [w.phonemes for w in g("Zorblax.")]
    print(g.description)
    print(known)
    print(loaded, "phonemizer" in sys.modules, unknown)
""")


def test_starts_without_spacy_and_loads_espeak_only_for_unknown_words(cache):
    """(Without spaCy installed at all: tests/test_runtime_no_torch.py.)"""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", _PROBE.format(known=SENTENCES[1])], capture_output=True,
                         text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    description, known, loaded = out.stdout.strip().splitlines()
    assert "misaki.en lexicons" in description
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        own = g2p_en.make_lexicon(False, LazyEspeakFallback(False))
    assert known == str([w.phonemes for w in own(SENTENCES[1])])
    assert loaded.startswith("[] True ")                # nothing heavy for known words; espeak after
    assert "'z" in loaded.lower()                       # the unknown word got phonemes from espeak


@pytest.mark.parametrize("words, tokens, owners", [
    (["I", "say", "Kokoro", "twice."], ["I", "say", "Kokoro", "twice", "."], [0, 1, 2, 3, 3]),
    (["don't", "go"], ["do", "n't", "go"], [0, 0, 1]),
    (["a  b"], ["a", " ", "b"], [0, 0, 0]),
    ([], [], []),
])
def test_feature_alignment_by_position(words, tokens, owners):
    assert g2p_en._token_owners(words, tokens) == owners


def test_a_table_remembers_a_bounded_number_of_words():
    """A server fed any words keeps at most SEEN_WORDS answers per table (misses too), the least
    recently used dropped; what it answers is what the database holds."""
    import sqlite3
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE golds (k TEXT PRIMARY KEY, s TEXT, j TEXT)")
    db.execute("INSERT INTO golds VALUES ('hello', 'həlˈO', NULL)")
    table = LexiconTable(db, "golds")
    assert table["hello"] == "həlˈO"
    for i in range(g2p_en_cache.SEEN_WORDS + 500):
        assert f"w{i}" not in table
        table.get("hello")                               # used all along: kept
    assert len(table._seen) == g2p_en_cache.SEEN_WORDS
    assert "hello" in table._seen and "w0" not in table._seen and table["hello"] == "həlˈO"
