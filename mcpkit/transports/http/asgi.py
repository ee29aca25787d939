"""The HTTP application: security and hygiene on every route, then /mcp, /sse, /messages,
and the plain routes (/healthz, /mcp/search: ``routes.py``).

It serves :class:`Exchange` objects: mcpkit's own server hands them over directly, any ASGI
server (hypercorn) through ``__call__``."""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import secrets
import sys
import time
from typing import Any, AsyncIterator

import trio

from ...protocol import jsonrpc
from ...server.app import App
from ...server.dispatch import Dispatcher
from ...server.context import STOP_BOUND_S
from ...server.lifespan import plugin_lifespans
from ...server.metrics import enable_metrics
from ...server.metrics_otlp import enable_otlp_metrics
from ...server.redis_link import StateUnavailable
from .legacy_sse import LegacySse
from .routes import plain_routes
from .security import Guard
from .session_state import MemoryBackend
from .sessions import SessionManager
from .streamable import Streamable
from .accesslog import AccessLog
from .logsink import logging_through, stderr_sink
from .authorization import ResourceServer
from .exchange import AsgiExchange, Exchange, Receive, Scope, Send
from .wire import RETRY_SOON, BodyTooLarge, Disconnected, error_body, rest_error

#: The JSON-RPC endpoints; every other path answers errors as ``{"error": {"code", "message"}}``.
_MCP_PATHS = frozenset({"/mcp", "/mcp/", "/sse", "/messages"})
REASONS_TEXT = {400: "Bad Request", 408: "Request Timeout", 414: "URI Too Long", 431: "Request Header Fields Too Large",
                505: "HTTP Version Not Supported"}
log = logging.getLogger("mcpkit.http")
#: what observers are told of a request the HTTP server refused, by its status
_REFUSAL_REASONS = {413: "body", 408: "slow", 414: "headers", 431: "headers"}


