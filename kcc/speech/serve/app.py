"""The HTTP routes (Starlette): OpenAI's speech API, voices, models, health, the web page.

POST /v1/audio/speech takes OpenAI's body (kcc/speech/serve/request.py). `instructions` is accepted
and ignored (Kokoro has no instruction-following); `model` is one of MODELS (kcc's names and
OpenAI's speech models, all the one Kokoro model; absent: kokoro), any other refused as OpenAI
refuses a model it does not have (404 model_not_found). The response is the requested format's
bytes, chunked as each text chunk
is synthesised (`"stream": false` for one whole file with complete headers), or with
`"stream_format": "sse"` the events of kcc/speech/serve/sse.py. Errors before the first audio byte are
JSON {"error": {message, type, param, code}}; an audio stream that fails later is cut (no final
chunk), an SSE stream ends with an `error` event. Every error path answers JSON, 404 and 405
included; kcc/speech/serve/middleware.py caps requests in flight and writes the access log.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from kcc.speech.serve import fastapi_compat, sse
from kcc.speech.audio.formats import STREAMABLE
from kcc.speech.serve.middleware import Gate, StreamAborted, error_response
from kcc.speech.serve.limits import HttpLimits  # noqa: F401  (re-exported: kcc.speech.serve.app.HttpLimits)
from kcc.speech.serve.request import ApiError, parse_speech
from kcc.speech.serve.security import PAGE_HEADERS, Access, guarded
from kcc.speech.serve.service import SpeechService
from kcc.speech.audio.timestamps import SAMPLE_RATE, SAMPLES_PER_FRAME

STATIC = Path(__file__).with_name("static")
SEND_SLICE = 16 * 1024               # a stream's bytes are sent in slices of at most this (paced)
MODELS = ("kokoro", "kcc", "kokoro-82m", "tts-1", "tts-1-hd", "gpt-4o-mini-tts")


def check_model(model: str) -> None:
    """OpenAI's answer for a model it does not serve: 404, code model_not_found, param model."""
    if model not in MODELS:
        raise ApiError(404, f"The model `{model}` does not exist or you do not have access to it. This server "
                            f"speaks with: {', '.join(MODELS)}", "model", code="model_not_found")


async def read_body(request: Request, limits: HttpLimits) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limits.max_body_bytes):
        raise ApiError(413, f"request body over this server's limit of {limits.max_body_bytes} bytes")
    parts, size = [], 0

    async def collect():
        nonlocal size
        async for part in request.stream():
            size += len(part)
            if size > limits.max_body_bytes:
                raise ApiError(413, f"request body over this server's limit of {limits.max_body_bytes} bytes")
            parts.append(part)

    try:
        await asyncio.wait_for(collect(), limits.body_timeout_s)
    except TimeoutError:
        raise ApiError(408, f"request body not received within {limits.body_timeout_s:g} s") from None
    return b"".join(parts)


async def watch_disconnect(request: Request, job) -> None:
    """Cancel the job when the client goes away (the body is already read)."""
    while not job.cancel.is_set():
        message = await request.receive()
        if message["type"] == "http.disconnect":
            job.cancel.set()


