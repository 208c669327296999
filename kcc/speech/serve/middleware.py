"""The outermost ASGI layer: a cap on requests in flight (503 JSON + Retry-After), a deadline on
each response's writing, and one JSON access-log line per request (JSON escapes control
characters, so a hostile path cannot forge log lines or colour a terminal)."""
from __future__ import annotations

import json
import logging
import time

from starlette.responses import JSONResponse

from kcc.speech.serve.request import ApiError

access_log = logging.getLogger("kcc.speech.serve.access")


class StreamAborted(Exception):
    """A streamed response failed after its first byte; the connection is cut so the client sees it."""


class ResponseDeadline(StreamAborted):
    """A response was still being written past the server's response deadline (a client that
    reads too slowly): the stream is cut and its request slot freed."""


def error_response(err: ApiError) -> JSONResponse:
    return JSONResponse(err.body(), err.status, headers=err.headers)


class Gate:
    """Outermost ASGI layer: the concurrent-request cap and the access log."""

    def __init__(self, app, max_connections: int, response_timeout_s: float = float("inf")):
        """response_timeout_s: the longest a response may take from its first byte to its last
        (a client that stops reading altogether is cut sooner: kcc.speech.serve.connection)."""
        self.app, self.max_connections, self.active = app, max_connections, 0
        self.response_timeout_s = response_timeout_s

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        t0, seen = time.perf_counter(), {"status": 0, "bytes": 0, "complete": False, "started": 0.0}

        async def counting_send(message):
            if message["type"] == "http.response.start":
                seen["status"], seen["started"] = message["status"], time.monotonic()
            elif message["type"] == "http.response.body":
                if time.monotonic() - seen["started"] > self.response_timeout_s:
                    raise ResponseDeadline(f"response still being written after {self.response_timeout_s:g} s")
                seen["bytes"] += len(message.get("body", b""))
                seen["complete"] = not message.get("more_body", False)
            await send(message)

        try:
            if self.active >= self.max_connections and scope.get("path") != "/health":   # liveness stays cheap
                err = ApiError(503, f"server busy: {self.active} requests in flight", headers={"Retry-After": "1"})
                return await error_response(err)(scope, receive, counting_send)
            self.active += 1
            try:
                await self.app(scope, receive, counting_send)
            except StreamAborted as exc:  # returning mid-response makes the server drop the connection
                logging.getLogger("kcc.speech.serve").warning("stream cut: %s", json.dumps(str(exc)))
            finally:
                self.active -= 1
        finally:
            client = scope.get("client") or ("-", 0)
            access_log.info(json.dumps({
                "client": f"{client[0]}:{client[1]}", "method": scope.get("method"), "path": scope.get("path"),
                "query": scope.get("query_string", b"").decode("latin-1"), "status": seen["status"],
                "bytes": seen["bytes"], "complete": seen["complete"], "ms": round(1000 * (time.perf_counter() - t0), 1)}, ensure_ascii=True))
