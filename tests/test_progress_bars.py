"""The one-line progress bars of `kcc say` (speech.cli.progress_bar.Progress, the engine's callback), `kcc batch`
(speech.batch.progress.BatchProgress) and `kcc book` (speech.book.progress.BookProgress): exactly
what they draw, on a fake clock; on by default only for a tty; closed with one newline, once."""
from __future__ import annotations

import io
import time
from types import SimpleNamespace

import pytest

from kcc.speech.batch.progress import BatchProgress
from kcc.speech.book.progress import BookProgress
from kcc.speech.cli.progress_bar import Progress


class Tty(io.StringIO):
    def isatty(self):
        return True


@pytest.fixture
def clock(monkeypatch):
    """time.perf_counter reads 100.0, then steps by 1.5 s on every call."""
    t = iter(100.0 + 1.5 * i for i in range(1000))
    monkeypatch.setattr(time, "perf_counter", lambda: next(t))


def test_say_bar_draws_text_share_chunks_audio_and_time_left(clock):
    out = Tty()
    bar = Progress(text_chars=40, stream=out)
    for done, chars in ((1, 10), (2, 40)):
        bar.chars = chars
        bar.update(done, 2.0 * done)
    bar.close()
    bar.close()
    assert out.getvalue() == (
        "\rkcc say: [#######.......................]  25% of the text, 1 chunks, 2.0 s audio, 1.5 s, ~4 s left  "
        "\rkcc say: [##############################] 100% of the text, 2 chunks, 4.0 s audio, 3.0 s  \n")


def test_say_bar_counts_chunks_when_the_text_length_is_unknown(clock):
    out = io.StringIO()
    bar = Progress(enabled=True, stream=out, total_chunks=4)
    bar.update(1, 0.5)
    assert out.getvalue() == ("\rkcc say: [#######.......................]  25% of the text, 1 chunks, 0.5 s audio, "
                              "1.5 s, ~4 s left  ")


def test_batch_bar_draws_items_hours_failures_and_eta(clock):
    out = Tty()
    bar = BatchProgress(3, stream=out)
    for status, audio_s in (("done", 1800.0), ("skipped", 0.0), ("error", 0.0)):
        bar.update(SimpleNamespace(status=status, audio_s=audio_s))
    bar.close()
    assert out.getvalue() == (
        "\rkcc batch: [##########....................] 1/3 items, 0.500 h audio, 0 failed, ETA 00:00:03"
        "\rkcc batch: [####################..........] 2/3 items, 0.500 h audio, 0 failed, ETA 00:00:03"
        "\rkcc batch: [##############################] 3/3 items, 0.500 h audio, 1 failed, ETA 00:00:00\n")


def test_book_bar_fills_by_items_and_counts_chapters_hours_and_eta(clock):
    """The ETA is paced by the items worked on: a skipped one (already on disk) does not speed it up."""
    out = Tty()
    bar = BookProgress(chapters=2, items=3, stream=out)
    bar.item(SimpleNamespace(status="done", audio_s=1800.0))
    bar.chapter()
    bar.item(SimpleNamespace(status="skipped", audio_s=900.0))
    bar.item(SimpleNamespace(status="error", audio_s=0.0))
    bar.chapter()
    bar.close()
    assert out.getvalue() == (
        "\rkcc book: [##########....................] 0/2 chapters, 0.500 h audio, ETA 00:00:03"
        "\rkcc book: [##########....................] 1/2 chapters, 0.500 h audio, ETA 00:00:06"
        "\rkcc book: [####################..........] 1/2 chapters, 0.750 h audio, ETA 00:00:04"
        "\rkcc book: [##############################] 1/2 chapters, 0.750 h audio, ETA 00:00:00"
        "\rkcc book: [##############################] 2/2 chapters, 0.750 h audio, ETA 00:00:00\n")


@pytest.mark.parametrize("make", [lambda s, on: Progress(10, enabled=on, stream=s),
                                  lambda s, on: BatchProgress(2, enabled=on, stream=s),
                                  lambda s, on: BookProgress(1, 2, enabled=on, stream=s)])
def test_bars_are_on_by_default_only_for_a_tty(make):
    assert make(Tty(), None).enabled and not make(io.StringIO(), None).enabled
    assert make(io.StringIO(), True).enabled and not make(Tty(), False).enabled
    quiet = io.StringIO()
    bar = make(quiet, None)
    bar.close()
    assert quiet.getvalue() == ""
