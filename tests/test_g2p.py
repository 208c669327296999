"""English G2P (misaki's lexicons, espeak-ng through misaki's mapping), vocab encoding, long-text
chunking. Other languages: tests/test_languages.py; text normalisation: tests/test_normalize.py."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from kcc.speech.g2p.g2p import (G2P, G2PError, G2PWarning, Word, decode_text, encode, espeak_available, load_vocab,
                     misaki_available)
from kcc.speech.g2p.en import align_groups, lexicon_available
from kcc.speech.engine import plan
from kcc.speech.text import MAX_PHONEMES, chunk_words, phoneme_string

ESPEAK, WHY = espeak_available()
needs_espeak = pytest.mark.skipif(not ESPEAK, reason=f"espeak G2P unavailable: {WHY}")
LEXICON, WHY_LEX = lexicon_available()
needs_lexicon = pytest.mark.skipif(not LEXICON, reason=f"lexicon G2P unavailable: {WHY_LEX}")


@functools.lru_cache(maxsize=None)
def made(language: str, backend: str) -> G2P:
    """One G2P per (language, backend) for the whole module: loading the lexicons takes seconds."""
    return G2P(language, backend)


@pytest.fixture(scope="module")
def us():
    return made("en-us", "espeak")


@pytest.fixture(scope="module")
def lex():
    return made("en-us", "lexicon")


def test_vocab_copy_matches_the_model_config():
    cfg = json.loads((Path(__file__).parents[1] / "oracle" / "configs" / "full.json").read_text(encoding="utf-8"))
    assert load_vocab() == cfg["vocab"] and len(load_vocab()) == 114


def test_auto_backend_prefers_the_lexicons():
    if not ESPEAK:
        pytest.skip(WHY)
    assert G2P().backend == ("misaki" if misaki_available()[0] else "lexicon" if LEXICON else "espeak")


@needs_lexicon
@pytest.mark.parametrize("text, phonemes", [
    ("Hello world.", "həlˈO wˈɜɹld."),
    ("It's easy to tell the depth of a well.", "ˌɪts ˈizi tə tˈɛl ðə dˈɛpθ ʌv ɐ wˈɛl."),
    ("Isn't it 123?", "ˈɪzᵊnt ɪt wˈʌn hˈʌndɹəd twˈɛnti θɹˈi?"),
    ('She said "yes" (twice)!', "ʃˌi sˈɛd “jˈɛs” (twˈIs)!"),
    ("I paid $5 for 3 apples in 1999.", "ˌI pˈAd fˈIv dˈɑləɹz fɔɹ θɹˈi ˈæpᵊlz ɪn nˌIntˈin nˈIndi nˈIn."),
    ("NASA and the FBI met at 10 AM.", "nˈæsə ænd ði ˌɛfbˌiˈI mˈɛt æt tˈɛn ˌAˈɛm."),
    ("Tom & Jerry grew 2.5% + 1%.", "tˈɑm ænd ʤˈɛɹi ɡɹˈu tˈu pYnt fˈIv pəɹsˈɛnt plˈʌs wˈʌn pəɹsˈɛnt."),
    ("Smile 😀 = joy", "smˈIl ʤˈY"),                                    # unspoken symbols leave one space
])
def test_lexicon_sentences(lex, text, phonemes):
    """misaki's gold/silver lexicons (upstream's readings), numbers by misaki's rules."""
    enc = encode(lex(text))
    assert enc.phonemes == phonemes and not enc.unknown


@needs_lexicon
@pytest.mark.parametrize("text, noun, verb", [
    ("They record the record.", "ɹˈɛkəɹd", "ɹəkˈɔɹd"),
    ("I object to the object.", "ˈɑbʤəkt", "əbʤˈɛkt"),
    ("We present a present.", "pɹˈɛzᵊnt", "pɹizˈɛnt"),
])
def test_lexicon_heteronyms_follow_their_tag(lex, text, noun, verb):
    """Verb after a subject pronoun, noun after a determiner (kcc.speech.g2p.tagger)."""
    ps = [w.phonemes for w in lex(text)]
    assert ps[1] == verb and ps[-2] == noun


# "a" after a word espeak-ng joins it to (or alone): never the stressed letter name "ˈA"
# (the listener heard "Awell"); the lexicon reads it 'ɐ' (a determiner).
A_SENTENCES = [
    "It's easy to tell the depth of a well.",
    "He sat in a chair for a while as a guest.",
    "Give it to a friend, or a neighbour, at a party.",
    "One of a kind, on a hill, is a house.",
    "A dog barked.",
]


