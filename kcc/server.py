"""`kcc serve`: an OpenAI-compatible speech endpoint on the standard library's HTTP server.

POST /v1/audio/speech with JSON {"model", "input", "voice", "speed", "response_format": "wav" |
"pcm", "stream": bool, "timestamps": bool, "seed": int (the last two are kcc extensions)}:
- wav: a 24 kHz mono 16-bit WAV file; pcm: the raw little-endian 16-bit samples.
- stream=true: chunked transfer encoding, one HTTP chunk per text chunk as soon as it is
  synthesised (a streamed WAV's header carries 0xFFFFFFFF sizes, the usual open-ended form).
- timestamps=true: JSON {"audio": base64 of the requested format, "sample_rate", "timestamps":
  {"words": [{word, phonemes, start_s, end_s}], "chunks": [...]}}; with stream=true, NDJSON:
  one {"type": "chunk", "index", "audio" (that chunk alone: a whole WAV, or raw pcm), "words"}
  line per chunk, then {"type": "done", ...}.
GET /health, /v1/models and /v1/voices describe the server. Errors are JSON {"error": {message,
type, param, code}}: 400 malformed request, 404/405 wrong path or method, 408 slow client,
411/413 body length, 422 unusable values (empty input, unknown voice, bad speed, too long,
unknown format), 500 synthesis failure, 503 busy, 504 over the request time limit.

Requests run in their own threads; the Synthesizer's compiled circuits are shared read-only
(each CompiledCircuit.run call allocates its own arena and outputs), the G2P serialises its
espeak calls, and a semaphore bounds how many syntheses run at once.
"""
from __future__ import annotations

import base64
import json
import struct
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

from kcc.g2p import G2PError, decode_text
from kcc.say import SayError, check_speed, plan, random_voice, synthesize_chunks
from kcc.timestamps import SAMPLE_RATE
from kcc.voices import VoiceError, load_voice
from kcc.wav import pcm16

FORMATS = {"wav": "audio/wav", "pcm": f"audio/pcm;rate={SAMPLE_RATE};channels=1;encoding=s16le"}


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param = status, message, param


def wav_header(data_bytes: int | None) -> bytes:
    """A PCM WAV header; None gives the open-ended streaming form (sizes 0xFFFFFFFF)."""
    data = 0xFFFFFFFF if data_bytes is None else data_bytes
    riff = 0xFFFFFFFF if data_bytes is None else 36 + data_bytes
    return struct.pack("<4sI4s4sIHHIIHH4sI", b"RIFF", riff, b"WAVE", b"fmt ", 16, 1, 1, SAMPLE_RATE,
                       2 * SAMPLE_RATE, 2, 16, b"data", data)


def encode_audio(audio: np.ndarray, fmt: str) -> bytes:
    pcm = pcm16(audio)
    return wav_header(len(pcm)) + pcm if fmt == "wav" else pcm


@dataclass
class SpeechRequest:
    text: str
    voice: str | None
    speed: float
    fmt: str
    stream: bool
    timestamps: bool
    model: str
    seed: int = 0


class SpeechService:
    """What the handler needs: synthesizer, G2P, voices, limits. Shared by all request threads."""

    def __init__(self, synth, g2p, voices_dirs=(), default_voice: str | None = None, workers: int = 2,
                 max_input_chars: int = 20000, max_body_bytes: int = 1 << 20, queue_timeout_s: float = 60.0,
                 request_timeout_s: float = 600.0, socket_timeout_s: float = 30.0, log: bool = True):
        self.synth, self.g2p = synth, g2p
        self.voices_dirs = [Path(d) for d in voices_dirs]
        self.default_voice = default_voice
        self.max_input_chars, self.max_body_bytes = max_input_chars, max_body_bytes
        self.queue_timeout_s, self.request_timeout_s = queue_timeout_s, request_timeout_s
        self.socket_timeout_s, self.log = socket_timeout_s, log
        self.slots = threading.BoundedSemaphore(workers)
        self._packs: dict[str, np.ndarray] = {}
        self._packs_lock = threading.Lock()
        self.pack(default_voice)                          # a bad default fails at start, not per request

    def voice_names(self) -> list[str]:
        names = {p.stem if p.suffix == ".pt" else p.name for d in self.voices_dirs if d.is_dir()
                 for p in d.iterdir() if p.suffix in (".pt", ".npy")}
        return sorted(names)

    def pack(self, voice: str | None) -> np.ndarray:
        key = voice or ""
        with self._packs_lock:
            if key not in self._packs:
                self._packs[key] = random_voice(0) if not voice else load_voice(voice, self.voices_dirs)
            return self._packs[key]

    def parse(self, body: bytes) -> SpeechRequest:
        try:
            doc = json.loads(decode_text(body, "request body"))
        except G2PError as exc:
            raise ApiError(400, str(exc)) from None
        except json.JSONDecodeError as exc:
            raise ApiError(400, f"request body is not JSON: {exc}") from None
        if not isinstance(doc, dict):
            raise ApiError(400, f"request body must be a JSON object, got {type(doc).__name__}")
        text = doc.get("input")
        if not isinstance(text, str):
            raise ApiError(400, "'input' is required and must be a string", "input")
        if not text.strip():
            raise ApiError(422, "'input' is empty", "input")
        if len(text) > self.max_input_chars:
            raise ApiError(422, f"'input' has {len(text)} characters, over this server's limit of "
                                f"{self.max_input_chars}", "input")
        voice = doc.get("voice")
        if voice is not None and not isinstance(voice, str):
            raise ApiError(400, "'voice' must be a string", "voice")
        speed = doc.get("speed", 1.0)
        if isinstance(speed, bool) or not isinstance(speed, (int, float)):
            raise ApiError(422, f"'speed' must be a number, got {speed!r}", "speed")
        try:
            speed = check_speed(speed)
        except SayError as exc:
            raise ApiError(422, str(exc), "speed") from None
        fmt = doc.get("response_format", "wav")
        if fmt not in FORMATS:
            raise ApiError(422, f"'response_format' {fmt!r} is not supported; use one of {sorted(FORMATS)}",
                           "response_format")
        flags = {}
        for key in ("stream", "timestamps"):
            flags[key] = doc.get(key, False)
            if not isinstance(flags[key], bool):
                raise ApiError(400, f"'{key}' must be true or false", key)
        model = doc.get("model", "kokoro")
        if not isinstance(model, str):
            raise ApiError(400, "'model' must be a string", "model")
        seed = doc.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 31:
            raise ApiError(422, f"'seed' must be an integer in [0, 2**31), got {seed!r}", "seed")
        return SpeechRequest(text, voice, speed, fmt, flags["stream"], flags["timestamps"], model, seed)


