"""`kcc wyoming`: a Wyoming protocol TTS server (Home Assistant), on the same SpeechService.

describe -> info (every offered voice with its language; supports_synthesize_streaming).
synthesize -> audio-start, audio-chunk (16-bit 24 kHz mono, as each text chunk is made),
audio-stop. Streaming text: synthesize-start, synthesize-chunk..., synthesize-stop; each
sentence is spoken as soon as its end has arrived (its own audio-start/chunk/stop), the rest at
synthesize-stop, then synthesize-stopped (text that runs past 4096 characters without a sentence
end is spoken at its last space, so the buffer stays bounded). The plain `synthesize` Home Assistant also sends
during a streamed request (for servers without streaming) is ignored then. A request that
cannot be spoken (or fails midway) gets a Wyoming `error` event and then `audio-stop`, which ends
the synthesis as Home Assistant reads it: its reader waits for audio-stop and skips other events
(kcc.speech.serve.wyoming_errors words the error for Home Assistant's users).

Untrusted clients: events are read bounded (kcc.speech.serve.wyoming_events); an event the
server refuses, or a field of the wrong type, gets an `error` event (code "bad-event") and the
connection goes on unless its framing is lost (a length over its cap, a header that is not
JSON). Nothing is ever left unanswered: an empty `synthesize` gets an empty audio-start /
audio-stop pair, a `synthesize-stop` with no stream open a synthesize-stopped, a
`synthesize-chunk` outside a stream an error. A client that goes away (or stops reading for
WyomingLimits.write_stall_s) cancels its synthesis, G2P included. The protocol has no
authentication: `kcc wyoming` listens on 127.0.0.1 unless told otherwise and warns when not.
"""
from __future__ import annotations

import asyncio
import logging
from functools import partial
from urllib.parse import urlsplit

from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event
from wyoming.info import Attribution, Describe, Info, TtsProgram, TtsVoice
from wyoming.server import AsyncEventHandler, AsyncServer
from wyoming.tts import Synthesize, SynthesizeChunk, SynthesizeStart, SynthesizeStop, SynthesizeStopped

from kcc.speech.languages import LANGUAGES, default_voice, from_tag
from kcc.speech.request import RequestError
from kcc.speech.sentences import sentence_ends
from kcc.speech.serve.listener import DetachedSlot, ListenerLimits, Slot, bind, serve_until_stopped
from kcc.speech.serve.request import MAX_INPUT_CHARS, ApiError, SpeechRequest
from kcc.speech.serve.service import SpeechService
from kcc.speech.serve.wyoming_errors import wyoming_error
from kcc.speech.serve.wyoming_events import BadEvent, WyomingLimits, read_event, text_field, voice_field
from kcc.speech.audio.timestamps import SAMPLE_RATE

SAMPLES_PER_EVENT = 2048
ATTRIBUTION = Attribution(name="hexgrad (Kokoro-82M), compiled by kcc", url="https://github.com/hexgrad/kokoro")


def info(service: SpeechService) -> Info:
    """Every offered voice under its language's BCP 47 tag (kcc.speech.languages: 'en-US', 'ja-JP'),
    which Home Assistant groups its voice lists by and matches a pipeline's language against."""
    voices = [TtsVoice(name=v["id"], attribution=ATTRIBUTION, installed=True, version=None,
                       description=f"{v['id']} ({v['language_name'] or v['language']}"
                                   f"{', ' + v['gender'] if v['gender'] else ''})",
                       languages=[LANGUAGES[v["language"]].tag if v["language"] in LANGUAGES else v["language"]])
              for v in service.voices.listing()]
    # installed: warm (kcc.speech.serve.warmup); `kcc wyoming` listens only then, so it is always
    # true there, but a service still warming says so
    return Info(tts=[TtsProgram(name="kcc", attribution=ATTRIBUTION, installed=service.ready_state() == "ready",
                                version=None,
                                description="Kokoro-82M compiled to C (kcc)", voices=voices,
                                supports_synthesize_streaming=True)])


