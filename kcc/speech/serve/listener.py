"""Accepting connections for both servers (`kcc serve`, plain and TLS, and `kcc wyoming`): every
socket is counted, capped and under a deadline from the moment it is accepted, before TLS and
before any protocol byte.

Left to asyncio (loop.create_server), a TLS server creates the HTTP protocol only after the
handshake, so sockets that never start one were neither counted nor timed (asyncio held each
60 s); the Wyoming server had no deadline and no cap at all; and asyncio logged a traceback per
failed accept once the fd limit was reached (hundreds of thousands of lines). Here instead:
- `Listener` accepts itself and gives each socket a `Slot`: the socket waits (a reader
  callback, no protocol, no TLS buffers) until its first byte arrives within `first_byte_s`,
  then the server takes it over (`serve(slot)`: TLS handshake, HTTP, Wyoming);
- a slot is either idle (waiting for the client: closed at its deadline) or busy (a request in
  progress: no deadline here, the server's own write-stall and request deadlines apply); the
  server says which (`slot.idle(seconds)`, `slot.busy()`);
- at `max_open` slots a new connection closes the oldest idle one that has had no complete
  request yet, else the one idle longest, else (every one busy) the new one is closed;
- `max_open` is sized below the process's fd limit (raise_fd_limit raises the soft limit to the
  hard one at start), leaving FD_HEADROOM for the model, voices, logs and threads;
- a failed accept (EMFILE, ENFILE, ENOBUFS, ENOMEM) pauses accepting briefly and lowers the
  cap below what is open (closing idle connections down to it); failures, refusals and closings are counted and logged once per
  `log_interval_s` with their counts, never per event.
"""
from __future__ import annotations

import asyncio
import errno
import logging
import os
import resource
import signal
import socket
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

log = logging.getLogger("kcc.speech.serve.listener")

FD_HEADROOM = 256          # fds kept free for the model, voices, G2P data, logs and threads
MAX_OPEN_CEILING = 2048    # a socket past its first byte may hold ~300 KB (TLS buffers): 2048 ~ 600 MB at most
ACCEPT_BATCH = 64          # accepts per readiness event (a flood does not starve the other callbacks)
ACCEPT_PAUSE_S = 0.1       # after a failed accept (the listening socket stays readable: no busy loop)
ACCEPT_ERRORS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


@dataclass(frozen=True)
class ListenerLimits:
    max_open: int | None = None     # open connections; None: sized from the fd limit (open_limit)
    first_byte_s: float = 10.0      # a connection must send its first byte within this
    takeover_s: float = 10.0        # then the server must take it over (the TLS handshake) within this
    log_interval_s: float = 60.0    # accept failures, refusals and closings: one log line per interval
    backlog: int = 1024