@pytest.mark.parametrize("backend", ["lexicon", "espeak"])
@pytest.mark.parametrize("text", A_SENTENCES)
def test_article_a_is_never_the_letter_name(backend, text):
    ok, why = lexicon_available() if backend == "lexicon" else espeak_available()
    if not ok:
        pytest.skip(why)
    words = made("en-us", backend)(text)
    articles = [w for w in words if w.text.lower() == "a"]
    assert len(articles) == text.lower().split().count("a")
    assert all("A" not in w.phonemes for w in articles), [(w.text, w.phonemes) for w in words]
    if backend == "lexicon":
        assert all(w.phonemes == "ɐ" for w in articles)
    ps = encode(words).phonemes
    assert "ˈA w" not in ps and " ˈA " not in ps


def test_align_groups_merges_a_joined_article():
    alone = [["ɪts"], ["ˈizi"], ["tə"], ["tˈɛl"], ["ðə"], ["dˈɛpθ"], ["ˈʌv"], ["ˈe^ɪ"], ["wˈɛl."]]
    context = ["ɪts", "ˈizi", "tə", "tˈɛl", "ðə", "dˈɛpθ", "ʌvɐ", "wˈɛl."]
    groups = align_groups(alone, context, [False] * 7 + [True, False])
    assert groups == [["ɪts"], ["ˈizi"], ["tə"], ["tˈɛl"], ["ðə"], ["dˈɛpθ"], ["ʌvɐ"], [], ["wˈɛl."]]


def test_align_groups_keeps_multi_group_tokens_and_refuses_other_merges():
    alone = [["wˈʌn", "hˈʌndɹɪd"], ["fˈɔː^ɹ"], ["ˈe^ɪ"], ["wˈa^ɪl"]]
    context = ["wˈʌn", "hˈʌndɹɪd", "fɚɹə", "wˈa^ɪl"]
    # "while" may not join the word before, so the only alignment puts "for a" together
    assert align_groups(alone, context, [False, False, True, False]) == [
        ["wˈʌn", "hˈʌndɹɪd"], ["fɚɹə"], [], ["wˈa^ɪl"]]
    # no alignment at all (nothing may join): each token keeps its own phonemes
    assert align_groups(alone, context, [False] * 4) == alone


@needs_espeak
@pytest.mark.parametrize("text, phonemes", [
    ("Hello world.", "həlˈO wˈɜɹld."),
    ("I have a dog.", "I hæv ə dˈɑɡ."),                       # 'a' in context, not the letter name
    ("Isn't it 123?", "ˌɪzənt ɪt wˈʌnhˈʌndɹɪd twˈɛnti θɹˈi?"),
    ('She said "yes" (twice)!', "ʃi sˈɛd \"jˈɛs\" (twˈIs)!"),
])
def test_english_sentences(us, text, phonemes):
    enc = encode(us(text))
    assert enc.phonemes == phonemes
    vocab = load_vocab()
    assert enc.ids == [vocab[c] for c in phonemes] and not enc.unknown
    assert all(1 <= i <= max(vocab.values()) for i in enc.ids)
    # each id maps back to its word (or a joining space), words in order
    for i, w in zip(enc.ids, enc.word_of):
        assert w == -1 and i == vocab[" "] or 0 <= w < len(enc.words)
    owners = [w for w in enc.word_of if w >= 0]
    assert owners == sorted(owners) and set(owners) == {i for i, w in enumerate(enc.words) if w.phonemes}


@needs_espeak
def test_word_alignment_of_numbers_and_punctuation(us):
    words = us("Isn't it 123?")
    assert [(w.text, w.phonemes) for w in words] == [
        ("Isn't", "ˌɪzənt"), ("it", "ɪt"), ("123", "wˈʌnhˈʌndɹɪd twˈɛnti θɹˈi"), ("?", "?")]
    assert [w.whitespace for w in words] == [True, True, False, False]


@pytest.mark.parametrize("backend", ["espeak", "lexicon"])
def test_british_differs(backend):
    ok, why = espeak_available() if backend == "espeak" else lexicon_available()
    if not ok:
        pytest.skip(why)
    assert encode(made("en-us", backend)("tomato")).phonemes == "təmˈATO"
    assert encode(made("en-gb", backend)("tomato")).phonemes == "təmˈɑːtQ"


@needs_lexicon
def test_british_dates_are_day_first():
    assert "fˈɛbɹəɹi fˈɜːst" in encode(made("en-gb", "lexicon")("on 1/2/2025")).phonemes
    assert "ʤˈænjəwˌɛɹi sˈɛkənd" in encode(made("en-us", "lexicon")("on 1/2/2025")).phonemes