def _cut(text: str) -> tuple[str, str]:
    """(what to speak now, the rest): all of `text` if one request holds it, else up to its last
    space within MAX_INPUT_CHARS (or exactly that many characters without one)."""
    if len(text) <= MAX_INPUT_CHARS:
        return text, ""
    cut = text.rfind(" ", 1, MAX_INPUT_CHARS) + 1 or MAX_INPUT_CHARS
    return text[:cut], text[cut:]


class ClientGone(ConnectionError):
    """The client closed the connection or stopped reading."""


class SpeechHandler(AsyncEventHandler):
    def __init__(self, service: SpeechService, *args, limits: WyomingLimits | None = None,
                 slot: Slot | DetachedSlot | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.service = service
        self.limits = limits or WyomingLimits()
        self.slot = slot or DetachedSlot()
        self.streaming = False
        self.voice: str | None = None
        self.pending = ""
        self.gone = asyncio.Event()

    async def run(self) -> None:
        """The events in order; a reader task reads ahead (bounded) so that a client that leaves
        during a synthesis is noticed at once (self.gone)."""
        events: asyncio.Queue = asyncio.Queue(maxsize=8)

        async def read_all():
            while True:
                try:
                    event = await read_event(self.reader, self.limits)
                except BadEvent as exc:          # said after the events before it are answered
                    await events.put(exc)
                    if exc.fatal:
                        return
                    continue
                except (ConnectionError, OSError):
                    event = None
                if event is None:                # the client closed (its sending side at least)
                    self.gone.set()
                    await events.put(None)
                    return
                await events.put(event)

        reader = asyncio.create_task(read_all())
        try:
            while (event := await self._next_event(events)) is not None:
                if isinstance(event, BadEvent):
                    await self.write_event(Error(text=str(event), code="bad-event").event())
                    if event.fatal:
                        break
                    continue
                try:
                    if not await self.handle_event(event):
                        break
                except BadEvent as exc:
                    await self.end_with(Error(text=f"{event.type}: {exc}", code="bad-event"), event)
                except ClientGone:
                    raise
                except Exception as exc:         # a bug of ours: said, logged, and the connection goes on
                    logging.getLogger("kcc.speech.serve").exception("wyoming event %s failed", event.type)
                    await self.end_with(Error(text=f"internal error: {type(exc).__name__}", code="internal-error"),
                                        event)
        except ClientGone:
            pass
        finally:
            reader.cancel()
            await self.disconnect()
            self.writer.close()

    async def end_with(self, error: Error, event: Event | None = None) -> None:
        """`error`, then audio-stop where a synthesis was asked for (a `synthesize`, or a sentence
        being spoken: event None), so a reader waiting for audio-stop is not left waiting."""
        await self.write_event(error.event())
        if event is None or Synthesize.is_type(event.type) and not self.streaming:
            await self.write_event(AudioStop().event())

    async def _next_event(self, events: asyncio.Queue):
        """The next event read; while none is queued the connection is idle, and the Listener
        closes it past the deadline (a synthesis being answered has none)."""
        if events.empty():
            lim = self.limits
            self.slot.idle(lim.streaming_idle_s if self.streaming else lim.idle_s if self.slot.served
                           else lim.first_event_s)
        event = await events.get()
        self.slot.busy()
        return event

    async def write_event(self, event: Event) -> None:
        """Send an event; a client that does not take it within write_stall_s is cut (ClientGone)."""
        try:
            await asyncio.wait_for(super().write_event(event), self.limits.write_stall_s)
        except (TimeoutError, ConnectionError, OSError):
            self.gone.set()
            self.writer.transport.abort()
            raise ClientGone("the client stopped reading or went away") from None

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
            self.streaming, self.pending, self.voice = True, "", self._voice_for(voice_field(event.data))
        elif SynthesizeChunk.is_type(event.type):
            text = text_field(event.data)
            if not self.streaming:
                raise BadEvent("synthesize-chunk without a synthesize-start")
            self.pending += text
            # a sentence is complete once its mark is followed by whitespace (so "3.14" waits), or at
            # once after a CJK or Devanagari mark (kcc.speech.sentences: the one rule)
            ends = sentence_ends(self.pending, complete=False)
            if ends:
                done, self.pending = self.pending[:ends[-1]], self.pending[ends[-1]:]
                while done:                                # up to the last sentence end, in pieces a request holds
                    piece, done = _cut(done)
                    await self.speak(piece, self.voice)
            while len(self.pending) > MAX_INPUT_CHARS:     # no sentence end in sight: speak at a space
                done, self.pending = _cut(self.pending)
                await self.speak(done, self.voice)
        elif SynthesizeStop.is_type(event.type):        # without a stream open: nothing to speak, still answered
            if self.streaming and self.pending.strip():
                await self.speak(self.pending, self.voice)
            self.streaming, self.pending = False, ""
            await self.write_event(SynthesizeStopped().event())
        elif Synthesize.is_type(event.type):
            text, voice = text_field(event.data, required=False), voice_field(event.data)
            if self.streaming:                           # sent for servers without streaming: the stream says it
                return True
            if not text.strip():                         # an empty file, not a wait for one that never comes
                await self.write_event(AudioStart(rate=SAMPLE_RATE, width=2, channels=1).event())
                await self.write_event(AudioStop().event())
                return True
            await self.speak(text, self._voice_for(voice))
        return True

    async def speak(self, text: str, voice: str | None) -> None:
        if not text.strip():
            return
        if len(text) > MAX_INPUT_CHARS:
            await self.end_with(wyoming_error(ApiError(413, f"text has {len(text)} characters; the limit is "
                                                            f"{MAX_INPUT_CHARS}")))
            return
        service = self.service
        try:
            job = service.submit(SpeechRequest.build(text, voice=voice, format="pcm", stream=True),
                                 asyncio.get_running_loop())
        except RequestError as err:
            await self.write_event(Error(text=err.message, code="400").event())
            return
        except ApiError as err:
            await self.end_with(wyoming_error(err))
            return
        fmt = {"rate": SAMPLE_RATE, "width": 2, "channels": 1}
        started = False
        try:
            while True:
                item = await self._next_item(job)
                if item[0] == "error":
                    await self.write_event(wyoming_error(item[1]).event())
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
            await self.write_event(AudioStop().event())    # after audio, or after the error that ended it
        finally:
            job.cancel.set()              # a dropped connection stops the synthesis at its next chunk


    async def _next_item(self, job):
        """The job's next item, or ClientGone as soon as the client leaves (the job is cancelled
        in speak's finally, G2P included)."""
        if self.gone.is_set():
            raise ClientGone("the client went away")
        item = asyncio.ensure_future(self.service.next_item(job))
        gone = asyncio.ensure_future(self.gone.wait())
        try:
            await asyncio.wait({item, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            gone.cancel()
        if item.done():
            return item.result()
        item.cancel()
        raise ClientGone("the client went away")


async def serve(service: SpeechService, uri: str, limits: WyomingLimits | None = None,
                listener: ListenerLimits | None = None) -> None:
    """Serve until cancelled or SIGTERM. tcp:// connections are accepted, counted, capped and timed
    by kcc's Listener (kcc.speech.serve.listener); stdio:// and unix:// (local only) by the wyoming
    package's server."""
    parts = urlsplit(uri)
    if parts.scheme != "tcp":
        await AsyncServer.from_uri(uri).run(partial(SpeechHandler, service, limits=limits))
        return
    if parts.hostname is None or parts.port is None:
        raise ValueError("A port must be specified when using a 'tcp://' URI")
    listener = listener or ListenerLimits()

    async def serve_one(slot: Slot) -> None:
        reader, writer = await asyncio.open_connection(sock=slot.sock)
        slot.abort = writer.transport.abort
        await SpeechHandler(service, reader, writer, limits=limits, slot=slot).run()

    await serve_until_stopped(bind(parts.hostname, parts.port, listener.backlog), serve_one, listener, "Wyoming")
