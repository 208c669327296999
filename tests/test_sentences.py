"""The one text cutter (kcc.speech.sentences) and the one caption writer (kcc.speech.audio.captions),
as every door uses them: the chunk planner, G2P pieces, Wyoming's streamed text, the book's layout
and lines, `kcc say --subtitles` and `kcc book --subtitles`."""
from __future__ import annotations

import pytest

from kcc.speech.audio.captions import SubtitleStream, cues, render
from kcc.speech.book import captions as book_captions
from kcc.speech.book.layout import split_paragraph
from kcc.speech.g2p.base import Word
from kcc.speech.sentences import ends_sentence, level, sentence_ends, split_sentences
from kcc.speech.text import iter_chunks, pieces, word_level


@pytest.mark.parametrize("text, want", [
    ("Hello there. How are you? Fine!", ["Hello there.", "How are you?", "Fine!"]),
    ("今日はいい天気ですね。今日は雨です。", ["今日はいい天気ですね。", "今日は雨です。"]),
    ("यह एक वाक्य है। दूसरा वाक्य॥ तीसरा", ["यह एक वाक्य है।", "दूसरा वाक्य॥", "तीसरा"]),
    ("He said \"stop.\" Then left.", ["He said \"stop.\"", "Then left."]),
    ("Pi is 3.14 today.", ["Pi is 3.14 today."]),
    ("你好！今天天气很好？是的。", ["你好！", "今天天气很好？", "是的。"]),
])
def test_sentences_of_every_script(text, want):
    assert split_sentences(text) == want


def test_a_stream_waits_for_the_space_after_an_ascii_mark_but_not_after_a_cjk_one():
    assert sentence_ends("It is 3.", complete=False) == []          # "3.14" may be coming
    assert sentence_ends("It is 3. ", complete=False) == [9]
    assert sentence_ends("すね。今日", complete=False) == [3]       # never "…すね。今日|"


@pytest.mark.parametrize("token, want", [(".", 0), ("?!", 0), ("。", 0), ("।", 0), (";", 1), ("：", 1), (",", 2),
                                         ("、", 2), ("—", 2), ("done.\u201d", None), ("है।", 0), ("Dr.", None),
                                         ("word", None), (")", None)])
def test_break_levels(token, want):
    assert level(token) == want


def test_a_devanagari_danda_the_g2p_dropped_still_ends_a_chunk():
    words = [Word("यह", "jəh", True), Word("है।", "hɛː", True), Word("दूसरा", "duːsɾaː", True), Word("वाक्य", "ʋaːkjə", False)]
    assert word_level(words[1]) == 0
    chunks = list(iter_chunks(words, limit=16))
    assert [[w.text for w in c] for c in chunks] == [["यह", "है।"], ["दूसरा", "वाक्य"]]


def test_g2p_pieces_and_book_items_cut_japanese_at_its_full_stops():
    text = "今日はいい天気ですね。" * 30
    assert all(p.endswith("。") for p, _ in pieces(text, 100))
    assert all(p.endswith("。") for p in split_paragraph(text, 100))


WORDS = [{"word": w, "start_s": i * 0.4, "end_s": i * 0.4 + 0.3} for i, w in
         enumerate(["Dr", ".", "Smith", "arrived", ".", "今日は", "晴れ", "。", "Then", "more"])]


def test_one_caption_writer_for_say_and_book(tmp_path):
    listed = cues(WORDS)
    assert [t for _, _, t in listed] == ["Dr.", "Smith arrived.", "今日は 晴れ。", "Then more"]
    for kind in ("srt", "vtt"):
        stream = SubtitleStream(tmp_path / f"x.{kind}")
        with stream.file:
            stream.add(WORDS[:4])
            stream.add(WORDS[4:])
            stream.finish()
            stream.file.commit()
        assert (tmp_path / f"x.{kind}").read_text(encoding="utf-8") == render(listed, kind)
    assert book_captions.cues is cues and book_captions.render is render


def test_a_book_break_starts_a_new_cue():
    assert [t for _, _, t in cues(WORDS[8:], breaks={1})] == ["Then", "more"]


def test_a_line_ending_a_sentence():
    assert ends_sentence("the end.\u201d") and ends_sentence("終わり。") and not ends_sentence("and so,")
