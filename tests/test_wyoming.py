"""`kcc wyoming` over loopback, driven by the wyoming package's own client, with the fakes."""
from __future__ import annotations

import asyncio
import contextlib
import socket
import threading

import pytest

from kcc.speech.engine import random_voice
from kcc.speech.serve.service import Limits, SpeechService
from kcc.speech.serve.voice_set import VoiceSet
from kcc.speech.serve.wyoming_server import serve
from kcc.speech.voices import load_voice
from kcc.speech.audio.wav import pcm16

from test_say import FakeSynth, LetterG2P, sentences
from test_server import G2PS, VOICE_SEEDS, free_port, make_catalog, planned, serve_cli

wyoming = pytest.importorskip("wyoming")
from wyoming.audio import AudioChunk, AudioStart, AudioStop  # noqa: E402
from wyoming.client import AsyncTcpClient  # noqa: E402
from wyoming.error import Error  # noqa: E402
from wyoming.info import Describe, Info  # noqa: E402
from wyoming.tts import (Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop,  # noqa: E402
                         SynthesizeStopped, SynthesizeVoice)


@contextlib.contextmanager
def wyoming_server(tmp_path, synth=None, g2ps=None, limits: Limits | None = None, wyoming_limits=None, listener=None):
    voices = VoiceSet(make_catalog(tmp_path / "voices"), None, "af_alloy", loader=load_voice)
    service = SpeechService(synth or FakeSynth(), g2ps or G2PS(), voices, limits or Limits())
    with serving_wyoming(service, wyoming_limits, listener) as port:
        yield port, service


@contextlib.contextmanager
def serving_wyoming(service: SpeechService, wyoming_limits=None, listener=None):
    """`service` behind kcc's Wyoming server on a free loopback port, on its own loop and thread;
    yields the port once it accepts, closes the service after."""
    port = free_port()
    loop = asyncio.new_event_loop()
    task = loop.create_task(serve(service, f"tcp://127.0.0.1:{port}", wyoming_limits, listener))

    def run():
        with contextlib.suppress(asyncio.CancelledError):
            loop.run_until_complete(task)
        loop.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    for _ in range(200):
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            break
        threading.Event().wait(0.02)
    try:
        yield port
    finally:
        loop.call_soon_threadsafe(task.cancel)
        thread.join(10)
        service.close()


async def exchange(port, events, until=("audio-stop", "error"), stops=1):
    """Send events, collect replies up to the `stops`-th event whose type is in `until`."""
    got = []
    async with AsyncTcpClient("127.0.0.1", port) as client:
        for e in events:
            await client.write_event(e.event())
        while stops:
            event = await asyncio.wait_for(client.read_event(), 20)
            assert event is not None, "server closed the connection"
            got.append(event)
            if event.type in until:
                stops -= 1
    return got


def audio_of(events) -> bytes:
    return b"".join(AudioChunk.from_event(e).audio for e in events if AudioChunk.is_type(e.type))


def expected_pcm(text, voice="af_alloy"):
    from kcc.speech.engine import say
    return pcm16(say(text, FakeSynth(), random_voice(VOICE_SEEDS[voice]), g2p=LetterG2P(), chunks=planned(text)).audio)


def test_describe_lists_voices_and_languages(tmp_path):
    with wyoming_server(tmp_path) as (port, _):
        (event,) = asyncio.run(exchange(port, [Describe()], until=("info",)))
    (program,) = Info.from_event(event).tts
    assert program.supports_synthesize_streaming
    assert {v.name: v.languages for v in program.voices} == {
        "af_alloy": ["en-US"], "am_echo": ["en-US"], "bf_emma": ["en-GB"], "jf_alpha": ["ja-JP"]}


def test_synthesize_streams_audio_events(tmp_path):
    text = sentences(8)
    with wyoming_server(tmp_path) as (port, _):
        events = asyncio.run(exchange(port, [Synthesize(text=text, voice=SynthesizeVoice(name="am_echo"))]))
    assert AudioStart.is_type(events[0].type) and AudioStop.is_type(events[-1].type)
    start = AudioStart.from_event(events[0])
    assert (start.rate, start.width, start.channels) == (24000, 2, 1)
    chunks = [e for e in events if AudioChunk.is_type(e.type)]
    assert len(chunks) > 2 and all(len(AudioChunk.from_event(c).audio) <= 4096 for c in chunks)
    assert audio_of(events) == expected_pcm(text, "am_echo")


