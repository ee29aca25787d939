"""mcpkit's HTTP/1.1 server: accepting connections, the cap on them, deadlines, the drain.

One task per connection (``_connection.py``); one sweeper task that, twice a second, ends the
connections whose phase has outlasted its deadline: a request head not complete within
``header_timeout_s`` (slowloris), a gap in a body over ``body_timeout_s`` or a whole body
slower than that plus ``min_body_bytes_per_s``, keep-alive idleness over
``keepalive_timeout_s``. At ``max_connections`` a new connection takes the place of the one
that has held its place longest without earning it (idle, or slow with its request: see
``Connection.lag``), so slow clients cannot lock out the others; when every connection is
answering a request, the new one is answered 503 and closed at once.
"""

from __future__ import annotations

import logging
import math
import socket
import ssl
from typing import Any

import trio

from ....server.settings import Settings
from ._gate import Gate
from ._connection import Application, Connection, Phase, ServerState
from ._io import SocketIo, StreamIo
from ._machine import Limits, response_head

log = logging.getLogger("mcpkit.http")
SWEEP_S = 0.5
#: a connection is shed at the cap only once it has lagged this long (a new client's request
#: arrives well within it)
SHED_AFTER_S = 1.0
#: connections are ranked for shedding at most this often (each ranking serves many accepts)
RANK_EVERY_S = 0.1
_BUSY_BODY = b'{"error":{"code":"SERVER_BUSY","message":"too many open connections; retry shortly"}}'
_BUSY = response_head(503, [(b"content-type", b"application/json"), (b"retry-after", b"1")],
                      length=len(_BUSY_BODY), close=True) + _BUSY_BODY


class HttpServer:
    def __init__(self, app: Application, settings: Settings, ssl_context: ssl.SSLContext | None = None) -> None:
        self.state = ServerState(
            app, Limits(settings.max_url_bytes, settings.max_header_bytes, settings.max_headers,
                        settings.max_message_bytes),
            header_timeout=settings.header_timeout_s, body_timeout=settings.body_timeout_s,
            min_body_rate=settings.min_body_bytes_per_s, keepalive_timeout=settings.keepalive_timeout_s,
            send_timeout=settings.send_timeout_s,
            gate=Gate(settings.active_requests, settings.active_request_hold_s) if settings.active_requests > 0 else None)
        self.connections = self.state.connections  # the same set: the connections leave it themselves
        self.max_connections = settings.max_connections
        self.ssl_context = ssl_context
        self._sheddable: list[Connection] = []  # at the cap: who may make room, laggiest last
        self._ranked_at = -math.inf
        #: TCP_USER_TIMEOUT: unacknowledged data for send_timeout_s ends the connection in the kernel
        send_timeout = settings.send_timeout_s
        self._user_timeout_ms = (int(send_timeout * 1000) if _USER_TIMEOUT is not None
                                 and 0 < send_timeout < 2_000_000 else 0)
        self._accepting = trio.CancelScope()
        self._idle = trio.Event()

    async def serve(self, sockets: list[socket.socket], *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until drained (see :meth:`drain`): returns once every connection has closed."""
        self.state.now = trio.current_time()
        async with trio.open_nursery() as connections:
            connections.start_soon(self._sweep)
            with self._accepting:
                async with trio.open_nursery() as accepting:
                    for sock in sockets:
                        accepting.start_soon(self._accept, sock, connections)
                    task_status.started()
            while self.connections:  # draining
                await self._idle.wait()
                self._idle = trio.Event()
            connections.cancel_scope.cancel()

    def drain(self) -> None:
        """Stop accepting; close idle connections now and busy ones after their answer."""
        self.state.draining = True
        self._accepting.cancel()
        for conn in list(self.connections):
            if conn.phase in (Phase.IDLE, Phase.HEAD) and not conn.h1.in_message:
                conn.scope.cancel()
        self._idle.set()

    async def _accept(self, sock: socket.socket, nursery: trio.Nursery) -> None:
        scheme = "https" if self.ssl_context is not None else "http"
        while True:
            try:
                client, _ = sock.accept()
            except BlockingIOError:
                await trio.lowlevel.wait_readable(sock)
                continue
            except OSError as exc:  # out of file descriptors and the like: wait, do not spin
                log.warning("accept failed: %s", exc)
                await trio.sleep(0.1)
                continue
            if len(self.connections) >= self.max_connections and not self._make_room():
                _refuse_busy(client)
                self.state.app.refused("connections", None)
                continue
            client.setblocking(False)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._user_timeout_ms:  # a peer that vanished (no ACK for what we sent) ends the connection
                client.setsockopt(socket.IPPROTO_TCP, _USER_TIMEOUT, self._user_timeout_ms)
            conn = Connection(self.state, self._io(client), scheme)
            self.connections.add(conn)
            nursery.start_soon(self._run, conn)

    def _make_room(self) -> bool:
        """At the cap: end the connection that has lagged longest (at least ``SHED_AFTER_S``),
        so a new one can take its place. The candidates are ranked once for many accepts (again
        when they are used up, at most every ``RANK_EVERY_S``), not per connection accepted."""
        now = trio.current_time()
        if not self._sheddable and now - self._ranked_at >= RANK_EVERY_S:
            self._ranked_at = now
            lags = [(conn.lag(now), conn) for conn in self.connections]
            self._sheddable = [conn for lag, conn in sorted(lags, key=lambda x: x[0]) if lag >= SHED_AFTER_S]
        while self._sheddable:
            conn = self._sheddable.pop()
            if conn in self.connections and conn.lag(now) >= SHED_AFTER_S:
                self.connections.discard(conn)  # its place is the new one's now; it closes at once
                conn.end(shed=True)
                return True
        return False

    def _io(self, client: socket.socket) -> Any:
        if self.ssl_context is None:
            return SocketIo(client)
        stream = trio.SSLStream(trio.SocketStream(trio.socket.from_stdlib_socket(client)), self.ssl_context,
                                server_side=True, https_compatible=True)
        return StreamIo(stream, client)

    async def _run(self, conn: Connection) -> None:
        try:
            await conn.run()
        finally:
            if self.state.draining:
                self._idle.set()

    async def _sweep(self) -> None:
        while True:
            await trio.sleep(SWEEP_S)
            self.state.now = now = trio.current_time()
            for conn in list(self.connections):
                conn.sweep(now)


_USER_TIMEOUT: int | None = getattr(socket, "TCP_USER_TIMEOUT", None)


def _refuse_busy(client: socket.socket) -> None:
    try:
        client.setblocking(False)
        client.send(_BUSY)
        client.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    client.close()


__all__ = ["HttpServer"]
