"""The 2024-11-05 HTTP+SSE transport: GET /sse holds the stream, POST /messages delivers."""

from __future__ import annotations

import logging
import secrets
import urllib.parse
from typing import Any

import trio

from ...protocol import jsonrpc
from ...protocol.connection import (
    Batch, CancelRequested, Reply, RequestReceived, ResponseReceived, ServerConnection,
)
from ...server.app import App
from ...server.context import InFlight, PendingRequests
from ...server.dispatch import Dispatcher
from ...server.errors import busy
from .outbox import Outbox
from .exchange import Exchange
from .wire import error_body, sse_event

log = logging.getLogger("mcpkit.http")


class _LegacySession:
    def __init__(self, sid: str, registry: dict[str, "_LegacySession"], conn: ServerConnection,
                 nursery: trio.Nursery, backlog_bytes: int) -> None:
        self.id = sid
        self.registry = registry
        self.dropped = False
        self.conn = conn
        self.nursery = nursery
        self.in_flight = InFlight()
        self.outbox: Outbox[bytes] = Outbox(backlog_bytes)
        self.pending = PendingRequests()
        self.running = 0  # requests being served

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

    # Peer protocol
    async def notify(self, data: bytes) -> None:
        self.push(data)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        return await self.pending.ask(self.conn.next_request_id(), self.notify, method, params)


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
        await ex.start_stream()
        await ex.send_chunk(sse_event(f"{ex.root_path}/messages?session_id={sid}".encode(), event="endpoint"))
        async with trio.open_nursery() as nursery:
            session = self.sessions[sid] = _LegacySession(sid, self.sessions, self.app.new_connection(), nursery,
                                                          self.app.settings.sse_backlog_bytes)
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
        while session.running:
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
                notice = session.conn.change_notice(event, arg)
                if notice is not None:
                    await session.notify(notice)

    async def post(self, ex: Exchange) -> None:
        query = urllib.parse.parse_qs(ex.query.decode("latin-1"))
        sid = (query.get("session_id") or [None])[0]
        if sid is None:
            await ex.respond(400, error_body(jsonrpc.INVALID_REQUEST, "Bad Request: session_id is required"))
            return
        session = self.sessions.get(sid)
        if session is None:
            await ex.respond(404, error_body(jsonrpc.INVALID_REQUEST, "Not Found: unknown session; open GET /sse first"))
            return
        if self.closing.is_set():
            await ex.respond(503, error_body(jsonrpc.INTERNAL_ERROR, "Service Unavailable: the server is shutting down"), [(b"retry-after", b"5")])
            return
        body = await ex.read_body(self.app.settings.max_message_bytes)
        for ev in session.conn.receive(body):
            if isinstance(ev, Batch):
                for inner in ev.events:
                    self._take(session, inner)
            else:
                self._take(session, ev)
        await ex.respond(202, b"Accepted", content_type=b"text/plain")

    def _take(self, session: _LegacySession, ev: Any) -> None:
        if isinstance(ev, RequestReceived):
            limit = self.app.settings.max_concurrent_requests
            if session.running >= limit:
                session.push(jsonrpc.encode_error(ev.id, busy(limit)))
                return
            session.running += 1
            session.nursery.start_soon(self._run, session, ev)
        elif isinstance(ev, Reply):
            session.push(ev.data)
        elif isinstance(ev, CancelRequested):
            session.in_flight.cancel(ev.request_id)
        elif isinstance(ev, ResponseReceived):
            session.pending.deliver(ev)

    async def _run(self, session: _LegacySession, req: RequestReceived) -> None:
        try:
            data = await self.dispatcher.handle(req, session, session.in_flight)
        finally:
            session.running -= 1
        if data is not None:
            session.push(data)