class Handler(BaseHTTPRequestHandler):
    server_version = "kcc"
    protocol_version = "HTTP/1.1"

    @property
    def service(self) -> SpeechService:
        return self.server.service

    def setup(self):
        self.timeout = self.server.service.socket_timeout_s     # bounds every socket read and write
        super().setup()

    def log_message(self, format, *args):
        if self.service.log:
            sys.stderr.write(f"kcc serve: {self.address_string()} {format % args}\n")

    # -- responses --------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, ctype: str, headers: dict | None = None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)
        self.close_connection = True

    def _json(self, status: int, doc: dict, headers: dict | None = None):
        self._send(status, json.dumps(doc, ensure_ascii=False).encode("utf-8"), "application/json", headers)

    def _error(self, err: ApiError):
        kind = "invalid_request_error" if err.status < 500 else "server_error"
        self._json(err.status, {"error": {"message": err.message, "type": kind, "param": err.param,
                                          "code": err.status}})

    def _chunk(self, data: bytes):
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    # -- routes -----------------------------------------------------------------------------
    def do_GET(self):
        s = self.service
        if self.path == "/health":
            self._json(200, {"status": "ok", "g2p": getattr(s.g2p, "description", ""), "sample_rate": SAMPLE_RATE})
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [{"id": "kokoro", "object": "model", "owned_by": "kcc"}]})
        elif self.path == "/v1/voices":
            self._json(200, {"default": s.default_voice or "(seeded random pack)", "voices": s.voice_names()})
        else:
            self._error(ApiError(404, f"no route GET {self.path}; try POST /v1/audio/speech"))

    def do_POST(self):
        if self.path != "/v1/audio/speech":
            return self._error(ApiError(404, f"no route POST {self.path}; the endpoint is /v1/audio/speech"))
        try:
            req = self.service.parse(self._body())
            pack = self._pack(req.voice)
        except ApiError as err:
            return self._error(err)
        if not self.service.slots.acquire(timeout=self.service.queue_timeout_s):
            return self._error(ApiError(503, f"server busy: no synthesis slot free within "
                                             f"{self.service.queue_timeout_s:g} s; retry later"))
        try:
            self._speak(req, pack)
        finally:
            self.service.slots.release()

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower() or self.headers.get("Content-Length") is None:
            raise ApiError(411, "send the JSON body with a Content-Length header")
        try:
            n = int(self.headers["Content-Length"])
        except ValueError:
            raise ApiError(400, f"Content-Length {self.headers['Content-Length']!r} is not a number") from None
        if n < 0 or n > self.service.max_body_bytes:
            raise ApiError(413, f"request body of {n} bytes; the limit is {self.service.max_body_bytes}")
        try:
            body = self.rfile.read(n)
        except TimeoutError:
            raise ApiError(408, f"request body not received within {self.service.socket_timeout_s:g} s") from None
        if len(body) != n:
            raise ApiError(400, f"request body ended after {len(body)} of {n} bytes")
        return body

    def _pack(self, voice):
        try:
            return self.service.pack(voice)
        except VoiceError as exc:
            names = self.service.voice_names()
            raise ApiError(422, f"unknown or unusable voice {voice!r}: {exc}"
                                + (f"; available: {', '.join(names)}" if names else ""), "voice") from None

    def _speak(self, req: SpeechRequest, pack: np.ndarray):
        s = self.service
        deadline = time.monotonic() + s.request_timeout_s
        try:
            chunks = plan(req.text, s.g2p)
        except (SayError, G2PError) as exc:
            return self._error(ApiError(422, str(exc), "input"))
        produced = synthesize_chunks(chunks, s.synth, pack, req.speed, req.seed)

        def next_chunk():
            if time.monotonic() > deadline:
                raise ApiError(504, f"synthesis exceeded this server's {s.request_timeout_s:g} s request limit")
            try:
                return next(produced, None)
            except (SayError, VoiceError) as exc:
                raise ApiError(422, str(exc)) from None
            except Exception as exc:     # SynthesisError, KccRunError: the message names the stage
                raise ApiError(500, f"synthesis failed: {type(exc).__name__}: {exc}") from None

        headers = {"X-Kcc-G2p": getattr(s.g2p, "backend", "custom"), "X-Kcc-Chunks": str(len(chunks))}
        try:
            first = next_chunk()            # errors before any byte is sent still get a JSON error
            if not req.stream:
                done = [first]
                while (c := next_chunk()) is not None:
                    done.append(c)
        except ApiError as err:
            return self._error(err)
        if not req.stream:
            return self._whole(req, done, headers)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-ndjson" if req.timestamps else FORMATS[req.fmt])
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.close_connection = True
        try:
            if req.fmt == "wav" and not req.timestamps:
                self._chunk(wav_header(None))
            c, total = first, 0
            while c is not None:
                total += c.audio.size
                if req.timestamps:
                    line = {"type": "chunk", "index": c.index, "audio": base64.b64encode(
                        encode_audio(c.audio, req.fmt)).decode(), "words": c.words}
                    self._chunk((json.dumps(line, ensure_ascii=False) + "\n").encode())
                else:
                    self._chunk(pcm16(c.audio))
                c = next_chunk()
            if req.timestamps:
                self._chunk((json.dumps({"type": "done", "chunks": len(chunks), "sample_rate": SAMPLE_RATE,
                                         "audio_seconds": round(total / SAMPLE_RATE, 6)}) + "\n").encode())
            self.wfile.write(b"0\r\n\r\n")
        except ApiError as err:         # mid-stream: no terminating chunk, so the client sees a cut
            self.log_message("stream aborted: %s", err.message)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.log_message("client went away mid-stream")

    def _whole(self, req: SpeechRequest, done: list, headers: dict):
        audio = np.concatenate([c.audio for c in done])
        body = encode_audio(audio, req.fmt)
        if not req.timestamps:
            return self._send(200, body, FORMATS[req.fmt], headers)
        words = [w for c in done for w in c.words]
        self._json(200, {"model": req.model, "response_format": req.fmt, "sample_rate": SAMPLE_RATE,
                         "audio": base64.b64encode(body).decode(),
                         "timestamps": {"audio_seconds": round(audio.size / SAMPLE_RATE, 6), "words": words,
                                        "chunks": [{"text": c.encoded.text, "phonemes": c.encoded.phonemes,
                                                    "start_s": round(c.offset / SAMPLE_RATE, 6),
                                                    "end_s": round((c.offset + c.audio.size) / SAMPLE_RATE, 6)}
                                                   for c in done]}}, headers)


