"""The ASGI application: security and hygiene on every route, then /mcp, /sse, /messages,
and Quart for the plain routes (/healthz and what plugins add)."""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any

import trio

from ..._version import __version__
from ...protocol import jsonrpc
from ...server.app import App
from ...server.lifespan import plugin_lifespans
from .legacy_sse import LegacySse
from .security import Guard
from .sessions import SessionManager
from .streamable import Streamable
from .wire import BodyTooLarge, Disconnected, Receive, Scope, Send, error_body, header_map, respond, rest_error

#: The JSON-RPC endpoints; every other path answers errors as ``{"error": {"code", "message"}}``.
_MCP_PATHS = frozenset({"/mcp", "/mcp/", "/sse", "/messages"})
access_log = logging.getLogger("mcpkit.http.access")
log = logging.getLogger("mcpkit.http")


class HttpApp:
    def __init__(self, app: App, lifespans: list[tuple[str, Any]] | None = None, *, strict: bool = False, legacy_only: bool = False) -> None:
        s = app.settings
        self.app = app
        self.lifespans = lifespans or []
        self.strict = strict
        self.legacy_only = legacy_only
        self.guard = Guard(s.host, s.allow_origins, s.auth_token)
        self.sessions = SessionManager(s.session_ttl_s, s.max_sessions, s.event_store_size, s.sse_backlog_bytes)
        self.streamable = Streamable(app, self.sessions)
        self.legacy = LegacySse(app)
        self.routes = _plain_routes(app)
        self.started = trio.Event()

    async def shutdown(self) -> None:
        """Start draining: standalone streams and subscriptions end cleanly at once; requests
        in flight (stateless or in a session) go on answering within the grace period."""
        self.streamable.closing.set()
        self.legacy.closing.set()
        self.app.hub.close()

    def end_sessions(self) -> None:
        """After the drain: end every session (what still runs is cancelled)."""
        for sid in list(self.sessions.sessions):
            self.sessions.end(sid)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self._http(scope, receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        try:
            async with plugin_lifespans(self.app, self.lifespans, strict=self.strict), trio.open_nursery() as nursery:
                self.streamable.nursery = nursery
                nursery.start_soon(self.sessions.expire_forever)
                nursery.start_soon(self.streamable.forward_changes)
                await self._routes_startup()
                self.started.set()
                await send({"type": "lifespan.startup.complete"})
                message = await receive()  # lifespan.shutdown: the server has drained
                await self.shutdown()
                self.end_sessions()
                nursery.cancel_scope.cancel()
        except Exception as exc:
            log.error("start-up failed: %s", exc)
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
        await send({"type": "lifespan.shutdown.complete"})

    async def _routes_startup(self) -> None:
        if self.routes is not None:
            await self.routes.startup()

    async def _http(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        h = header_map(scope)
        rid = h.get("x-request-id") or str(uuid.uuid4())
        origin = h.get("origin")
        status = [0]
        scope["mcpkit.request_id"] = rid
        extra = [(b"x-request-id", rid.encode("latin-1"))]
        if scope["path"] == "/mcp/search":
            extra.append((b"x-mcp-version", b"2"))
        if origin is not None and self.guard.origin_allowed(origin):
            extra += self.guard.cors_headers(origin)

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message = dict(message, headers=list(message.get("headers", [])) + extra)
            await send(message)

        try:
            await self._route(scope, receive, send_with_headers, h, origin)
        except BodyTooLarge:
            limit = self.app.settings.max_message_bytes
            if scope["path"] in _MCP_PATHS:
                body = error_body(jsonrpc.INVALID_REQUEST, f"Payload Too Large: the limit is {limit} bytes (max_message_bytes)")
            else:
                body = rest_error("PAYLOAD_TOO_LARGE", f"the request body must be at most {limit} bytes")
            await respond(send_with_headers, 413, body)
        except Disconnected:
            pass
        except Exception:
            log.exception("unexpected error on %s %s", scope["method"], scope["path"])
            if status[0] == 0:
                await respond(send_with_headers, 500, error_body(jsonrpc.INTERNAL_ERROR, "Internal error"))
        finally:
            client = scope.get("client") or ("-", 0)
            access_log.info('%s "%s %s" %s %.1fms request_id=%s', client[0], scope["method"], scope["path"], status[0] or "-",
                            (time.perf_counter() - started) * 1000, rid)

    async def _route(self, scope: Scope, receive: Receive, send: Send, h: dict[str, str], origin: str | None) -> None:
        method, path = scope["method"], scope["path"]
        if not self.guard.host_allowed(h.get("host")):
            await respond(send, 421, error_body(jsonrpc.INVALID_REQUEST, "Misdirected Request: Host not allowed"))
            return
        if origin is not None and not self.guard.origin_allowed(origin):
            await respond(send, 403, error_body(jsonrpc.INVALID_REQUEST, "Forbidden: Origin not allowed"))
            return
        length = h.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.app.settings.max_message_bytes:
            raise BodyTooLarge
        if method == "OPTIONS":
            await respond(send, 204, headers=self.guard.preflight_headers())
            return
        if path != "/healthz" and not self.guard.authorized(h.get("authorization")):
            await respond(send, 401, error_body(jsonrpc.INVALID_REQUEST, "Unauthorized: a valid bearer token is required"),
                          [(b"www-authenticate", b'Bearer realm="mcpkit"')])
            return
        if path in ("/mcp", "/mcp/") and not self.legacy_only:
            await self.streamable(scope, receive, send, h)
        elif path == "/sse":
            if method != "GET":
                await _not_allowed(send, b"GET, OPTIONS")
            else:
                await self.legacy.stream(scope, receive, send, h)
        elif path == "/messages":
            if method != "POST":
                await _not_allowed(send, b"POST, OPTIONS")
            else:
                await self.legacy.post(scope, receive, send, h)
        elif self.routes is not None:
            await self.routes(scope, receive, send)
        else:
            await respond(send, 404, rest_error("NOT_FOUND", f"no route {path}"))


async def _not_allowed(send: Send, allow: bytes) -> None:
    await respond(send, 405, error_body(jsonrpc.INVALID_REQUEST, "Method Not Allowed"), [(b"allow", allow)])


def _plain_routes(app: App) -> Any:
    """The Quart application for the non-MCP routes."""
    from quart_trio import QuartTrio

    from werkzeug.exceptions import HTTPException

    quart = QuartTrio("mcpkit")
    quart.config["MAX_CONTENT_LENGTH"] = app.settings.max_message_bytes

    @quart.errorhandler(HTTPException)
    async def json_errors(exc: HTTPException) -> Any:
        """Quart's own errors (unknown path, wrong method, body too large) as JSON, not HTML."""
        code = (exc.name or "error").upper().replace(" ", "_")
        headers = {"Allow": ", ".join(exc.valid_methods)} if getattr(exc, "valid_methods", None) else {}
        return {"error": {"code": code, "message": exc.description or exc.name}}, exc.code or 500, headers

    @quart.get("/healthz")
    async def healthz() -> dict[str, Any]:
        return {
            "status": "ok",
            "version": __version__,
            "plugins": [p.name for p in app.plugins if p.loaded],
            "tools": len(app.registry.tools),
        }

    from .search_api import install

    install(quart, app)
    return quart
