"""The 2024-11-05 HTTP+SSE transport: GET /sse holds the stream, POST /messages delivers."""

from __future__ import annotations

import logging
import secrets
import time
import urllib.parse
from typing import Any

import trio

from ...protocol import jsonrpc
from ...protocol.jsonrpc import Answer
from ...protocol.session import Run, ServerSession
from ...server.app import App
from ...server.dispatch import Dispatcher
from ...server.session_runner import SessionRunner
from .outbox import Outbox
from .exchange import Exchange
from .wire import error_body, sse_event

log = logging.getLogger("mcpkit.http")


class _LegacySession:
    """One GET /sse stream: the session's outlet (everything it sends is an SSE message on the
    stream) and its runner; POST /messages feeds it."""

    can_ask = True

    def __init__(self, sid: str, registry: dict[str, "_LegacySession"], core: ServerSession,
                 dispatcher: Dispatcher, nursery: trio.Nursery, backlog_bytes: int) -> None:
        self.id = sid
        self.registry = registry
        self.dropped = False
        self.core = core
        self.nursery = nursery
        self.outbox: Outbox[bytes] = Outbox(backlog_bytes)
        self.owner: tuple[str, str] | None = None  # the principal that opened it, if any
        self.runner = SessionRunner(core, dispatcher, self, nursery, transport="sse", session_id=sid)

    def push(self, data: bytes) -> None:
        """Queue a message for the stream; a client that lets too much pile up loses it."""
        if not self.outbox.put(data, len(data)) and self.outbox.overflowed and not self.dropped:
            log.warning("legacy SSE client does not read its stream (over %d bytes waiting); closing it", self.outbox.max_bytes)
            self.drop()

    def drop(self) -> None:
        """End the session now: later POSTs get 404 and its requests are cancelled."""
        self.dropped = True
        self.registry.pop(self.id, None)
        self.nursery.cancel_scope.cancel()

    # Outlet (and the one Channel of every request): all of it goes down the stream
    def channel(self, run: Run) -> "_LegacySession":
        return self

    async def message(self, data: bytes) -> None:
        self.push(data)

    async def answer(self, answer: Answer) -> None:
        self.push(answer.encode())

    async def reply(self, answer: Answer, origin: Any) -> None:
        self.push(answer.encode())

    async def send_batch(self, answers: list[Answer], origin: Any) -> None:
        self.push(jsonrpc.encode_batch([a.encode() for a in answers]))

    async def elsewhere(self, action: Any) -> None:
        return None

    def done(self) -> None:
        return None


class _Post:
    """A POST /messages, as its requests' origin: its headers, for observers."""

    __slots__ = ("headers",)

    def __init__(self, headers: dict[str, str]) -> None:
        self.headers = headers


class LegacySse:
    def __init__(self, app: App) -> None:
        self.app = app
        self.dispatcher = Dispatcher(app)
        self.sessions: dict[str, _LegacySession] = {}
        self.closing = trio.Event()

    async def stream(self, ex: Exchange) -> None:
        h = ex.headers
        if "text/event-stream" not in h.get("accept", "text/event-stream") and "*/*" not in h.get("accept", ""):
            await ex.respond(406, error_body(jsonrpc.INVALID_REQUEST, "Not Acceptable: Accept must list text/event-stream"))
            return
        sid = secrets.token_hex(16)
        observers = self.app.observers
        if observers:
            opened = time.perf_counter()
            observers.session_opened("sse", sid)
            observers.stream_opened("sse")
            try:
                await self._serve_stream(ex, sid)
            finally:
                observers.stream_closed("sse")
                observers.session_closed("sse", sid, time.perf_counter() - opened)
        else:
            await self._serve_stream(ex, sid)

    async def _serve_stream(self, ex: Exchange, sid: str) -> None:
        await ex.start_stream()
        await ex.send_chunk(sse_event(f"{ex.root_path}/messages?session_id={sid}".encode(), event="endpoint"))
        async with trio.open_nursery() as nursery:
            core = ServerSession(self.app.new_connection(), max_running=self.app.settings.max_concurrent_requests)
            session = self.sessions[sid] = _LegacySession(sid, self.sessions, core, self.dispatcher, nursery,
                                                          self.app.settings.sse_backlog_bytes)
            if ex.principal is not None:
                session.owner = ex.principal.owner
            try:
                nursery.start_soon(self._watch, ex, nursery.cancel_scope)
                nursery.start_soon(self._end_at_shutdown, session)
                nursery.start_soon(self._forward_changes, session)
                await self._write(ex, session)
            finally:
                self.sessions.pop(sid, None)
                nursery.cancel_scope.cancel()
        try:
            await ex.end_stream()
        except OSError:
            pass

    async def _watch(self, ex: Exchange, scope: trio.CancelScope) -> None:
        await ex.wait_disconnect()
        scope.cancel()

    async def _end_at_shutdown(self, session: _LegacySession) -> None:
        """At shutdown, let the session's running requests answer (they travel on this
        stream), then end the stream cleanly; the server's grace period bounds the wait."""
        await self.closing.wait()
        while session.core.load:
            await trio.sleep(0.05)
        session.outbox.close()

    async def _write(self, ex: Exchange, session: _LegacySession) -> None:
        heartbeat = self.app.settings.sse_heartbeat_s
        try:
            while True:
                with trio.move_on_after(heartbeat):
                    data = await session.outbox.get()
                    await ex.send_chunk(sse_event(data, event="message"))
                    continue
                await ex.send_chunk(b": ping\n\n")
        except (OSError, trio.EndOfChannel):
            return

    async def _forward_changes(self, session: _LegacySession) -> None:
        with self.app.hub.listen() as events:
            async for event, arg in events:
                notice = session.core.conn.change_notice(event, arg)
                if notice is not None:
                    session.push(notice)

    async def post(self, ex: Exchange) -> None:
        query = urllib.parse.parse_qs(ex.query.decode("latin-1"))
        sid = (query.get("session_id") or [None])[0]
        if sid is None:
            await ex.respond(400, error_body(jsonrpc.INVALID_REQUEST, "Bad Request: session_id is required"))
            return
        session = self.sessions.get(sid)
        if session is not None and session.owner is not None and (ex.principal is None or ex.principal.owner != session.owner):
            session = None  # someone else's: as if unknown
        if session is None:
            await ex.respond(404, error_body(jsonrpc.INVALID_REQUEST, "Not Found: unknown session; open GET /sse first"))
            return
        if self.closing.is_set():
            await ex.respond(503, error_body(jsonrpc.INTERNAL_ERROR, "Service Unavailable: the server is shutting down"), [(b"retry-after", b"5")])
            return
        body = await ex.read_body(self.app.settings.max_message_bytes)
        # the answers go down the stream whatever the origin; it carries the POST's headers (trace
        # context) to observers, kept only when some watch
        actions = session.core.receive(body, origin=_Post(ex.headers) if self.app.observers else None)
        for action in actions:
            if isinstance(action, Run):
                action.request.principal = ex.principal
        await session.runner.execute(actions)
        await ex.respond(202, b"Accepted", content_type=b"text/plain")