def test_unknown_symbols_are_reported_with_positions():
    words = [Word("ok", "ok", True), Word("tsk", "tʘk", True), Word("hm", "h\u0298m", False)]
    with pytest.warns(G2PWarning, match=r"2 symbol\(s\).*'ʘ' \(U\+0298\) at 4 in word 'tsk'.*at 8 in word 'hm'"):
        enc = encode(words, where="chunk 1")
    assert [(u.symbol, u.position, u.word) for u in enc.unknown] == [("ʘ", 4, 1), ("ʘ", 8, 2)]
    assert enc.phonemes == "ok tʘk hʘm" and len(enc.ids) == len(enc.phonemes) - 2
    assert enc.word_of == [0, 0, -1, 1, 1, -1, 2, 2]


def test_decode_text_names_the_bad_byte():
    assert decode_text(b"caf\xc3\xa9") == "café"
    with pytest.raises(G2PError, match=r"byte 0xff at offset 2"):
        decode_text(b"ab\xffcd")
    with pytest.raises(G2PError, match=r"the argument is not valid UTF-8: byte 0xe9 at offset 3"):
        decode_text(b"caf\xe9".decode("utf-8", "surrogateescape"), "the argument")


def test_bad_language_and_backend():
    with pytest.raises(G2PError, match="'de-de' is not supported; use one of auto, en-us"):
        G2P("de-de")
    with pytest.raises(G2PError, match="backend 'festival' is unknown"):
        G2P("en-us", "festival")
    with pytest.raises(G2PError, match="backend 'festival' is unknown"):
        G2P("auto", "festival")
    ok, why = misaki_available()
    if not ok:
        with pytest.raises(G2PError, match="'misaki' is unavailable: " + why.split(" (")[0]):
            G2P("en-us", "misaki")


# -- chunking -------------------------------------------------------------------------------------
def _words(n: int, every: int, mark: str, length: int = 6) -> list[Word]:
    out = []
    for i in range(n):
        out.append(Word(f"w{i}", "x" * length, True))
        if mark and i % every == every - 1:
            out[-1].whitespace = False
            out.append(Word(mark, mark, True))
    out[-1].whitespace = False
    return out


def _check_cover(words, chunks, limit=MAX_PHONEMES):
    assert [id(w) for c in chunks for w in c] == [id(w) for w in words]      # all words, in order
    assert all(0 < len(phoneme_string(c)) <= limit for c in chunks)


@pytest.mark.parametrize("mark", [".", "!", ";", ",", "—"])
def test_chunks_end_at_punctuation(mark):
    words = _words(400, 9, mark)
    chunks = chunk_words(words)
    _check_cover(words, chunks)
    assert len(chunks) > 2 and all(c[-1].phonemes == mark for c in chunks[:-1])


def test_sentence_end_preferred_over_comma():
    words = []
    for s in range(60):
        for i in range(8):
            words.append(Word(f"s{s}w{i}", "abcd", i != 3 and i != 7))
            if i == 3:
                words.append(Word(",", ",", True))
        words.append(Word(".", ".", True))
    chunks = chunk_words(words)
    _check_cover(words, chunks)
    assert all(c[-1].phonemes == "." for c in chunks[:-1])


def test_closing_bracket_stays_with_its_sentence():
    words = []
    for s in range(80):
        words += [Word("(", "(", False), Word(f"w{s}", "abcdef", False), Word(".", ".", False), Word(")", ")", True)]
    chunks = chunk_words(words)
    _check_cover(words, chunks)
    assert all(c[-1].phonemes == ")" for c in chunks[:-1])


def test_no_punctuation_still_fits():
    words = _words(300, 0, "", length=7)
    chunks = chunk_words(words)
    _check_cover(words, chunks)
    assert len(chunks) == 5


def test_overlong_word_is_cut_with_a_warning():
    words = [Word("a", "ab", True), Word("long", "z" * 1200, True), Word("b", "cd", False)]
    with pytest.warns(UserWarning, match="1200 phonemes, over the 510"):
        chunks = chunk_words(words)
    assert all(len(phoneme_string(c)) <= MAX_PHONEMES for c in chunks)
    assert "".join(w.phonemes for c in chunks for w in c) == "ab" + "z" * 1200 + "cd"


@needs_espeak
def test_long_real_text_plans_into_chunks(us):
    para = " ".join(f"This is sentence {i}, and it keeps going for a while." for i in range(60))
    text = para + "\nA second paragraph."
    chunks = plan(text, us)
    assert len(chunks) >= 4 and all(len(c.ids) <= MAX_PHONEMES and not c.unknown for c in chunks)
    assert [w.text for c in chunks for w in c.words] == [w.text for w in us(para) + us("A second paragraph.")]
    assert chunks[-1].text == "A second paragraph."
    assert all(c.words[-1].phonemes == "." for c in chunks)   # every cut at a sentence end