def test_streaming_text_is_spoken_sentence_by_sentence(tmp_path):
    parts = ["First sen", "tence is here. Pi is 3.", "14 today! And the", " tail"]
    synth = FakeSynth()
    with wyoming_server(tmp_path, synth) as (port, _):
        events = asyncio.run(exchange(
            port, [SynthesizeStart(voice=SynthesizeVoice(language="en-GB")), *(SynthesizeChunk(text=p) for p in parts),
                   Synthesize(text="".join(parts)), SynthesizeStop()], until=("synthesize-stopped",)))
    kinds = [e.type for e in events]
    assert kinds.count("audio-start") == 3 and kinds.count("audio-stop") == 3 and kinds[-1] == "synthesize-stopped"
    # each sentence as soon as its end arrived ("3." waited for "14"); the compatibility
    # `synthesize` made nothing; the voice is the first en-gb one
    utterances = ["First sentence is here. ", "Pi is 3.14 today! ", "And the tail"]
    assert audio_of(events) == b"".join(expected_pcm(u, "bf_emma") for u in utterances)
    assert len(synth.calls) == 3
    assert SynthesizeStopped.is_type(events[-1].type)


def test_streamed_text_without_sentence_ends_stays_bounded(tmp_path):
    word = "abcdefghi "                                   # 10 characters, never a sentence end
    synth = FakeSynth()
    with wyoming_server(tmp_path, synth) as (port, _):
        events = asyncio.run(exchange(port, [SynthesizeStart(), *(SynthesizeChunk(text=word * 50) for _ in range(10)),
                                             SynthesizeStop()], until=("synthesize-stopped",)))
    kinds = [e.type for e in events]
    assert "error" not in kinds and kinds.count("audio-start") == 2            # 4096 at a space, then the rest
    from kcc.speech.g2p.g2p import load_vocab
    space = load_vocab()[" "]
    assert sum(i != space for c in synth.calls for i in c["ids"]) == 500 * 9    # every letter spoken once


def test_a_sentence_end_after_a_long_unended_run_speaks_all_of_it(tmp_path):
    """4090 characters without a sentence end, then a chunk that ends one: the finished text is
    past one request's 4096 and is spoken in pieces cut at spaces, none refused."""
    word = "abcdefghi "
    synth = FakeSynth()
    with wyoming_server(tmp_path, synth) as (port, _):
        events = asyncio.run(exchange(port, [SynthesizeStart(), SynthesizeChunk(text=word * 409),
                                             SynthesizeChunk(text="and more words here. "), SynthesizeStop()],
                                      until=("synthesize-stopped",)))
    kinds = [e.type for e in events]
    assert "error" not in kinds and kinds.count("audio-start") == 2
    from kcc.speech.g2p.g2p import load_vocab
    space = load_vocab()[" "]
    letters = sum(c.isalpha() for c in word * 409 + "and more words here.")
    assert sum(i != space for c in synth.calls for i in c["ids"]) == letters + 1           # and the full stop


def test_bad_voice_and_failure_are_error_events(tmp_path):
    """Each ends the synthesis as Home Assistant reads it: `error`, then audio-stop."""
    stop = ("audio-stop",)
    with wyoming_server(tmp_path) as (port, _):
        events = asyncio.run(exchange(port, [Synthesize(text="hi", voice=SynthesizeVoice(name="../etc/passwd"))],
                                      until=stop))
        assert [e.type for e in events] == ["error", "audio-stop"]
        err = Error.from_event(events[0])
        assert err.code == "unknown-voice" and "voice name" in err.text and "/" not in err.text.split("voice name")[0]
        events = asyncio.run(exchange(port, [Synthesize(text="a " * 2049)], until=stop))
        assert [e.type for e in events] == ["error", "audio-stop"]
        assert Error.from_event(events[0]).code == "text-too-long" and "the limit is 4096" in Error.from_event(events[0]).text
    with wyoming_server(tmp_path, FakeSynth(fail="boom")) as (port, _):
        events = asyncio.run(exchange(port, [Synthesize(text="hi there")], until=stop))
        assert [e.type for e in events] == ["error", "audio-stop"] and "boom" in Error.from_event(events[0]).text


def test_wyoming_cli_serves_and_stops_on_sigterm(tmp_path):
    import signal
    port = free_port()
    with serve_cli(tmp_path, ["wyoming", "--uri", f"tcp://127.0.0.1:{port}"], {"KCC_VOICE": "bf_emma"}) as proc:
        for _ in range(300):
            assert proc.poll() is None, proc.stderr.read().decode()
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            threading.Event().wait(0.1)
        events = asyncio.run(exchange(port, [Synthesize(text="Hello there.")]))
        assert audio_of(events) == expected_pcm("Hello there.", "bf_emma")      # KCC_VOICE is the default
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(20) == 0                 # the wyoming server stops cleanly on SIGTERM
    assert f"kcc wyoming: tcp://127.0.0.1:{port}" in proc.stderr.read().decode()


@pytest.mark.parametrize("language, voice", [("ja_JP", "jf_alpha"), ("en_US", "af_alloy"), ("en-GB", "bf_emma"),
                                             ("en", "af_alloy")])
def test_a_language_with_a_region_picks_a_voice_of_that_language(tmp_path, language, voice):
    text = "Hi there."
    with wyoming_server(tmp_path, FakeSynth()) as (port, _):
        events = asyncio.run(exchange(port, [Synthesize(text=text, voice=SynthesizeVoice(language=language))]))
    assert audio_of(events) == expected_pcm(text, voice)