def make_server(service: SpeechService, host: str = "127.0.0.1", port: int = 0) -> ThreadingHTTPServer:
    """Bound but not yet serving; port 0 picks a free one (server.server_address has it)."""
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.service = service
    return server


def run_cli(args) -> int:
    import os
    from kcc.g2p import G2P
    from kcc.pipeline import SynthesisError
    from kcc.say import RANDOM_VOICE_NOTICE, load_synthesizer
    try:
        g2p = G2P(args.lang, args.g2p)
        print(f"kcc serve: G2P: {g2p.description}", file=sys.stderr)
        if not args.voice:
            print(RANDOM_VOICE_NOTICE + " (requests without 'voice' get it)", file=sys.stderr)
        synth = load_synthesizer(args.checkpoint or os.environ.get("KCC_CHECKPOINT"), args.max_frames,
                                 native=getattr(args, "native", False), threads=getattr(args, "threads", None))
        service = SpeechService(synth, g2p, args.voices_dir, args.voice, workers=args.workers,
                                max_input_chars=args.max_chars, request_timeout_s=args.request_timeout)
    except (SayError, G2PError, VoiceError, SynthesisError) as exc:
        print(f"kcc: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    server = make_server(service, args.host, args.port)
    host, port = server.server_address[:2]
    print(f"kcc serve: listening on http://{host}:{port}/v1/audio/speech", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0
