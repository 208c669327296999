"""`kcc wyoming`: a Wyoming protocol TTS server (Home Assistant), on the same SpeechService.

describe -> info (every offered voice with its language; supports_synthesize_streaming).
synthesize -> audio-start, audio-chunk (16-bit 24 kHz mono, as each text chunk is made),
audio-stop. Streaming text: synthesize-start, synthesize-chunk..., synthesize-stop; each
sentence is spoken as soon as its end has arrived (its own audio-start/chunk/stop), the rest at
synthesize-stop, then synthesize-stopped (text that runs past 4096 characters without a sentence
end is spoken at its last space, so the buffer stays bounded). The plain `synthesize` Home Assistant also sends
during a streamed request (for servers without streaming) is ignored then. A request that
cannot be spoken gets a Wyoming `error` event.
"""
from __future__ import annotations

import asyncio
import re
from functools import partial

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler, AsyncServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from kcc.speech.languages import LANGUAGES, default_voice, from_tag
from kcc.speech.serve.request import MAX_INPUT_CHARS, ApiError, SpeechRequest
from kcc.speech.serve.service import SpeechService
from kcc.speech.timestamps import SAMPLE_RATE

SAMPLES_PER_EVENT = 2048
ATTRIBUTION = Attribution(name="hexgrad (Kokoro-82M), compiled by kcc", url="https://github.com/hexgrad/kokoro")
# A sentence is complete once its end punctuation is followed by whitespace (so "3.14" waits),
# or at once after CJK full stops, which take no space.
SENTENCE_END = re.compile(r"(?:[.!?]+[\"')\]]*\s+|[。！？]+)")


def info(service: SpeechService) -> Info:
    """Every offered voice under its language's BCP 47 tag (kcc.speech.languages: 'en-US', 'ja-JP'),
    which Home Assistant groups its voice lists by and matches a pipeline's language against."""
    voices = [TtsVoice(name=v["id"], attribution=ATTRIBUTION, installed=True, version=None,
                       description=f"{v['id']} ({v['language_name'] or v['language']}"
                                   f"{', ' + v['gender'] if v['gender'] else ''})",
                       languages=[LANGUAGES[v["language"]].tag if v["language"] in LANGUAGES else v["language"]])
              for v in service.voices.listing()]
    return Info(tts=[TtsProgram(name="kcc", attribution=ATTRIBUTION, installed=True, version=None,
                                description="Kokoro-82M compiled to C (kcc)", voices=voices,
                                supports_synthesize_streaming=True)])


def _cut(text: str) -> tuple[str, str]:
    """(what to speak now, the rest): all of `text` if one request holds it, else up to its last
    space within MAX_INPUT_CHARS (or exactly that many characters without one)."""
    if len(text) <= MAX_INPUT_CHARS:
        return text, ""
    cut = text.rfind(" ", 1, MAX_INPUT_CHARS) + 1 or MAX_INPUT_CHARS
    return text[:cut], text[cut:]


class SpeechHandler(AsyncEventHandler):
    def __init__(self, service: SpeechService, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.service = service
        self.streaming = False
        self.voice: str | None = None
        self.pending = ""

    def _voice_for(self, voice) -> str | None:
        if voice is None:
            return None
        if voice.name:
            return voice.name
        if voice.language:                 # the first offered voice of that language
            lang = voice.language.lower().replace("_", "-")
            listing = self.service.voices.listing()
            code = from_tag(lang)
            own = [v for v in listing if code and v["id"] == default_voice(code)]
            listing = own + listing                           # the language's own voice first
            for same in (lambda v: v == lang, lambda v: v.split("-")[0] == lang.split("-")[0]):   # exact, then by language
                for v in listing:
                    if v["language"] and same(v["language"]):
                        return v["id"]
        return None

    async def handle_event(self, event: Event) -> bool:
        if Describe.is_type(event.type):
            await self.write_event(info(self.service).event())
        elif SynthesizeStart.is_type(event.type):
            start = SynthesizeStart.from_event(event)
            self.streaming, self.pending, self.voice = True, "", self._voice_for(start.voice)
        elif SynthesizeChunk.is_type(event.type) and self.streaming:
            self.pending += SynthesizeChunk.from_event(event).text
            ends = list(SENTENCE_END.finditer(self.pending))
            if ends:
                done, self.pending = self.pending[:ends[-1].end()], self.pending[ends[-1].end():]
                while done:                                # up to the last sentence end, in pieces a request holds
                    piece, done = _cut(done)
                    await self.speak(piece, self.voice)
            while len(self.pending) > MAX_INPUT_CHARS:     # no sentence end in sight: speak at a space
                done, self.pending = _cut(self.pending)
                await self.speak(done, self.voice)
        elif SynthesizeStop.is_type(event.type) and self.streaming:
            if self.pending.strip():
                await self.speak(self.pending, self.voice)
            self.streaming, self.pending = False, ""
            await self.write_event(SynthesizeStopped().event())
        elif Synthesize.is_type(event.type) and not self.streaming:
            request = Synthesize.from_event(event)
            await self.speak(request.text, self._voice_for(request.voice))
        return True

    async def speak(self, text: str, voice: str | None) -> None:
        if not text.strip():
            return
        if len(text) > MAX_INPUT_CHARS:
            await self.write_event(Error(text=f"text has {len(text)} characters; the limit is {MAX_INPUT_CHARS}",
                                         code="413").event())
            return
        service = self.service
        try:
            job = service.submit(SpeechRequest(text=text, voice=voice, response_format="pcm"),
                                 asyncio.get_running_loop())
        except ApiError as err:
            await self.write_event(Error(text=err.message, code=str(err.status)).event())
            return
        fmt = {"rate": SAMPLE_RATE, "width": 2, "channels": 1}
        started = False
        try:
            while True:
                item = await service.next_item(job)
                if item[0] == "error":
                    await self.write_event(Error(text=item[1].message, code=str(item[1].status)).event())
                    break
                if item[0] == "end":
                    break
                if item[0] != "bytes" or not item[1]:
                    continue
                if not started:
                    await self.write_event(AudioStart(**fmt).event())
                    started = True
                data, step = item[1], 2 * SAMPLES_PER_EVENT
                for i in range(0, len(data), step):
                    await self.write_event(AudioChunk(audio=data[i:i + step], **fmt).event())
            if started:
                await self.write_event(AudioStop().event())
        finally:
            job.cancel.set()              # a dropped connection stops the synthesis at its next chunk


async def serve(service: SpeechService, uri: str) -> None:
    """Serve until cancelled (or SIGTERM, which the wyoming package's server handles)."""
    await AsyncServer.from_uri(uri).run(partial(SpeechHandler, service))
