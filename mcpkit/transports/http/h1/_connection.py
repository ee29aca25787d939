"""The trio loop of one HTTP/1.1 connection: bytes from the socket into the state machine,
requests to the application one at a time (pipelined ones in order), answers back.

Requests are answered inline in the connection's task. What a connection needs of its server
comes at construction, in the :class:`ServerState` all its connections share (the server
writes the clock and the drain flag there). Deadlines are kept by the server's sweeper
(``listener.py``) from the phase and timestamp each connection records, so waiting
for bytes costs no timer of its own. The same records say how long a connection has held its
place without earning it (``lag``): at the connection cap the laggiest one makes room.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

import trio

from ..exchange import Exchange
from ._direct_exchange import DirectExchange
from ._gate import Gate
from ._io import Io
from ._machine import CONTINUE, H1Connection, Limits, Request, response_head

log = logging.getLogger("mcpkit.http")

#: Past a refusal (400, 413, ...) the rest of what the client sends is read and dropped for a
#: moment, so an ordinary client that sends its whole body still reads the answer.
LINGER_S = 2.0
LINGER_BYTES = 64 * 1024 * 1024


class Phase(IntEnum):
    IDLE = 0  # between requests (keep-alive)
    HEAD = 1  # part of a request head has arrived
    BODY = 2  # the head is complete, the body is arriving
    BUSY = 3  # the application is answering
    CLOSING = 4


class Application(Protocol):
    """What the server needs of the application it serves (``asgi.HttpApp``)."""

    async def serve(self, ex: Exchange) -> None: ...

    def refusal_body(self, path: str | None, status: int, code: str, message: str) -> bytes: ...

    def refused(self, reason: str, path: str | None) -> None:
        """A connection or request refused before the application saw it (for observers)."""


@dataclass(eq=False)
class ServerState:
    """What the connections of one server share, handed to each when it is made: the
    application, the limits and deadlines (seconds), and what changes while the server runs:
    the sweeper's clock (``now``), ``draining``, and the open connections."""

    app: Application
    limits: Limits
    header_timeout: float
    body_timeout: float
    min_body_rate: float  # bytes per second a whole body must keep up; 0: no overall deadline
    keepalive_timeout: float
    send_timeout: float
    connections: set["Connection"] = field(default_factory=set)
    #: requests are answered at most this many at once, in arrival order (None: no cap)
    gate: Gate | None = None
    draining: bool = False
    now: float = 0.0


