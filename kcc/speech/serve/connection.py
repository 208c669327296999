"""`kcc serve`'s connections: deadlines for each HTTP connection below the app (uvicorn's h11
protocol, subclassed), on sockets accepted by kcc.speech.serve.listener (plain or TLS).

uvicorn times out nothing before a request's head has arrived (its keep-alive timer starts
after a response and any byte cancels it), and its `limit_concurrency` counts open connections,
so 80 sockets that never send a byte (or send a header line every few seconds) made every route
answer 503; behind TLS, asyncio made the protocol only after the handshake, so sockets that
never started one escaped every count and deadline. Here instead:
- the Listener accepts, counts and caps every socket and gives it `first_byte_s` for its first
  byte and `takeover_s` for the TLS handshake (kcc.speech.serve.listener);
- a connection must then deliver a complete request head within `head_timeout_s` of the
  handshake or of its previous response ending, else it is closed (idle and slowloris clients
  alike): the connection's Slot is idle with that deadline, busy while a request runs, and the
  Listener closes idle ones first when it needs room;
- a connection whose writes stay paused (the client stopped reading: the transport's buffer
  is over its high-water mark) for `write_stall_s` is aborted, which uvicorn reports to the
  app as a disconnect, so the request's synthesis is cancelled and its slot freed.
Requests in flight are capped by the app (kcc.speech.serve.middleware.Gate), not here.
"""
from __future__ import annotations

import asyncio
import ssl
import sys
from dataclasses import dataclass

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from kcc.speech.cli.exits import Exit
from kcc.speech.serve.listener import Listener, ListenerLimits, Slot, bind, listening


@dataclass(frozen=True)
class ConnectionLimits:
    head_timeout_s: float = 10.0     # a request head must be complete within this
    write_stall_s: float = 30.0      # writes paused (client not reading) this long: the connection is aborted


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """uvicorn's h11 protocol with `limits`, on a Listener's Slot (set as `.slot` before connection_made)."""

    class GuardedH11Protocol(H11Protocol):
        slot: Slot

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._stall_timer = None
            self.closed = self.loop.create_future()
            self.slot.abort = transport.abort
            self.slot.idle(limits.head_timeout_s)

        def _cancel(self, name: str) -> None:
            timer = getattr(self, name, None)
            if timer is not None:
                timer.cancel()
                setattr(self, name, None)

        def handle_events(self) -> None:
            cycle = self.cycle
            super().handle_events()
            if self.cycle is not cycle:           # a request head arrived
                self.slot.busy()

        def on_response_complete(self) -> None:
            self.slot.idle(limits.head_timeout_s)  # the next head (keep-alive) gets the same deadline
            super().on_response_complete()

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._stall_timer is None:
                self._stall_timer = self.loop.call_later(limits.write_stall_s, self.transport.abort)

        def resume_writing(self) -> None:
            self._cancel("_stall_timer")
            super().resume_writing()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel("_stall_timer")
            super().connection_lost(exc)
            if not self.closed.done():
                self.closed.set_result(None)

    return GuardedH11Protocol


class GuardedServer(uvicorn.Server):
    """uvicorn's server with kcc's Listener in place of asyncio's create_server: uvicorn runs the
    lifespan, the signals and the graceful shutdown; the Listener accepts (on `sockets` when
    given, else on config.host:config.port) and hands each connection, TLS-wrapped when
    config.ssl is set, to the guarded h11 protocol."""

    def __init__(self, config: uvicorn.Config, connection: ConnectionLimits | None = None,
                 listener: ListenerLimits | None = None):
        super().__init__(config)
        self.connection = connection or ConnectionLimits()
        self.listener_limits = listener or ListenerLimits()
        self.listener: Listener | None = None

    async def startup(self, sockets: list | None = None) -> None:
        # uvicorn (0.55, pinned) runs the lifespan and opens one server per socket given: none here
        await super().startup(sockets=[])
        if not self.started:
            return
        config, limits = self.config, self.listener_limits
        try:
            socks = [listening(s, limits.backlog) for s in sockets] if sockets else \
                bind(config.host, config.port, limits.backlog)
        except OSError as exc:
            print(f"kcc serve: cannot listen on {config.host}:{config.port}: {exc.strerror or exc}", file=sys.stderr)
            await self.lifespan.shutdown()
            sys.exit(Exit.CANNOT_LISTEN)
        protocol_class = guarded_protocol(self.connection)
        context: ssl.SSLContext | None = config.ssl

        def make_protocol(slot: Slot) -> H11Protocol:
            protocol = protocol_class(config=config, server_state=self.server_state, app_state=self.lifespan.state)
            protocol.slot = slot
            return protocol

        async def serve(slot: Slot) -> None:
            loop = asyncio.get_running_loop()
            _, protocol = await loop.connect_accepted_socket(
                lambda: make_protocol(slot), slot.sock, ssl=context,
                ssl_handshake_timeout=limits.takeover_s if context else None)
            await protocol.closed

        self.listener = Listener(socks, serve, limits, "HTTP")
        self.servers = [self.listener]        # uvicorn's shutdown closes it as it would its asyncio Server


def http_server(app, connection: ConnectionLimits | None = None, listener: ListenerLimits | None = None,
                **config) -> GuardedServer:
    """The server `kcc serve` (and its tests) run: `config` is uvicorn.Config's (host, port, ssl_*)."""
    return GuardedServer(uvicorn.Config(app, timeout_keep_alive=5, **config), connection, listener)
