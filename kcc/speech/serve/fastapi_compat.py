"""Kokoro-FastAPI's routes, served with its semantics where kcc has the capability, so that its
clients (its web UI, Open WebUI, SillyTavern, scripts written for it) work against `kcc serve`.

- POST /dev/captioned_speech: the speech body (the same fields and checks as /v1/audio/speech);
  the answer is JSON {"audio": base64 of the format's bytes, "audio_format", "timestamps":
  [{"word", "start_time", "end_time"}]}: one object (`"stream": false`) or, streamed, one per
  synthesised chunk, each on its own line (Kokoro-FastAPI's JSON stream), timestamps in
  seconds from the start of the whole audio.
- POST /v1/audio/voices/combine: a "a+b" string or a list of names -> the mean of their packs
  as a .pt file (a torch zip that torch.load reads; kcc writes it without torch), named a+b.pt.
- GET /v1/audio/voices?legacy=true: the plain list of names (the default shape is kcc's
  [{"id", "name", ...}], which Kokoro-FastAPI's own default matches in id and name).
- GET /v1/models/{model}: the model object, or 404 model_not_found (OpenAI's and Kokoro-FastAPI's).
- POST /dev/phonemize: {"text", "language"} -> {"phonemes", "tokens"} (token ids; Kokoro-FastAPI
  answers an empty list there).
- return_download_link on /v1/audio/speech (audio, not SSE): the response's X-Download-Path
  header names /download/<name>.<response_format>; GET /v1/download/<name> gives the same bytes
  as the response once it is complete (Kokoro-FastAPI writes the response's bytes to its file
  too; download_format is checked but, where it differs, not re-encoded: the name says what the
  bytes are), kept in memory: the last DOWNLOADS_KEPT files, DOWNLOAD_BYTES
  in all; the name is random (unguessable) and the route is behind the API key like the rest.
Kokoro-FastAPI's speech fields lang_code, volume_multiplier and normalization_options are
taken by kcc.speech.serve.request itself."""
from __future__ import annotations

import asyncio
import base64
import json
import secrets
import tempfile
import threading
from collections import OrderedDict
from pathlib import Path

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from kcc.model.vocab import load_vocab
from kcc.speech.engine import NothingToSay, plan
from kcc.speech.g2p.g2p import G2PError, canonical_language
from kcc.speech.serve.middleware import error_response
from kcc.speech.serve.request import ApiError, parse_json, parse_speech
from kcc.speech.audio.formats import STREAMABLE
from kcc.speech.serve.voice_set import VoiceRequestError
from kcc.weights.torch_zip import save_torch_zip

MAX_PHONEMIZE_CHARS = 4096
DOWNLOADS_KEPT = 32
DOWNLOAD_BYTES = 64 * 1024 * 1024


class Downloads:
    """The audio files return_download_link names, newest kept, bounded in count and bytes."""

    def __init__(self, kept: int = DOWNLOADS_KEPT, max_bytes: int = DOWNLOAD_BYTES):
        self.kept, self.max_bytes = kept, max_bytes
        self._files: OrderedDict[str, bytes] = OrderedDict()
        self._lock = threading.Lock()

    @staticmethod
    def name_for(body: bytes, response_format: str) -> str | None:
        """The file name to announce when the body asks for a link (Kokoro-FastAPI's fields), else None."""
        try:
            doc = json.loads(body)
        except ValueError:
            return None
        if not isinstance(doc, dict) or doc.get("return_download_link") is not True:
            return None
        fmt = doc.get("download_format")
        if fmt is not None and fmt not in STREAMABLE:
            raise ApiError(400, f"'download_format' must be one of {', '.join(STREAMABLE)}", "download_format")
        return f"kcc-{secrets.token_hex(12)}.{response_format}"

    def put(self, name: str, data: bytes) -> None:
        if len(data) > self.max_bytes:
            return                                     # too big to keep: its link answers 404
        with self._lock:
            self._files[name] = data
            while len(self._files) > self.kept or sum(map(len, self._files.values())) > self.max_bytes:
                self._files.popitem(last=False)

    def get(self, name: str) -> bytes | None:
        with self._lock:
            return self._files.get(name)


def _timestamps(chunk) -> list[dict]:
    return [{"word": w["word"], "start_time": round(float(w["start_s"]), 3), "end_time": round(float(w["end_s"]), 3)}
            for w in chunk.words] if chunk is not None else []


def _caption(data: bytes, fmt: str, stamps: list[dict]) -> dict:
    return {"audio": base64.b64encode(data).decode("ascii"), "audio_format": fmt, "timestamps": stamps}


