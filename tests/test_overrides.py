"""Pronunciation overrides: inline `[word](/phonemes/)` in any language and `--lexicon FILE`."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from kcc.speech.g2p.g2p import G2P, G2PError, load_vocab
from kcc.speech.g2p.g2p import G2PFactory
from kcc.speech.g2p.overrides import (MAX_LEXICON_BYTES, MAX_LEXICON_ENTRIES, LexiconError, Override,
                                  UserLexicon, load_lexicon, split_inline, split_overrides)
from kcc.speech.text import pieces

ROOT = Path(__file__).resolve().parent.parent
VOCAB = load_vocab()
KCC = "kˈAsˈisˈi"


def _said(words):
    return [(w.text, w.phonemes) for w in words]


@pytest.mark.parametrize("lang, plain, marked, word, phonemes", [
    ("en-us", "I say Kokoro twice.", "I say [Kokoro](/kˈOkəɹO/) twice.", "Kokoro", "kˈOkəɹO"),
    ("es", "Digo Kokoro dos veces.", "Digo [Kokoro](/kˈOkəɹO/) dos veces.", "Kokoro", "kˈOkəɹO"),
    ("ja", "今日は東京です。", "今日は[東京](/tˈOkjO/)です。", "東京", "tˈOkjO"),
])
def test_inline_override_replaces_only_its_word(lang, plain, marked, word, phonemes):
    g = G2P(lang)
    got = _said(g(marked))
    assert (word, phonemes) in got
    rest = [(t, p) for t, p in got if t != word]
    around = [(t, p) for t, p in _said(g(plain)) if word not in t and t not in word]
    if lang == "en-us":                 # word by word: the neighbours are said exactly as before
        assert rest == around
    elif lang == "es":                  # espeak-ng reads across words ('dos' after a vowel: 'ðos')
        assert [t for t, _ in rest] == [t for t, _ in around]


def test_inline_override_keeps_spacing_and_punctuation():
    words = G2P("en-us")("Hello [world](/wˈɜɹld/), again!")
    assert [(w.text, w.phonemes, w.whitespace) for w in words][:3] == [
        ("Hello", "həlˈO", True), ("world", "wˈɜɹld", False), (",", ",", True)]
    assert [(w.text, w.whitespace) for w in G2P("en-us")("[Kokoro](/kˈOkəɹO/)")] == [("Kokoro", False)]


def test_lexicon_matches_whole_words_longest_first_case_sensitive():
    lex = UserLexicon({"kcc": KCC, "New York": "nˈu jˈɔɹk", "New": "nˈu"}, VOCAB)
    assert lex.split("kcc, kccx, KCC and New York or New") == [
        Override("kcc", KCC), ", kccx, KCC and ", Override("New York", "nˈu jˈɔɹk"), " or ", Override("New", "nˈu")]
    assert lex.split("nothing here") == ["nothing here"]
    words = _said(G2P("en-us", lexicon=lex)("The kcc compiler, not kccx."))
    assert ("kcc", KCC) in words and all(t != "kcc" or p == KCC for t, p in words)
    assert ("kccx", KCC) not in words


def test_lexicon_words_may_hold_the_link_syntax_characters():
    # Lexicon matches become Overrides directly, never link text parsed again: ']', '(' and '/'
    # in a word are matched like any other character, and the text around them is left alone.
    odd = {"C/C++": "sˈi sˈi plʌs plʌs", "f(x)": "ˈɛf ʌv ˈɛks", "a]b": "ˈA bˈi", "[x": "ˈɛks"}
    lex = UserLexicon(odd, VOCAB)
    text = "Use C/C++ or f(x), a]b [x, not [y](/wˈI/)."
    assert split_overrides(text, VOCAB, lex) == [
        "Use ", Override("C/C++", odd["C/C++"]), " or ", Override("f(x)", odd["f(x)"]), ", ",
        Override("a]b", odd["a]b"]), " ", Override("[x", odd["[x"]), ", not ", Override("y", "wˈI"), "."]
    words = _said(G2P("en-us", lexicon=lex)(text))
    for word, phonemes in odd.items():
        assert (word, phonemes) in words
    assert ("y", "wˈI") in words


def test_lexicon_does_not_rewrite_inline_overrides():
    lex = UserLexicon({"Kokoro": "kˈOkəɹO"}, VOCAB)
    words = _said(G2P("en-us", lexicon=lex)("[Kokoro](/kəkˈɔɹO/) and Kokoro."))
    assert words[0] == ("Kokoro", "kəkˈɔɹO") and ("Kokoro", "kˈOkəɹO") in words[1:]


@pytest.mark.parametrize("content", [
    json.dumps({"kcc": KCC, "Kokoro": "kˈOkəɹO"}),
    f"# a comment\nkcc\t{KCC}\n\nKokoro\tkˈOkəɹO\n",
])
def test_lexicon_files_json_and_tsv(tmp_path, content):
    f = tmp_path / "lex"
    f.write_text(content, encoding="utf-8")
    assert load_lexicon(f).entries == {"kcc": KCC, "Kokoro": "kˈOkəɹO"}


# Every way a lexicon or an override is refused: a LexiconError (a G2PError) naming the problem.
@pytest.mark.parametrize("content, match", [
    (json.dumps({"kcc": "kX9"}), "does not know: '9' 'X'"),
    (json.dumps({"kcc": "  "}), "empty"),
    (json.dumps({"k\nc": KCC}), "not a word"),
    (json.dumps({" ": KCC}), "not a word"),
    (json.dumps({"x" * 101: KCC}), "not a word"),
    (json.dumps({"kcc": 5}), "phoneme string"),
    (json.dumps({"kcc": "a/b"}), "does not know: '/'"),
    (json.dumps({"kcc": "ə" * 201}), "longer than 200"),
    ('{"kcc": "kˈA", "kcc": "sˈi"}', "listed twice"),
    ("kcc\tkˈA\nkcc\tsˈi\n", "listed twice"),
    ("kcc kˈA\n", "expected 'word<TAB>phonemes'"),
    ('{"kcc": ', "not valid JSON"),
    ('{"kcc": ' + "[" * 100_000 + "]" * 100_000 + "}", r"not a lexicon kcc reads \(RecursionError"),
    ('{"kcc": ' + "9" * 5000 + "}", r"not a lexicon kcc reads \(ValueError: Exceeds the limit"),
    ("[1, 2]", "expected 'word<TAB>phonemes'"),
    (json.dumps({f"w{i}": "ə" for i in range(MAX_LEXICON_ENTRIES + 1)}), "entries; at most"),
])
def test_bad_lexicons_are_refused_by_name(tmp_path, content, match):
    f = tmp_path / "lex"
    f.write_text(content, encoding="utf-8")
    with pytest.raises(LexiconError, match=match):
        load_lexicon(f)


def test_bad_lexicon_files_are_refused_by_name(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"#" * (MAX_LEXICON_BYTES + 1))
    latin1 = tmp_path / "latin1"
    latin1.write_bytes(b"caf\xe9\tka\n")
    for path, match in ((big, "lexicon .*big is over 1 MiB"), (latin1, "not UTF-8"),
                        (tmp_path / "absent", "lexicon .*absent: No such file"), (tmp_path, "lexicon .*: Is a directory"),
                        # sources whose stat says 0 bytes: the reader counts what it reads
                        ("/dev/zero", "lexicon /dev/zero is over 1 MiB"),
                        ("/dev/urandom", "lexicon /dev/urandom is over 1 MiB")):
        with pytest.raises(LexiconError, match=match):
            load_lexicon(path)
    assert issubclass(LexiconError, G2PError)


@pytest.mark.parametrize("text, match", [("Say [this](/θ9/).", "'9'"), ("Say [this](/ /).", "empty")])
def test_bad_inline_overrides_are_refused_by_name(text, match):
    with pytest.raises(LexiconError, match=match):
        split_inline(text, VOCAB)


def test_text_that_only_looks_like_an_override_is_plain():
    for text in ("[link](http://x.y)", "a [b] (/c/)", "[](/ə/)", "[a\nb](/ə/)"):
        assert split_inline(text, VOCAB) == [text]


def test_long_paragraphs_are_never_cut_inside_an_override():
    for pad in range(380, 400):
        para = "word " * pad + "[New York City](/nˈu jˈɔɹk sˈɪTi/) now " + "word " * 60
        got = [p for p, _ in pieces(para, 2000)]
        assert sum(p.count("[New York City](/nˈu jˈɔɹk sˈɪTi/)") for p in got) == 1, pad


def test_factory_is_picklable_and_loads_the_lexicon(tmp_path):
    f = tmp_path / "lex.json"
    f.write_text(json.dumps({"kcc": KCC}), encoding="utf-8")
    factory = pickle.loads(pickle.dumps(G2PFactory("auto", str(f))))
    assert ("kcc", KCC) in _said(factory("en-us")("The kcc compiler."))


def test_factory_reads_the_lexicon_once_for_every_language(tmp_path, monkeypatch):
    f = tmp_path / "lex.json"
    f.write_text(json.dumps({"kcc": KCC}), encoding="utf-8")
    import kcc.speech.g2p.overrides
    reads = []
    real_read = kcc.speech.g2p.overrides.read_user_file
    monkeypatch.setattr(kcc.speech.g2p.overrides, "read_user_file", lambda path, *a: (reads.append(Path(path)), real_read(path, *a))[1])
    factory = G2PFactory("auto", str(f))
    copy = pickle.loads(pickle.dumps(factory))          # what a batch worker gets
    for make in (factory, copy):
        for lang in ("en-us", "es"):
            assert ("kcc", KCC) in _said(make(lang)(f"kcc {lang}."))
    assert reads.count(f) == 1


def test_factory_refuses_a_bad_lexicon_when_made(tmp_path):
    bad = tmp_path / "bad.tsv"
    bad.write_text("kcc\tkX9\n", encoding="utf-8")
    with pytest.raises(LexiconError, match="'9' 'X'"):
        G2PFactory("auto", str(bad))


@pytest.mark.parametrize("command", ["say", "batch"])
def test_cli_refuses_a_bad_lexicon_and_writes_nothing(tmp_path, command):
    bad = tmp_path / "bad.tsv"
    bad.write_text("kcc\tkX9\n", encoding="utf-8")
    out = tmp_path / ("x.wav" if command == "say" else "out")
    if command == "say":
        argv = ["say", "The kcc compiler.", "-o", str(out)]
    else:
        manifest = tmp_path / "m.jsonl"
        manifest.write_text(json.dumps({"id": "a", "text": "The kcc compiler."}) + "\n", encoding="utf-8")
        argv = ["batch", str(manifest), "--out", str(out)]
    res = subprocess.run([sys.executable, "-m", "kcc.cli", *argv, "--lexicon", str(bad)],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert res.returncode == 2 and "LexiconError" in res.stderr and "'9' 'X'" in res.stderr
    assert not out.exists()


def test_serve_refuses_a_bad_lexicon_at_start(tmp_path):
    import argparse
    from kcc.speech.serve.cli import add_parsers, build_service
    bad = tmp_path / "bad.tsv"
    bad.write_text("kcc\tkX9\n", encoding="utf-8")
    ap = argparse.ArgumentParser()
    add_parsers(ap.add_subparsers())
    with pytest.raises(LexiconError, match="'9' 'X'"):
        build_service(ap.parse_args(["serve", "--lexicon", str(bad)]))