class HttpApp:
    def __init__(self, app: App, lifespans: list[tuple[str, Any]] | None = None, *, strict: bool = False, legacy_only: bool = False) -> None:
        s = app.settings
        self.app = app
        self.lifespans = lifespans or []
        self.strict = strict
        self.legacy_only = legacy_only
        self.guard = Guard(s.host, s.allow_origins)
        self.auth = ResourceServer.from_app(app, self.refuse)
        #: made when the app starts running (they need its nursery), see :meth:`running`
        self.sessions: SessionManager | None = None
        self.streamable: Streamable | None = None
        self.legacy = LegacySse(app)
        if app.settings.metrics:
            enable_metrics(app)
        self.routes = plain_routes(app)
        #: paths the MCP authorization does not cover (/metrics has its own rule: routes.py)
        self.open_paths = frozenset({"/healthz", "/metrics"} if app.settings.metrics else {"/healthz"})
        self.started = trio.Event()
        self.access = AccessLog(s.access_log)
        self.active = 0  # requests being served (streams included)
        #: hypercorn's workers: a pipe that ends when the supervising process is gone
        self.orphan_fd: int | None = None
        #: the browser console at /console (``console`` setting), else None: nothing watches
        self.console: Any = None
        if s.console:
            from .console import Console

            self.console = Console(self)

    async def shutdown(self) -> None:
        """Start draining: standalone streams and subscriptions end cleanly at once; requests
        in flight (stateless or in a session) go on answering within the grace period."""
        if self.streamable is not None:
            self.streamable.closing.set()
        self.legacy.closing.set()
        self.app.hub.close()

    def end_sessions(self) -> None:
        """After the drain: end every session here (what still runs is cancelled). With shared
        state they live on in Redis for the other processes."""
        if self.sessions is not None:
            for sid in list(self.sessions.sessions):
                self.sessions.drop(sid)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ASGI entry (hypercorn, or any ASGI server)."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            await self.serve(AsgiExchange(scope, receive, send))

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Plugin lifespans, the session expiry and change forwarding: held
        open while a server serves this app. On exit the sessions end (after the drain)."""
        s = self.app.settings
        otlp = enable_otlp_metrics(self.app)  # here: in each worker, after the fork
        sink = stderr_sink()  # the server log, too, never blocks the event loop
        async with logging_through(sink), plugin_lifespans(self.app, self.lifespans, strict=self.strict), \
                trio.open_nursery() as nursery:
            nursery.start_soon(sink.flush_forever)
            if self.access.enabled:
                nursery.start_soon(self.access.write_forever)
            if otlp is not None:
                nursery.start_soon(otlp.export_forever)
            if self.app.metrics is not None:
                nursery.start_soon(self.app.metrics.share_forever)
            stack = contextlib.ExitStack()
            self.sessions = SessionManager(
                _session_backend(self.app), self.app.new_connection, Dispatcher(self.app), nursery,
                ttl_s=s.session_ttl_s, max_sessions=s.max_sessions, max_running=s.max_concurrent_requests,
                backlog_bytes=s.sse_backlog_bytes)
            self.streamable = Streamable(self.app, self.sessions, nursery, self.auth.step_up if self.auth is not None else None)
            nursery.start_soon(self.sessions.expire_forever)
            nursery.start_soon(self.sessions.follow_remote)
            if self.orphan_fd is not None:
                nursery.start_soon(self.leave_when_orphaned, self.orphan_fd)
            stack.enter_context(self.app.hub.relaying(self.streamable.forward_change))
            if self.console is not None:
                nursery.start_soon(self.console.run)
            self.started.set()
            try:
                yield
            finally:
                await self.shutdown()
                self.end_sessions()
                stack.close()
                nursery.cancel_scope.cancel()
                if self.auth is not None:
                    with trio.CancelScope(shield=True):
                        await self.auth.aclose()

    async def leave_when_orphaned(self, fd: int) -> None:
        """A hypercorn worker whose supervisor died: shut down as the supervisor would have
        (streams end, requests get the grace, then answer "shutting down"), then exit: hypercorn
        gives an application no way to stop its worker, so plugin lifespans are not closed."""
        from .lifeline import until_parent_exits

        await until_parent_exits(fd)
        log.warning("the supervising process is gone; this worker stops")
        await self.shutdown()
        with trio.move_on_after(self.app.settings.shutdown_grace_s):
            while self.active:
                await trio.sleep(0.05)
        self.app.requests.stop()
        with trio.move_on_after(STOP_BOUND_S):
            while self.active:
                await trio.sleep(0.05)
        sys.stderr.flush()
        os._exit(0)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        message = await receive()
        assert message["type"] == "lifespan.startup"
        try:
            async with self.running():
                await send({"type": "lifespan.startup.complete"})
                await receive()  # lifespan.shutdown: the server has drained
        except Exception as exc:
            log.error("start-up failed: %s", exc)
            await send({"type": "lifespan.startup.failed", "message": str(exc)})
            return
        await send({"type": "lifespan.shutdown.complete"})

    async def serve(self, ex: Exchange) -> None:
        """Answer one request: checks every route shares, then the route."""
        access = self.access
        started = time.perf_counter() if access.enabled else 0.0
        h = ex.headers
        rid = h.get("x-request-id") or next_request_id()
        ex.request_id = rid
        origin = h.get("origin")
        extra = [(b"x-request-id", rid.encode("latin-1", "replace"))]
        if ex.path == "/mcp/search":
            extra.append((b"x-mcp-version", b"2"))
        if origin is not None and self.guard.origin_allowed(origin):
            extra += self.guard.cors_headers(origin)
        ex.extra = extra
        self.active += 1
        # every Redis command this request runs (and the work it starts) shares one deadline
        budget = self.app.shared.request_budget() if self.app.shared is not None else _NO_BUDGET
        try:
            with budget:
                await self._route(ex, h, origin)
        except BodyTooLarge:
            self.refused("body", ex.path)
            await ex.respond(413, self.too_large_body(ex.path))
        except StateUnavailable as exc:  # logged once per outage by the link
            if ex.status == 0:
                with contextlib.suppress(OSError):
                    await ex.respond(503, error_body(exc.code, exc.message), RETRY_SOON)
        except Disconnected:
            pass
        except Exception:
            log.exception("unexpected error on %s %s", ex.method, ex.path)
            if ex.status == 0:
                try:
                    await ex.respond(500, error_body(jsonrpc.INTERNAL_ERROR, "Internal error"))
                except OSError:
                    pass
        finally:
            self.active -= 1
            if access.enabled:
                access.write((ex.client or ("-", 0))[0], ex.method, ex.path, ex.status, started, rid)

    def too_large_body(self, path: str) -> bytes:
        """The 413 body, in the error shape of the route."""
        limit = self.app.settings.max_message_bytes
        if path in _MCP_PATHS:
            return error_body(jsonrpc.INVALID_REQUEST, f"Payload Too Large: the limit is {limit} bytes (max_message_bytes)")
        return rest_error("PAYLOAD_TOO_LARGE", f"the request body must be at most {limit} bytes")

    def refusal_body(self, path: str | None, status: int, code: str, message: str) -> bytes:
        """The body of a request the HTTP layer refused (malformed, too large, too slow), in
        the error shape of its route (JSON-RPC on the MCP endpoints)."""
        self.refused(_REFUSAL_REASONS.get(status, "malformed"), path)
        if status == 413:
            return self.too_large_body(path or "/mcp")
        if path is None or path in _MCP_PATHS:
            return error_body(jsonrpc.INVALID_REQUEST, f"{REASONS_TEXT.get(status, 'Bad Request')}: {message}")
        return rest_error(code, message)

    def refused(self, reason: str, path: str | None) -> None:
        """Tell observers of a request refused before any handler saw it."""
        observers = self.app.observers
        if observers:
            observers.rejected(reason, "sse" if path in ("/sse", "/messages") else "http")

    async def refuse(self, ex: Exchange, status: int, message: str, headers: list[tuple[bytes, bytes]]) -> None:
        """An authorization refusal (401, 403, 503) in the error shape of the route."""
        self.refused("auth", ex.path)
        if ex.path in _MCP_PATHS:
            body = error_body(jsonrpc.INTERNAL_ERROR if status >= 500 else jsonrpc.INVALID_REQUEST, message)
        else:
            code = {401: "UNAUTHORIZED", 403: "FORBIDDEN"}.get(status, "SERVICE_UNAVAILABLE")
            body = rest_error(code, message.partition(": ")[2] or message)
        await ex.respond(status, body, headers)

    async def _route(self, ex: Exchange, h: dict[str, str], origin: str | None) -> None:
        method, path = ex.method, ex.path
        if not self.guard.host_allowed(h.get("host")):
            self.refused("host", path)
            await ex.respond(421, error_body(jsonrpc.INVALID_REQUEST, "Misdirected Request: Host not allowed"))
            return
        if self.console is not None and path.startswith("/console") and path[8:9] in ("", "/"):
            await self.console.serve(ex)  # its own access rule (console/access.py), not MCP's tokens
            return
        if origin is not None and not self.guard.origin_allowed(origin):
            self.refused("origin", path)
            await ex.respond(403, error_body(jsonrpc.INVALID_REQUEST, "Forbidden: Origin not allowed"))
            return
        length = h.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.app.settings.max_message_bytes:
            raise BodyTooLarge
        if method == "OPTIONS":
            await ex.respond(204, headers=self.guard.preflight_headers())
            return
        if self.auth is not None and path not in self.open_paths:
            if self.auth.is_metadata_path(path):
                await self.auth.serve_metadata(ex)
                return
            ex.principal = await self.auth.authenticate(ex)
            if ex.principal is None:
                return  # answered 401, 403 or 503
        if path in ("/mcp", "/mcp/") and not self.legacy_only:
            assert self.streamable is not None, "the app is not running"
            await self.streamable(ex)
        elif path == "/sse":
            if method != "GET":
                await _not_allowed(ex, b"GET, OPTIONS")
            else:
                await self.legacy.stream(ex)
        elif path == "/messages":
            if method != "POST":
                await _not_allowed(ex, b"POST, OPTIONS")
            else:
                await self.legacy.post(ex)
        else:
            await self.routes(ex)


async def _not_allowed(ex: Exchange, allow: bytes) -> None:
    await ex.respond(405, error_body(jsonrpc.INVALID_REQUEST, "Method Not Allowed"), [(b"allow", allow)])


#: the request budget of an app without shared state (nullcontext holds nothing: one serves all)
_NO_BUDGET = contextlib.nullcontext()
_random = secrets.token_hex(10)
_ID_PREFIX = f"{_random[:8]}-{_random[8:12]}-{_random[12:16]}-{_random[16:20]}-"
_ids = itertools.count(1)


def next_request_id() -> str:
    """A request id in UUID form: 80 random bits per process, then a counter (a fresh UUID4
    per request costs a system call)."""
    return f"{_ID_PREFIX}{next(_ids):012x}"


def _session_backend(app: App) -> Any:
    """Where sessions keep what outlives a request: Redis when the app shares state, else memory."""
    s = app.settings
    if app.shared is not None:
        from .shared_sessions import RedisBackend

        return RedisBackend(app.shared, s.session_ttl_s, s.event_store_size, s.event_store_bytes)
    return MemoryBackend(s.event_store_size, s.event_store_bytes, s.event_store_total_bytes)
