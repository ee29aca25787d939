"""A request of mcpkit's own server, handed to the endpoints directly (no ASGI dict), and the
thin ASGI adapter through which the plain routes (Quart) answer it."""

from __future__ import annotations

from typing import Any, Protocol

import trio

from ..exchange import SSE_HEADERS, AsgiApp, Exchange
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

    async def forward(self, app: AsgiApp) -> None:
        """Run an ASGI application on this request: the body in one message, then
        http.disconnect when the client goes away; the response framed from its messages."""
        conn, req = self._conn, self._req
        scope: dict[str, Any] = {
            "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": req.http_version,
            "method": req.method, "scheme": conn.scheme, "path": req.path, "raw_path": req.raw_path,
            "query_string": req.query, "root_path": "", "headers": req.raw_headers, "client": conn.io.peer,
            "server": conn.io.local, "extensions": {}, "mcpkit.request_id": self.request_id,
            "mcpkit.principal": self.principal,
        }
        state: dict[str, Any] = {"body_sent": False, "start": None}

        async def receive() -> dict[str, Any]:
            if not state["body_sent"]:
                state["body_sent"] = True
                return {"type": "http.request", "body": req.body, "more_body": False}
            await conn.wait_disconnect()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            kind = message["type"]
            if kind == "http.response.start":
                state["start"] = message
                return
            if kind != "http.response.body" or self.finished:
                return
            body = message.get("body", b"")
            more = message.get("more_body", False)
            start = state["start"]
            if start is not None:  # the head waits for the first body message: is it all of it?
                state["start"] = None
                headers = [(k.lower(), v) for k, v in start.get("headers", [])] + self.extra
                has_length = any(k == b"content-length" for k, _ in headers)
                self.status = start["status"]
                if has_length or not more:
                    length = None if has_length else len(body)
                    head = response_head(self.status, headers, length=length, close=self._conn.closes_after(self._req))
                    self._chunked = False
                    await conn.write(head if req.method == "HEAD" else head + body)
                    if not more:
                        self.finished = True
                    return
                await self.start_stream(self.status, headers[: len(headers) - len(self.extra)])
            if req.method != "HEAD":
                await self.send_chunk(body)
            if not more:
                await self.end_stream()

        await app(scope, receive, send)


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