# -- the rule tagger standing in for spaCy's model ------------------------------------------------
@pytest.mark.parametrize("tokens, tags", [
    ([("He", " "), ("said", " "), ('"', ""), ("no", ""), ('"', ""), (".", "")], ["PRP", "VBP", "``", "DT", "''", "."]),
    ([("well", ""), ("-", ""), ("known", " "), ("-", " "), ("yes", "")], ["XX", "HYPH", "XX", ":", "XX"]),
    ([("I", " "), ("paid", " "), ("$", ""), ("5", "")], ["PRP", "VBP", "$", "CD"]),
    ([("a", " "), ("dog", " "), ("and", " "), ("vitamin", " "), ("A", ""), (".", "")],
     ["DT", "NN", "CC", "XX", "NNP", "."]),
    ([("A", " "), ("cat", " "), ("at", " "), ("10", " "), ("AM", ""), (".", " "), ("A", "")],
     ["DT", "NN", "IN", "CD", "NN", ".", "NN"]),
    ([("to", " "), ("record", " "), ("the", " "), ("record", "")], ["TO", "VB", "DT", "NN"]),
    ([("has", " "), ("read", " "), ("it", " "), ("in", ""), (".", "")], ["XX", "VBN", "PRP", "RP", "."]),
    ([("cats", " "), ("vs.", " "), ("dogs", " "), ("(", ""), ("NASA", ""), (")", "")],
     ["XX", "IN", "XX", "-LRB-", "NNP", "-RRB-"]),
])
def test_tagger_gives_the_tags_misaki_reads(tokens, tags):
    from kcc.speech.g2p.tagger import tag
    assert tag(tokens) == tags


def test_backends_never_import_the_dispatcher():
    """kcc.speech.g2p.g2p dispatches down to its backends; they share types through kcc.speech.g2p.base and
    import nothing from kcc.speech.g2p.g2p, not even inside a function (no import circle)."""
    import ast
    room = Path(__file__).parents[1] / "kcc" / "speech" / "g2p"
    modules = sorted(m for m in room.rglob("*.py") if m.name != "g2p.py")     # normalize_rules/ too
    assert {m.stem for m in modules} >= {"base", "en", "intl", "ja", "scripts", "tagger", "normalize", "en_tokenizer"}
    for module in modules:
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                targets = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            assert "kcc.speech.g2p.g2p" not in targets, f"{module.name} imports kcc.speech.g2p.g2p (line {node.lineno})"


def test_public_names_stay_importable_from_g2p():
    import kcc.speech.g2p.g2p as g2p
    from kcc.speech.g2p import base as g2p_base
    for name in g2p.__all__:
        assert hasattr(g2p, name), name
    assert g2p.Word is g2p_base.Word and g2p.G2PError is g2p_base.G2PError and g2p.Encoded is g2p_base.Encoded


@needs_lexicon
@pytest.mark.parametrize("text, word, phonemes", [
    ("I read the book yesterday.", "read", "ɹˈɛd"),               # past after a subject (VBP reads the same)
    ("Tom read the letter twice.", "read", "ɹˈɛd"),
    ("Did they read the paper?", "read", "ɹˈid"),                # inverted subject: the base form
    ("I will read it tomorrow.", "read", "ɹˈid"),
    ("She wound the bandage around his wrist.", "wound", "wˈWnd"),
    ("The soldier's wound healed.", "wound", "wˈund"),            # a noun after a possessive 's
    ("Please close the door.", "close", "klˈOz"),                 # an imperative
    ("A close friend came.", "close", "klˈOs"),                   # a modifier inside a noun phrase
    ("Soldiers desert the army.", "desert", "dəzˈɜɹt"),           # a plural subject's verb
    ("A sharp increase.", "increase", "ˈɪnkɹˌis"),                # the head of a noun phrase
    ("She has lived here.", "lived", "lˈɪvd"),                    # a participle after have: the verb
    ("The song was recorded live.", "recorded", "ɹəkˈɔɹdᵻd"),      # ... and an -ed form after be
    ("We refuse to dump refuse near the river.", "refuse", None),  # the verb, then its object (a noun)
])
def test_heteronyms_read_by_context(lex, text, word, phonemes):
    got = [w.phonemes for w in lex(text) if w.text == word]
    assert got == ([phonemes] if phonemes else ["ɹəfjˈuz", "ɹˈɛfjˌus"])


@needs_lexicon
@pytest.mark.parametrize("text, spoken", [
    ("It was 15°C.", "fˌɪftˈin dəɡɹˈiz sˈɛlsiəs"),
    ("Set it to 59°F.", "fˈɪfti nˈIn dəɡɹˈiz fˈɛɹənhˌIt"),
])
def test_degrees_are_said(lex, text, spoken):
    """The normaliser names the scale ("fifteen degrees Celsius"; upstream says "degrees C")."""
    assert spoken in encode(lex(text)).phonemes
