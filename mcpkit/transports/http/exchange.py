"""One HTTP request and its response, as the MCP endpoints see it, whatever server carries it.

mcpkit's own server hands its parsed request straight over (``h1/_direct_exchange.py``); under
hypercorn or any ASGI server :class:`AsgiExchange` adapts the ASGI messages. The endpoints
(Streamable HTTP, legacy SSE, the security checks) are written once, against this.
"""

from __future__ import annotations

import contextlib
import urllib.parse
from typing import Any, Awaitable, Callable

import trio

from .request_host import split_absolute_form
from .wire import BodyTooLarge, Disconnected, Headers

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

SSE_HEADERS: Headers = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


class Exchange:
    """The request (method, path, query, lower-case headers) and the ways to answer it.

    ``extra`` headers go on whatever response starts; ``status`` is 0 until one has.
    Writing to a client that went away raises OSError.
    """

    method: str
    path: str
    query: bytes
    headers: dict[str, str]
    client: tuple[str, int] | None
    #: the address the request came in on (this server's socket), when the server says
    local: tuple[str, int] | None = None
    http_version: str = "1.1"
    root_path: str = ""  # where the app is mounted behind a proxy (ASGI root_path)
    #: who is asking (a verified bearer identity), set before the route runs; None when the
    #: server does not authorize requests
    principal: Any = None

    def __init__(self) -> None:
        self.request_id = ""
        self.status = 0
        self.extra: Headers = []

    async def read_body(self, limit: int) -> bytes:
        """The whole body; BodyTooLarge past ``limit``, Disconnected if the client left."""
        raise NotImplementedError

    async def respond(self, status: int, body: bytes = b"", headers: Headers | None = None,
                      content_type: bytes | None = b"application/json") -> None:
        raise NotImplementedError

    async def start_stream(self, status: int = 200, headers: Headers | None = None) -> None:
        """Start a response whose body follows in pieces (``SSE_HEADERS`` by default)."""
        raise NotImplementedError

    async def send_chunk(self, data: bytes) -> None:
        raise NotImplementedError

    async def end_stream(self) -> None:
        raise NotImplementedError

    async def wait_disconnect(self) -> None:
        """Return when the client has gone away (for cancelling work it no longer waits for)."""
        raise NotImplementedError

    #: whether :meth:`watch` works here (mcpkit's own server), or :meth:`cancel_on_disconnect`
    #: (a watcher task) is the way
    can_watch = False

    def watch(self, scope: trio.CancelScope) -> None:
        """Have ``scope`` cancelled when the client goes away (where ``can_watch``)."""
        raise NotImplementedError

    def unwatch(self, scope: trio.CancelScope) -> None:
        """Stop watching ``scope`` (see :meth:`watch`)."""

    def cancel_on_disconnect(self) -> "contextlib.AbstractAsyncContextManager[trio.CancelScope]":
        """``async with ex.cancel_on_disconnect() as scope:`` — the body is cancelled when the
        client goes away (a closed stream is how stateless clients cancel)."""
        return _WatchedScope(self)


class AsgiExchange(Exchange):
    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        super().__init__()
        self.scope, self._receive, self._send = scope, receive, send
        self.method = scope["method"]
        self.path = scope["path"]
        self.query = scope.get("query_string", b"")
        self.headers = header_map(scope["headers"])
        self.client = scope.get("client")
        self.local = scope.get("server")
        self.http_version = scope.get("http_version", "1.1")
        self.root_path = scope.get("root_path", "")
        self._disconnected = False
        if not self.path.startswith("/"):
            self._absolute_form()

    def _absolute_form(self) -> None:
        """hypercorn passes a target in absolute form (``http://host/path``) on as the path:
        serve its path with its authority as the Host, as mcpkit's server does (RFC 9112
        §3.2.2), so the Host check sees the host the request names."""
        try:
            absolute = split_absolute_form(self.scope.get("raw_path") or self.path.encode("latin-1"))
        except ValueError:
            self.headers["host"] = ""  # no valid host: refused on loopback binds
            return
        if absolute is None:
            return
        authority, raw = absolute
        self.path = urllib.parse.unquote(raw.decode("latin-1"))
        self.headers["host"] = authority.decode("latin-1")
        headers = [(n, v) for n, v in self.scope["headers"] if n.lower() != b"host"] + [(b"host", authority)]
        self.scope = dict(self.scope, path=self.path, raw_path=raw, headers=headers)

    async def read_body(self, limit: int) -> bytes:
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await self._receive()
            if message["type"] == "http.disconnect":
                self._disconnected = True
                raise Disconnected
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)

    async def _start(self, status: int, headers: Headers) -> None:
        self.status = status
        await self._send({"type": "http.response.start", "status": status, "headers": headers + self.extra})

    async def respond(self, status: int, body: bytes = b"", headers: Headers | None = None,
                      content_type: bytes | None = b"application/json") -> None:
        hdrs = list(headers or [])
        if body and content_type:
            hdrs.append((b"content-type", content_type))
        hdrs.append((b"content-length", str(len(body)).encode()))
        await self._start(status, hdrs)
        await self._send({"type": "http.response.body", "body": body})

    async def start_stream(self, status: int = 200, headers: Headers | None = None) -> None:
        await self._start(status, list(SSE_HEADERS if headers is None else headers))

    async def send_chunk(self, data: bytes) -> None:
        await self._send({"type": "http.response.body", "body": data, "more_body": True})

    async def end_stream(self) -> None:
        await self._send({"type": "http.response.body", "body": b"", "more_body": False})

    async def wait_disconnect(self) -> None:
        while not self._disconnected:
            if (await self._receive())["type"] == "http.disconnect":
                self._disconnected = True


class _WatchedScope:
    """A nursery whose scope a watcher task cancels when the client goes away (the general
    way; mcpkit's own server does it without a task)."""

    def __init__(self, ex: Exchange) -> None:
        self._ex = ex
        self._cm = trio.open_nursery()
        self._nursery: trio.Nursery | None = None

    async def __aenter__(self) -> trio.CancelScope:
        self._nursery = nursery = await self._cm.__aenter__()
        nursery.start_soon(self._watch, nursery.cancel_scope)
        return nursery.cancel_scope

    async def _watch(self, scope: trio.CancelScope) -> None:
        await self._ex.wait_disconnect()
        scope.cancel()

    async def __aexit__(self, *exc: Any) -> bool | None:
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()  # the body is done: stop watching
        return await self._cm.__aexit__(*exc)


def header_map(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Request headers with lower-case names (repeated headers joined with ', ')."""
    out: dict[str, str] = {}
    for name, value in raw:
        key = name.decode("latin-1").lower()
        val = value.decode("latin-1")
        out[key] = f"{out[key]}, {val}" if key in out else val
    return out
