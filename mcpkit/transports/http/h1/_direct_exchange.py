"""A request of mcpkit's own server, handed to the endpoints and the plain routes directly
(no ASGI dict)."""

from __future__ import annotations

from typing import Any, Protocol

import trio

from ..exchange import SSE_HEADERS, Exchange
from ..wire import BodyTooLarge, Headers
from ._io import Io
from ._machine import LAST_CHUNK, Request, chunk, response_head


class Carrier(Protocol):
    """What an exchange needs of the connection that carries it (``_connection.Connection``)."""

    io: Io
    scheme: str
    must_close: bool
    #: cancel scopes the connection cancels when the client goes away
    watchers: list[trio.CancelScope]
    #: the server's FIFO gate (``_gate.py``), if any
    gate: Any

    def closes_after(self, req: Request) -> bool: ...

    async def write(self, data: bytes) -> None: ...

    async def wait_disconnect(self) -> None: ...


class DirectExchange(Exchange):
    def __init__(self, conn: Carrier, req: Request) -> None:
        self.request_id = ""
        self.status = 0
        self.extra: Headers = []
        self.method = req.method
        self.path = req.path
        self.query = req.query
        self.headers = req.headers
        self.client = conn.io.peer
        self.local = conn.io.local
        self.http_version = req.http_version
        self.finished = False  # the response is complete on the wire
        self._conn = conn
        self._req = req
        self._chunked = False

    async def read_body(self, limit: int) -> bytes:
        body = self._req.body
        if len(body) > limit:
            raise BodyTooLarge
        return body

    async def respond(self, status: int, body: bytes = b"", headers: Headers | None = None,
                      content_type: bytes | None = b"application/json") -> None:
        hdrs = list(headers) if headers else []
        if body and content_type:
            hdrs.append((b"content-type", content_type))
        hdrs += self.extra
        self.status = status
        head = response_head(status, hdrs, length=len(body), close=self._conn.closes_after(self._req))
        self.finished = True
        await self._conn.write(head if self.method == "HEAD" else head + body)

    async def start_stream(self, status: int = 200, headers: Headers | None = None) -> None:
        hdrs = list(SSE_HEADERS if headers is None else headers) + self.extra
        self.status = status
        if self._conn.gate is not None:
            self._conn.gate.leave(self)  # a stream may last: its place goes to the next request
        if self.http_version == "1.0":  # no chunked coding: the body runs to the close
            self._conn.must_close = True
            head = response_head(status, hdrs, length=None, close=True)
        else:
            self._chunked = True
            head = response_head(status, hdrs, length=None, chunked=True, close=self._conn.closes_after(self._req))
        await self._conn.write(head)

    async def send_chunk(self, data: bytes) -> None:
        if data:
            await self._conn.write(chunk(data) if self._chunked else data)

    async def end_stream(self) -> None:
        self.finished = True
        if self._chunked:
            await self._conn.write(LAST_CHUNK)

    async def wait_disconnect(self) -> None:
        await self._conn.wait_disconnect()

    can_watch = True

    def watch(self, scope: trio.CancelScope) -> None:
        self._conn.watchers.append(scope)

    def unwatch(self, scope: trio.CancelScope) -> None:
        self._conn.watchers.remove(scope)

    def cancel_on_disconnect(self) -> "_EofScope":
        return _EofScope(self._conn)


class _EofScope:
    """A cancel scope the connection cancels when the client leaves; no task watches for it:
    the server's sweeper notices (within half a second)."""

    __slots__ = ("_conn", "_scope")

    def __init__(self, conn: Carrier) -> None:
        self._conn = conn
        self._scope = trio.CancelScope()

    async def __aenter__(self) -> trio.CancelScope:
        self._scope.__enter__()
        self._conn.watchers.append(self._scope)
        return self._scope

    async def __aexit__(self, *exc: Any) -> bool:
        self._conn.watchers.remove(self._scope)
        return self._scope.__exit__(*exc)
