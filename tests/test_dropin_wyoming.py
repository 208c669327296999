"""kcc wyoming as Home Assistant's Wyoming TTS client reads it.

Home Assistant's non-streaming reader sends `synthesize`, then reads events until audio-stop,
keeping audio-chunk and skipping everything else (an `error` included): a refused synthesis must
end with audio-stop (or a close), or its pipeline waits forever. Its streaming reader sends
synthesize-start / -chunk / -stop and reads until synthesize-stopped. It sends a voice name and
no language. The reader below does just that (written here), against the service's fakes."""
from __future__ import annotations

import asyncio
import contextlib

import numpy as np
import pytest

from kcc.speech.engine import random_voice
from kcc.speech.serve.service import Limits, SpeechService
from kcc.speech.serve.voice_set import VoiceSet
from kcc.speech.voices import VoiceInfo, load_voice
from test_say import FakeSynth
from test_server import G2PS
from test_wyoming import serving_wyoming

wyoming = pytest.importorskip("wyoming")
from wyoming.audio import AudioChunk, AudioStop  # noqa: E402
from wyoming.client import AsyncTcpClient  # noqa: E402
from wyoming.error import Error  # noqa: E402
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeVoice  # noqa: E402

VOICES = {"af_alloy": "en-us", "ff_siwis": "fr-fr", "jf_alpha": "ja"}


@contextlib.contextmanager
def wyoming_server(tmp_path, synth=None):
    root = tmp_path / "voices"
    root.mkdir()
    catalog = {}
    for i, (name, lang) in enumerate(VOICES.items()):
        np.save(root / f"{name}.npy", random_voice(i))
        catalog[name] = VoiceInfo(name, lang, "female", str(root / f"{name}.npy"), str(root))
    g2ps = G2PS(languages=("en-us", "fr-fr", "ja"))
    service = SpeechService(synth or FakeSynth(), g2ps, VoiceSet(catalog, None, "af_alloy", loader=load_voice),
                            Limits())
    with serving_wyoming(service) as port:
        yield port, g2ps


async def home_assistant_tts(port, text, voice_name=None, language=None):
    """(audio bytes, skipped events) as Home Assistant's non-streaming Wyoming TTS reads them;
    None for the audio when the connection closed before audio-stop."""
    voice = SynthesizeVoice(name=voice_name, language=language) if voice_name or language else None
    skipped, audio = [], b""
    async with AsyncTcpClient("127.0.0.1", port) as client:
        await client.write_event(Synthesize(text=text, voice=voice).event())
        while True:
            event = await asyncio.wait_for(client.read_event(), 20)   # a hang fails here, not forever
            if event is None:
                return None, skipped
            if AudioStop.is_type(event.type):
                return audio, skipped
            if AudioChunk.is_type(event.type):
                audio += AudioChunk.from_event(event).audio
            else:
                skipped.append(event)


def _errors(events):
    return [Error.from_event(e) for e in events if Error.is_type(e.type)]


class TestRefusalsEndTheSynthesis:
    def test_an_unknown_voice(self, tmp_path):
        with wyoming_server(tmp_path) as (port, _):
            audio, skipped = asyncio.run(home_assistant_tts(port, "Hello there.", "af_nobody"))
        (err,) = _errors(skipped)
        assert audio == b"" and err.code == "unknown-voice"
        assert "'af_nobody'" in err.text and "Home Assistant" in err.text
        assert "GET" not in err.text and "/v1/" not in err.text and "HTTP" not in err.text

    def test_text_over_the_limit(self, tmp_path):
        with wyoming_server(tmp_path) as (port, _):
            audio, skipped = asyncio.run(home_assistant_tts(port, "word " * 1000))
        (err,) = _errors(skipped)
        assert audio == b"" and err.code == "text-too-long" and "shorten the text" in err.text

    def test_a_synthesis_that_fails(self, tmp_path):
        with wyoming_server(tmp_path, FakeSynth(fail="boom")) as (port, _):
            audio, skipped = asyncio.run(home_assistant_tts(port, "Hello there."))
        (err,) = _errors(skipped)
        assert audio == b"" and err.code == "synthesis-failed" and "boom" in err.text

    def test_a_malformed_voice_field(self, tmp_path):
        with wyoming_server(tmp_path) as (port, _):
            async def send():
                async with AsyncTcpClient("127.0.0.1", port) as client:
                    from wyoming.event import Event
                    await client.write_event(Event("synthesize", {"text": "Hi.", "voice": {"name": 3}}))
                    return [await asyncio.wait_for(client.read_event(), 20) for _ in range(2)]
            first, second = asyncio.run(send())
        assert Error.from_event(first).code == "bad-event" and AudioStop.is_type(second.type)


def test_a_streamed_request_with_a_bad_voice_still_ends(tmp_path):
    """The streaming reader: each sentence's error closes with audio-stop, the stream with synthesize-stopped."""
    async def stream(port):
        got = []
        async with AsyncTcpClient("127.0.0.1", port) as client:
            for e in (SynthesizeStart(voice=SynthesizeVoice(name="af_nobody")), SynthesizeChunk(text="One. Two. "),
                      SynthesizeStop()):
                await client.write_event(e.event())
            while (event := await asyncio.wait_for(client.read_event(), 20)).type != "synthesize-stopped":
                got.append(event.type)
        return got
    with wyoming_server(tmp_path) as (port, _):
        kinds = asyncio.run(stream(port))
    assert kinds == ["error", "audio-stop"]                 # "One. Two. " is one piece, refused once


class TestLanguageWithoutALanguageField:
    def test_a_french_voice_name_implies_french(self, tmp_path):
        with wyoming_server(tmp_path) as (port, g2ps):
            audio, skipped = asyncio.run(home_assistant_tts(port, "Bonjour à tous.", "ff_siwis"))
        assert audio and not _errors(skipped) and g2ps.asked == ["fr-fr"]

    def test_japanese_script_picks_japanese_with_no_voice(self, tmp_path):
        with wyoming_server(tmp_path) as (port, g2ps):
            audio, skipped = asyncio.run(home_assistant_tts(port, "こんにちは hi."))   # the fake G2P speaks only Latin letters
        assert audio and not _errors(skipped) and g2ps.asked == ["ja"]

    def test_a_language_alone_picks_that_language_s_voice(self, tmp_path):
        with wyoming_server(tmp_path) as (port, g2ps):
            audio, skipped = asyncio.run(home_assistant_tts(port, "Bonjour.", language="fr"))
        assert audio and not _errors(skipped) and g2ps.asked == ["fr-fr"]

    def test_latin_text_with_no_voice_is_the_default_language(self, tmp_path):
        with wyoming_server(tmp_path) as (port, g2ps):
            audio, _ = asyncio.run(home_assistant_tts(port, "Hello there."))
        assert audio and g2ps.asked == ["en-us"]