def routes(service, limits, check_model, read_body, downloads: Downloads) -> list[Route]:
    """Kokoro-FastAPI's routes on `service` (the app's SpeechService), with the app's body
    limits, model check, body reader and download store."""

    async def download(request: Request):
        name = request.path_params["filename"]
        data = downloads.get(name)
        if data is None:
            return error_response(ApiError(404, f"no file {name!r} (it expired, or its response is not complete)",
                                           "filename", code="not_found"))
        fmt = name.rsplit(".", 1)[-1]
        return Response(data, media_type=STREAMABLE[fmt].media_type,
                        headers={"Content-Disposition": f'attachment; filename="{name}"'})

    async def captioned_speech(request: Request):
        try:
            req = parse_speech(await read_body(request, limits), limits.max_input_chars)
            check_model(req.model)
            job = service.submit(req, asyncio.get_running_loop())
        except ApiError as err:
            return error_response(err)
        first = await service.next_item(job)
        while first[0] == "plan":
            first = await service.next_item(job)
        if first[0] == "error":                        # nothing sent yet: a JSON error
            job.cancel.set()
            return error_response(first[1])

        async def items():
            item = first
            while True:
                yield item
                if item[0] in ("end", "error"):
                    return
                item = await service.next_item(job)

        if not req.stream:
            audio, stamps = [], []
            async for item in items():
                if item[0] == "error":
                    return error_response(item[1])
                if item[0] == "bytes":
                    audio.append(item[1])
                    stamps += _timestamps(item[2])
            return JSONResponse(_caption(b"".join(audio), req.response_format, stamps))

        async def lines():
            try:
                async for item in items():
                    if item[0] == "bytes" and (item[1] or item[2] is not None):
                        doc = _caption(item[1], req.response_format, _timestamps(item[2]))
                        yield (json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
                    elif item[0] == "error":             # after the first line: the stream is cut
                        return
            finally:
                job.cancel.set()
        return StreamingResponse(lines(), media_type="application/json")

    async def combine_voices(request: Request):
        try:
            doc = json.loads((await read_body(request, limits)).decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            return error_response(ApiError(400, "the body must be a JSON string 'a+b' or a list of voice names",
                                           code="invalid_json"))
        except ApiError as err:
            return error_response(err)
        if isinstance(doc, str):
            names = [v.strip() for v in doc.split("+") if v.strip()]
        elif isinstance(doc, list) and all(isinstance(v, str) for v in doc):
            names = [v.strip() for v in doc if v.strip()]
        else:
            return error_response(ApiError(400, "the body must be a JSON string 'a+b' or a list of voice names",
                                           "voices", code="invalid_type"))
        if not names:
            return error_response(ApiError(400, "No voices provided", "voices"))
        try:
            parts = service.voices.resolve(",".join(names))
        except VoiceRequestError as exc:
            return error_response(ApiError(400, str(exc), "voices"))
        pack = service.voices.pack(parts)
        name = "+".join(names)
        with tempfile.TemporaryDirectory() as tmp:      # torch's zip layout, written without torch
            data = save_torch_zip(pack, Path(tmp) / "voice.pt").read_bytes()
        return Response(data, media_type="application/octet-stream",
                        headers={"Content-Disposition": f'attachment; filename="{name}.pt"',
                                 "Cache-Control": "no-cache"})

    async def phonemize(request: Request):
        try:
            doc = parse_json(await read_body(request, limits))
            text, language = doc.get("text"), doc.get("language", "a")
            if not isinstance(text, str) or not text.strip():
                raise ApiError(400, "'text' must be a non-empty string", "text", code="invalid_value")
            if len(text) > MAX_PHONEMIZE_CHARS:
                raise ApiError(400, f"'text' has {len(text)} characters; the limit is {MAX_PHONEMIZE_CHARS}", "text",
                               code="string_above_max_length")
            if not isinstance(language, str):
                raise ApiError(400, "'language' must be a string such as 'a'", "language", code="invalid_type")
            try:
                g2p = service.g2p_for(canonical_language(language))
            except (G2PError, ValueError) as exc:
                raise ApiError(400, str(exc), "language") from None
            loop = asyncio.get_running_loop()
            try:
                chunks = await loop.run_in_executor(None, lambda: plan(text, g2p, first_limit=None))
            except NothingToSay as exc:
                raise ApiError(400, str(exc), "text") from None
        except ApiError as err:
            return error_response(err)
        phonemes = " ".join(c.phonemes for c in chunks)
        vocab = load_vocab()
        return JSONResponse({"phonemes": phonemes, "tokens": [vocab[p] for p in phonemes if p in vocab]})

    async def model(request: Request):
        name = request.path_params["model"]
        try:
            check_model(name)
        except ApiError as err:
            return error_response(err)
        return JSONResponse({"id": name, "object": "model", "owned_by": "kcc"})

    return [Route("/dev/captioned_speech", captioned_speech, methods=["POST"]),
            Route("/v1/models/{model:path}", model, methods=["GET"]),
            Route("/v1/download/{filename}", download, methods=["GET"]),
            Route("/v1/audio/voices/combine", combine_voices, methods=["POST"]),
            Route("/dev/phonemize", phonemize, methods=["POST"])]


def legacy_voices(service) -> dict:
    """GET /v1/audio/voices?legacy=true: Kokoro-FastAPI's pre-0.3 shape, names only."""
    return {"voices": [v["id"] for v in service.voices.listing()]}