def create_app(service: SpeechService, limits: HttpLimits | None = None, access: Access | None = None) -> Gate:
    """access: key, CORS origins and Host allow-list (kcc.speech.serve.security); None: none of them
    (tests; `kcc serve` always passes one)."""
    limits = limits or HttpLimits()
    downloads = fastapi_compat.Downloads()

    async def speech(request: Request):
        try:
            body = await read_body(request, limits)
            req = parse_speech(body, limits.max_input_chars)
            check_model(req.model)
            link = None if req.sse else fastapi_compat.Downloads.name_for(body, req.response_format)
            job = service.submit(req, asyncio.get_running_loop())
        except ApiError as err:
            return error_response(err)
        except ClientDisconnect:          # gone while sending the body: nobody reads this answer
            return Response(status_code=400)
        watcher = asyncio.create_task(watch_disconnect(request, job))
        handed_over = False

        def stop():
            job.cancel.set()
            watcher.cancel()

        try:
            streamed = req.stream or req.sse
            head, chunks = [], ()
            while True:                   # up to the first audio byte (all of it if not streamed)
                item = await service.next_item(job)
                if item[0] == "error":
                    return error_response(item[1])   # nothing sent yet: still a JSON error
                if item[0] == "plan":
                    chunks = item[1]
                    continue
                head.append(item)
                if item[0] == "end" or (streamed and item[1]):
                    break
            headers = {"X-Kcc-Chunks": str(len(chunks))}
            if link:                      # Kokoro-FastAPI's return_download_link (kcc/speech/serve/fastapi_compat.py)
                headers["X-Download-Path"] = f"/download/{link}"
            media_type = STREAMABLE[req.response_format].media_type
            if not streamed:
                whole = b"".join(i[1] for i in head if i[0] == "bytes")
                if link:
                    downloads.put(link, whole)
                return Response(whole, media_type=media_type, headers=headers)
            body = sse_body(job, head, sum(len(c.ids) for c in chunks), stop) if req.sse else audio_body(
                job, head, stop, (lambda data: downloads.put(link, data)) if link else None)
            handed_over = True            # the body generator stops the job when it ends
            if req.sse:
                return StreamingResponse(body, media_type="text/event-stream",
                                         headers={**headers, "Cache-Control": "no-cache"})
            return StreamingResponse(body, media_type=media_type, headers=headers)
        finally:
            if not handed_over:
                stop()

    async def items(job, head):
        for item in head:
            yield item
        last = head[-1]
        while last[0] not in ("end", "error"):
            last = await service.next_item(job)
            yield last

    async def paced(parts):
        """`parts` ((bytes, seconds of audio in them)) yielded on, the time each took to send (the
        client's reading) added up: past the audio sent so far plus read_lag_s, the client reads
        slower than real time (cut)."""
        waited = sent = 0.0
        async for whole, seconds in parts:
            for at in range(0, len(whole), SEND_SLICE):   # a chunk's seconds of audio sent in slices, each
                part = whole[at:at + SEND_SLICE]          # counted as sent once the next one may go
                t0 = time.monotonic()
                yield part
                waited, sent = waited + time.monotonic() - t0, sent + seconds * len(part) / len(whole)
                if waited > sent + limits.read_lag_s:
                    raise StreamAborted(f"the client took {waited:.0f} s to read {sent:.0f} s of audio: "
                                        "slower than real time")

    def seconds(item) -> float:
        return item[2].audio.size / SAMPLE_RATE if item[2] is not None else 0.0

    async def audio_body(job, head, stop, keep=None):
        """keep: given the whole response's bytes once they are all sent (a download link's file)."""
        sent = [] if keep else None

        async def parts():
            async for item in items(job, head):
                if item[0] == "bytes" and item[1]:
                    yield item[1], seconds(item)
                elif item[0] == "error":
                    raise StreamAborted(item[1].message)
        try:
            async for part in paced(parts()):
                if sent is not None:
                    sent.append(part)
                yield part
            if keep:
                keep(b"".join(sent))
        finally:
            stop()

    async def sse_body(job, head, ids, stop):
        async def parts():
            samples = 0
            async for item in items(job, head):
                if item[0] == "bytes":
                    if item[1]:
                        yield sse.delta(item[1]), seconds(item)
                    if item[2] is not None:
                        samples += item[2].audio.size
                        yield sse.words(item[2]), 0.0
                elif item[0] == "error":
                    yield sse.error(item[1]), 0.0
                elif item[0] == "end":
                    yield sse.done(ids, samples // SAMPLES_PER_FRAME), 0.0
        try:
            async for part in paced(parts()):
                yield part
        finally:
            stop()

    async def voices(request: Request):
        if request.query_params.get("legacy", "").lower() in ("true", "1"):      # Kokoro-FastAPI's old shape
            return JSONResponse(fastapi_compat.legacy_voices(service))
        return JSONResponse({"voices": service.voices.listing(), "default": service.voices.default,
                             "aliases": service.voices.aliases})

    async def models(request: Request):
        return JSONResponse({"object": "list", "data": [{"id": m, "object": "model", "owned_by": "kcc"} for m in MODELS]})

    async def health(request: Request):
        return JSONResponse({"status": "ok", "sample_rate": SAMPLE_RATE})

    async def ready(request: Request):
        state = service.ready_state()   # 'warming' until kcc.speech.serve.warmup has run: ready means warm
        doc = {"status": state, "workers": service.limits.workers,
               "running": service.running, "waiting": service.waiting, "queue": service.limits.max_queue}
        return JSONResponse(doc, 200 if state == "ready" else 503)

    async def index(request: Request):
        return FileResponse(STATIC / "index.html", media_type="text/html; charset=utf-8", headers=PAGE_HEADERS)

    async def http_error(request: Request, exc: HTTPException):
        message = {404: f"no route {request.method} {request.url.path}; see GET /v1/models, POST /v1/audio/speech",
                   405: f"method {request.method} not allowed on {request.url.path}"}.get(exc.status_code, exc.detail)
        return error_response(ApiError(exc.status_code, message, headers=exc.headers))

    async def server_error(request: Request, exc: Exception):
        if not isinstance(exc, StreamAborted):     # the Gate logs those, without a traceback
            logging.getLogger("kcc.speech.serve").exception("unhandled error")
        return error_response(ApiError(500, f"internal error: {type(exc).__name__}"))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        await asyncio.get_running_loop().run_in_executor(None, service.close)

    app = Starlette(routes=[
        Route("/", index, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
        Route("/health", health, methods=["GET"]),
        Route("/ready", ready, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/audio/voices", voices, methods=["GET"]),
        Route("/v1/audio/speech", speech, methods=["POST"]),
        *fastapi_compat.routes(service, limits, check_model, read_body, downloads),   # Kokoro-FastAPI's clients
    ], exception_handlers={HTTPException: http_error, Exception: server_error}, lifespan=lifespan)
    return Gate(guarded(app, access or Access()), limits.max_connections, limits.response_timeout_s)