def raise_fd_limit() -> int:
    """Raise RLIMIT_NOFILE's soft limit to the hard one (the usual 1024 soft limit caps a server
    at ~1000 sockets for no reason); -> the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 1 << 20
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target <= soft:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):       # a kernel cap below the hard limit (nr_open): keep what we have
        return soft
    return target


def open_limit(fd_limit: int | None = None) -> int:
    """Open connections allowed under `fd_limit` (default: the soft RLIMIT_NOFILE): FD_HEADROOM
    (half of a small limit) stays free, at most MAX_OPEN_CEILING, at least 8."""
    if fd_limit is None:
        fd_limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if fd_limit == resource.RLIM_INFINITY:
            fd_limit = 1 << 20
    return max(8, min(MAX_OPEN_CEILING, fd_limit - min(FD_HEADROOM, fd_limit // 2)))


class Tally:
    """Counted events logged once per interval: the first at once (with those of the same loop
    iteration), the rest summed per interval."""

    def __init__(self, loop: asyncio.AbstractEventLoop, interval_s: float, what: str):
        self.loop, self.interval_s, self.what = loop, interval_s, what
        self.counts: Counter = Counter()
        self.lines = 0                  # log lines written (tests bound the log by it)
        self._timer: asyncio.Handle | None = None

    def add(self, event: str) -> None:
        self.counts[event] += 1
        if self._timer is None:
            self._timer = self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._timer = None
        if self.counts:
            self.lines += 1
            log.warning("%s: %s", self.what, ", ".join(f"{n} {event}" for event, n in sorted(self.counts.items())))
            self.counts.clear()
            self._timer = self.loop.call_later(self.interval_s, self._flush)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class Slot:
    """One accepted connection, from accept to close."""

    def __init__(self, listener: Listener, sock: socket.socket):
        self.listener, self.sock = listener, sock
        self.served = False              # a complete request has arrived
        self.closing = False
        self.task: asyncio.Task | None = None                  # the server's, once it took the socket over
        self.abort: Callable[[], None] | None = None           # the server's transport.abort, once it has one
        self._timer: asyncio.TimerHandle | None = None

    def idle(self, deadline_s: float) -> None:
        """Waiting for the client: closed unless a request arrives within `deadline_s`."""
        if self.closing:
            return
        self._cancel_timer()
        self._timer = self.listener.loop.call_later(deadline_s, self._expire)
        self.listener._set_idle(self)

    def busy(self) -> None:
        """A complete request arrived: no deadline here, and never closed to make room."""
        self._cancel_timer()
        self.served = True
        self.listener._set_busy(self)

    def close(self) -> None:
        """Close now (a deadline, room for a new connection, shutdown); the count drops when the
        socket is really gone."""
        if self.closing:
            return
        self.listener._closing(self)
        if self.task is None:            # still waiting for its first byte: ours alone
            self.listener.loop.remove_reader(self.sock.fileno())
            self.sock.close()
            self.listener._gone(self)
        elif self.abort is not None:
            self.abort()
        else:                            # mid-takeover (the TLS handshake): cancelling it closes the transport
            self.task.cancel()

    def _expire(self) -> None:
        self._timer = None
        self.listener.tally.add("closed idle at their deadline")
        self.close()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


class DetachedSlot:
    """The Slot of a connection no Listener accepted (Wyoming over stdio or a Unix socket): no
    deadline, no count."""
    served = False

    def idle(self, deadline_s: float) -> None:
        pass

    def busy(self) -> None:
        self.served = True


class Listener:
    """Accepts on `socks` and hands each connection, after its first byte, to `serve(slot)`."""

    def __init__(self, socks: list[socket.socket], serve: Callable[[Slot], Awaitable[None]],
                 limits: ListenerLimits | None = None, name: str = "server"):
        self.socks, self.serve = socks, serve
        self.limits = limits or ListenerLimits()
        self.max_open = self.limits.max_open or open_limit()
        self.loop = asyncio.get_running_loop()
        self.tally = Tally(self.loop, self.limits.log_interval_s, f"{name} connections")
        self.slots: set[Slot] = set()
        self._fresh: dict[Slot, None] = {}     # idle, no complete request yet, in accept order
        self._between: dict[Slot, None] = {}   # idle after a request, in the order they went idle
        self._accepting = False
        self._live = 0
        self.accepted = 0                      # connections taken in (tests and bench read it)
        for sock in socks:
            sock.setblocking(False)
        self._resume()

    @property
    def open(self) -> int:
        """Connections counted against max_open (those being closed are not)."""
        return self._live

    # -- accepting ------------------------------------------------------------------------------
    def _resume(self) -> None:
        if not self._accepting and self.socks:
            self._accepting = True
            for sock in self.socks:
                self.loop.add_reader(sock.fileno(), self._accept, sock)

    def _pause(self) -> None:
        if self._accepting:
            self._accepting = False
            for sock in self.socks:
                self.loop.remove_reader(sock.fileno())

    def _accept(self, listening: socket.socket) -> None:
        for _ in range(ACCEPT_BATCH):
            try:
                sock, _ = listening.accept()
            except (BlockingIOError, InterruptedError):
                return
            except ConnectionAbortedError:       # the client gave up while queued
                continue
            except OSError as exc:               # counted, never logged per event; accepting pauses briefly
                self.tally.add(f"accepts failed ({os.strerror(exc.errno) if exc.errno else exc})")
                if exc.errno in ACCEPT_ERRORS:
                    self._lower_cap()
                self._pause()
                self.loop.call_later(ACCEPT_PAUSE_S, self._resume)
                return
            self._admit(sock)

    def _admit(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        if self._live >= self.max_open and not self._make_room():
            self.tally.add(f"refused at the cap of {self.max_open} (every connection busy)")
            sock.close()
            return
        slot = Slot(self, sock)
        self.slots.add(slot)
        self._live += 1
        self.accepted += 1
        slot.idle(self.limits.first_byte_s)
        self.loop.add_reader(sock.fileno(), self._first_byte, slot)

    def _lower_cap(self) -> None:
        """The fds ran out below max_open (other files, another limit): the cap drops below what is
        open now and idle connections are closed down to it, so the next accepts find fds."""
        cap = max(8, self._live - ACCEPT_BATCH)
        if cap < self.max_open:
            self.tally.add(f"cap lowered to {cap} (out of file descriptors)")
            self.max_open = cap
        while self._live > self.max_open and self._make_room():
            pass

    def _make_room(self) -> bool:
        """Close the oldest idle connection that has had no request, else the one idle longest."""
        victim = next(iter(self._fresh), None) or next(iter(self._between), None)
        if victim is None:
            return False
        self.tally.add("idle closed to make room")
        victim.close()
        return True

    # -- handing over ---------------------------------------------------------------------------
    def _first_byte(self, slot: Slot) -> None:
        self.loop.remove_reader(slot.sock.fileno())
        slot.idle(self.limits.takeover_s)       # the server re-arms it once it has the connection
        slot.task = self.loop.create_task(self._run(slot))

    async def _run(self, slot: Slot) -> None:
        try:
            await self.serve(slot)
        except (OSError, asyncio.CancelledError, EOFError):
            pass                                 # a failed handshake, a reset, a close of ours: nothing to say
        except Exception as exc:                 # a bug of ours: counted, not logged per connection
            self.tally.add(f"failed ({type(exc).__name__})")
            log.debug("connection failed", exc_info=True)
        finally:
            if not slot.closing:
                self._closing(slot)
            self._gone(slot)

    # -- book-keeping ---------------------------------------------------------------------------
    def _set_idle(self, slot: Slot) -> None:
        if slot.served:
            self._between.pop(slot, None)
            self._between[slot] = None
        else:
            self._fresh.setdefault(slot, None)

    def _set_busy(self, slot: Slot) -> None:
        self._fresh.pop(slot, None)
        self._between.pop(slot, None)

    def _closing(self, slot: Slot) -> None:
        slot.closing = True
        slot._cancel_timer()
        self._set_busy(slot)
        self._live -= 1

    def _gone(self, slot: Slot) -> None:
        self.slots.discard(slot)

    # -- shutting down (uvicorn calls close() then wait_closed(), as on an asyncio Server) -------
    def close(self, connections: bool = False) -> None:
        """Stop accepting; close the connections no server has yet (all of them with `connections`)."""
        self._pause()
        for sock in self.socks:
            sock.close()
        self.socks = []
        for slot in list(self.slots):
            if connections or slot.abort is None:
                slot.close()
        self.tally.close()

    async def wait_closed(self, timeout_s: float = 1.0) -> None:
        """Wait (briefly) for the connections closed by close() to be gone."""
        loop, deadline = self.loop, self.loop.time() + timeout_s
        while any(s.closing for s in self.slots) and loop.time() < deadline:
            await asyncio.sleep(0.01)


async def serve_until_stopped(socks: list[socket.socket], serve: Callable[[Slot], Awaitable[None]],
                              limits: ListenerLimits | None = None, name: str = "server") -> None:
    """A Listener on `socks` until cancelled or SIGTERM; then every connection is closed."""
    listener = Listener(socks, serve, limits, name)
    loop, stop = asyncio.get_running_loop(), asyncio.Event()
    try:
        loop.add_signal_handler(signal.SIGTERM, stop.set)
    except (NotImplementedError, RuntimeError, ValueError):   # not the main thread (tests), or no signals
        pass
    try:
        await stop.wait()
    finally:
        try:
            loop.remove_signal_handler(signal.SIGTERM)
        except (NotImplementedError, RuntimeError, ValueError):
            pass
        listener.close(connections=True)
        await listener.wait_closed()


def bind(host: str | None, port: int, backlog: int = 1024) -> list[socket.socket]:
    """Listening sockets for HOST:PORT, one per address it resolves to (as asyncio's create_server
    binds): SO_REUSEADDR, IPv6 sockets IPv6-only so that '::' and '0.0.0.0' can both be bound."""
    infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    socks, seen = [], set()
    try:
        for family, kind, proto, _, addr in infos:
            if (family, addr) in seen:
                continue
            seen.add((family, addr))
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(addr)
            sock.listen(backlog)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


def listening(sock: socket.socket, backlog: int = 1024) -> socket.socket:
    """A socket given bound (a test's, a supervisor's), made to listen."""
    sock.listen(backlog)
    return sock
