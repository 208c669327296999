"""Deadlines for each HTTP connection, below the app (uvicorn's h11 protocol, subclassed).

uvicorn times out nothing before a request's head has arrived (its keep-alive timer starts
after a response and any byte cancels it), and its `limit_concurrency` counts open connections,
so 80 sockets that never send a byte (or send a header line every few seconds) made every route
answer 503. Here instead:
- a connection must deliver a complete request head within `head_timeout_s` of opening or of
  its previous response ending, else it is closed (idle and slowloris clients alike);
- a connection whose writes stay paused (the client stopped reading: the transport's buffer
  is over its high-water mark) for `write_stall_s` is aborted, which uvicorn reports to the
  app as a disconnect, so the request's synthesis is cancelled and its slot freed;
- at `max_open` connections a new one closes the oldest connection that has no request in
  progress (an idle one), so idle sockets cannot crowd out real requests.
Requests in flight are capped by the app (kcc.speech.serve.middleware.Gate), not here.
"""
from __future__ import annotations

import asyncio
from dataclasses import dataclass

from uvicorn.protocols.http.h11_impl import H11Protocol


@dataclass(frozen=True)
class ConnectionLimits:
    head_timeout_s: float = 10.0     # a request head must be complete within this
    write_stall_s: float = 30.0      # writes paused (client not reading) this long: the connection is aborted
    max_open: int = 512              # open connections; past it the oldest idle one is closed


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with `limits` (uvicorn.Config(http=...) takes the class)."""

    class GuardedH11Protocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._head_timer = self._stall_timer = None
            self._arm_head_timer()
            if len(self.connections) > limits.max_open:
                idle = [c for c in self.connections if c is not self and getattr(c, "_head_timer", None)]
                if idle:
                    min(idle, key=lambda c: c._opened)._expire()

        def _arm_head_timer(self) -> None:
            self._cancel("_head_timer")
            self._opened = self.loop.time()
            self._head_timer = self.loop.call_later(limits.head_timeout_s, self._expire)

        def _cancel(self, name: str) -> None:
            timer = getattr(self, name, None)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)

        def _expire(self) -> None:
            """No complete request head in time (or evicted as the oldest idle connection)."""
            self._cancel("_head_timer")
            if not self.transport.is_closing():
                self.transport.abort()

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:           # a request head arrived
                self._cancel("_head_timer")

        def on_response_complete(self) -> None:
            self._arm_head_timer()                # the next head (keep-alive) gets the same deadline
            super().on_response_complete()

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._stall_timer is None:
                self._stall_timer = self.loop.call_later(limits.write_stall_s, self.transport.abort)

        def resume_writing(self) -> None:
            self._cancel("_stall_timer")
            super().resume_writing()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel("_head_timer")
            self._cancel("_stall_timer")
            super().connection_lost(exc)

    return GuardedH11Protocol


def uvicorn_options(limits: ConnectionLimits | None = None) -> dict:
    """The connection options of uvicorn.Config / uvicorn.run that `kcc serve` (and its tests) use."""
    return {"http": guarded_protocol(limits or ConnectionLimits()), "timeout_keep_alive": 5}