class Connection:
    def __init__(self, state: ServerState, io: Io, scheme: str) -> None:
        self.state = state
        self.io = io
        self.scheme = scheme
        self.h1 = H1Connection(state.limits)
        self.phase = Phase.HEAD  # a new connection has header_timeout to send a request
        self.since = state.now  # when the phase began (HEAD) or the last byte came (IDLE, BODY)
        self.body_since = 0.0  # when the body of the request being read began
        self.scope = trio.CancelScope()
        self.gate = state.gate
        self.must_close = False
        self.timed_out = False
        self.shed = False  # ended to make room for a new connection
        #: cancelled if the client goes away while they run (see DirectExchange.cancel_on_disconnect)
        self.watchers: list[trio.CancelScope] = []
        self.eof: trio.Event | None = None  # made when someone waits for the client to leave
        self._eof = False

    async def run(self) -> None:
        try:
            with self.scope:
                await self.io.start()
                await self._serve()
            if self.timed_out and self.phase in (Phase.HEAD, Phase.BODY):
                if self.shed:  # no lingering: its place is taken already
                    await self.io.send(self._refusal(408, "the request was too slow while the server was full"), 0)
                else:
                    await self._refuse(408, "the request did not arrive in time")
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError, trio.TooSlowError):
            pass  # the client went away or stopped reading: nothing more to say to it
        finally:
            self.phase = Phase.CLOSING
            self.state.connections.discard(self)
            with trio.CancelScope(shield=True):
                await self.io.aclose()

    async def _serve(self) -> None:
        h1, state = self.h1, self.state
        app = state.app
        while True:
            if not h1.ready:
                if h1.error is not None:
                    await self._refuse(*h1.error)
                    return
                if h1.closed_to_new or self._eof or (state.draining and not h1.in_message):
                    return
                data = await self.io.recv()
                if not data:
                    return
                h1.feed(data)
                if h1.continue_wanted:
                    h1.continue_wanted = False
                    await self.write(CONTINUE)
                phase = Phase.BODY if h1.reading_body else Phase.HEAD if h1.in_message else Phase.IDLE
                if phase != self.phase or phase == Phase.BODY:  # a head's deadline runs from its start
                    self.since = state.now
                    if phase != self.phase and phase == Phase.BODY:
                        self.body_since = state.now
                self.phase = phase
                continue
            req = h1.ready.popleft()
            self.phase = Phase.BUSY
            ex = DirectExchange(self, req)
            gate = self.gate
            if gate is None:
                await app.serve(ex)
            else:
                await gate.enter(ex)
                try:
                    await app.serve(ex)
                finally:
                    gate.leave(ex)
            if not ex.finished:  # the handler gave up mid-response: the framing is broken
                return
            if self.must_close or not req.keep_alive or req.upgrade or state.draining:
                return  # (a refusal still due when the parser closed to new requests is sent above)
            self.phase = Phase.HEAD if h1.in_message else Phase.IDLE
            self.since = state.now

    def closes_after(self, req: Request) -> bool:
        """Does the connection close once ``req`` is answered? The answer's head says so."""
        h1 = self.h1
        return (self.must_close or not req.keep_alive or req.upgrade or self.state.draining
                or (h1.closed_to_new and not h1.ready))

    async def write(self, data: bytes) -> None:
        try:
            await self.io.send(data, self.state.send_timeout)
        except trio.TooSlowError:
            self.must_close = True
            raise BrokenPipeError("the client stopped reading") from None

    async def wait_disconnect(self) -> None:
        """Return when the client has closed the connection (noticed by the sweeper)."""
        if self._eof:
            return
        if self.eof is None:
            self.eof = trio.Event()
        await self.eof.wait()

    def client_gone(self) -> None:
        """The client closed the connection while a request was being answered: cancel the
        work registered for it, wake whoever waits for it."""
        self._eof = True
        if self.eof is not None:
            self.eof.set()
        for scope in self.watchers:
            scope.cancel()

    def _refusal(self, status: int, message: str) -> bytes:
        body = self.state.app.refusal_body(self.h1.refused_path, status, _CODES.get(status, "BAD_REQUEST"), message)
        return response_head(status, [(b"content-type", b"application/json")], length=len(body), close=True) + body

    async def _refuse(self, status: int, message: str) -> None:
        """Answer a request the server will not serve, then close lingering."""
        with trio.move_on_after(LINGER_S):
            await self.io.send(self._refusal(status, message), LINGER_S)
            self.io.shutdown_write()
            drained = 0
            while drained < LINGER_BYTES:
                data = await self.io.recv()
                if not data:
                    break
                drained += len(data)

    def sweep(self, now: float) -> None:
        """Called by the sweeper twice a second: end a connection whose phase has lasted too
        long; notice a client that left while its request is answered (a non-blocking peek
        sees the end of input), so a long request is not left running for nobody."""
        state = self.state
        phase = self.phase
        if phase == Phase.BUSY:
            if (self.watchers or self.eof is not None) and not self._eof and self.io.peer_closed():
                self.client_gone()
            return
        if phase == Phase.IDLE:
            limit = 0.0 if state.draining else state.keepalive_timeout
        elif phase == Phase.HEAD:
            limit = state.header_timeout
        elif phase == Phase.BODY:
            limit = state.body_timeout
            if self.lag(now) >= limit:  # the whole body is late, however steadily it trickles
                self.end(timed_out=True)
                return
        else:
            return
        if now - self.since >= limit:
            self.end(timed_out=True)

    def lag(self, now: float) -> float:
        """Seconds this connection has held its place without earning it: idle between
        requests, sending a request head, or a body behind ``min_body_bytes_per_s``."""
        phase = self.phase
        if phase == Phase.BODY:
            rate = self.state.min_body_rate
            return now - self.body_since - self.h1.body_received / rate if rate else now - self.since
        if phase in (Phase.IDLE, Phase.HEAD):
            return now - self.since
        return -math.inf  # answering a request, or closing: never shed

    def end(self, *, timed_out: bool = False, shed: bool = False) -> None:
        self.timed_out = timed_out or shed
        self.shed = shed
        self.scope.cancel()


_CODES = {400: "BAD_REQUEST", 408: "REQUEST_TIMEOUT", 414: "URI_TOO_LONG", 431: "HEADERS_TOO_LARGE",
          505: "HTTP_VERSION_NOT_SUPPORTED"}
