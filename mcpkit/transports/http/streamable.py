"""The Streamable HTTP endpoint (/mcp): the stateless era and handshake-era sessions."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable

import msgspec
import trio

from ...protocol import http_rules, jsonrpc
from ...protocol.connection import (
    Batch, CancelRequested, Event, Reply, RequestReceived, ResponseReceived, parse_envelope, unsupported_version,
)
from ...protocol.jsonrpc import Invalid, Message, ProtocolError
from ...protocol.types import META_PROTOCOL_VERSION
from ...protocol.versions import HANDSHAKE_VERSIONS, STATELESS_VERSIONS
from ...server.app import App
from ...server.dispatch import Dispatcher
from ...server.errors import busy
from .outbox import Outbox
from .peers import BufferPeer, DirectPeer, SessionPeer
from .sessions import CLOSE, Session, SessionManager, Stream, asked_here, restore_connection
from .exchange import Exchange
from .wire import RETRY_SOON, Headers, error_body, error_code, http_status_for, sse_event

log = logging.getLogger("mcpkit.http")
_META_KEY = META_PROTOCOL_VERSION.encode()


def prefers_sse(accept: str) -> bool:
    """The client listed text/event-stream before application/json: stream the answer."""
    accept = accept.lower()
    sse, js = accept.find("text/event-stream"), accept.find("application/json")
    return sse != -1 and (js == -1 or sse < js)


def accepts(accept: str, *types: str) -> bool:
    accept = accept.lower()
    return "*/*" in accept or all(t in accept for t in types)


class Streamable:
    def __init__(self, app: App, sessions: SessionManager) -> None:
        self.app = app
        self.settings = app.settings
        self.sessions = sessions
        self.dispatcher = Dispatcher(app)
        self.stateless_conn = app.new_connection(allow_handshake=False)
        self.nursery: trio.Nursery | None = None  # set by the ASGI lifespan: runs session requests
        self.closing = trio.Event()
        self._mirrored: dict[str, dict[str, str]] = {}
        #: the 403 challenge for an insufficient-scope answer (set when the server authorizes)
        self.step_up: Callable[[Exchange, bytes], Headers | None] | None = None

    async def __call__(self, ex: Exchange) -> None:
        method = ex.method
        if method == "POST":
            await self.post(ex)
        elif method == "GET":
            await self.get(ex)
        elif method == "DELETE":
            await self.delete(ex)
        else:
            await ex.respond(405, error_body(jsonrpc.INVALID_REQUEST, "Method not allowed"), [(b"allow", b"GET, POST, DELETE, OPTIONS")])

    # -- POST --------------------------------------------------------------------------------
    async def post(self, ex: Exchange) -> None:
        h = ex.headers
        if not accepts(h.get("accept", ""), "application/json", "text/event-stream"):
            await ex.respond(406, error_body(jsonrpc.INVALID_REQUEST, "Not Acceptable: Accept must list application/json and text/event-stream"))
            return
        if "application/json" not in h.get("content-type", "").lower():
            await ex.respond(415, error_body(jsonrpc.INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json"))
            return
        body = await ex.read_body(self.settings.max_message_bytes)
        sid = h.get("mcp-session-id")
        version = h.get("mcp-protocol-version")
        has_meta = _META_KEY in body
        if sid is None and (has_meta or (version is not None and version not in HANDSHAKE_VERSIONS)):
            await self.post_stateless(ex, body, version)
        elif sid is None:
            await self.post_initialize(ex, body)
        else:
            await self.post_session(ex, body, sid, version)

    async def post_stateless(self, ex: Exchange, body: bytes, version: str | None) -> None:
        try:
            msg = jsonrpc.decode(body)
        except ProtocolError as exc:
            await ex.respond(400, jsonrpc.encode_error(None, exc))
            return
        if isinstance(msg, list) or isinstance(msg, Invalid):
            rid = msg.id if isinstance(msg, Invalid) else None
            await ex.respond(400, error_body(jsonrpc.INVALID_REQUEST, "Invalid Request: send one JSON-RPC request per POST", rid))
            return
        if not msg.is_request:
            await ex.respond(202)  # nothing to answer (no client notifications are defined here)
            return
        try:
            self._check_stateless(msg, ex.headers, version)
        except ProtocolError as exc:
            await ex.respond(http_status_for(exc.code), jsonrpc.encode_error(msg.id, exc))  # type: ignore[arg-type]
            return
        events = self.stateless_conn.receive_message(msg, stateless=True)
        ev = events[0]
        if isinstance(ev, Reply):
            await ex.respond(http_status_for(error_code(ev.data) or 0), ev.data)
            return
        assert isinstance(ev, RequestReceived)
        ev.principal = ex.principal
        await self._answer_stateless(ev, ex, prefers_sse(ex.headers.get("accept", "")))

    def _check_stateless(self, msg: Message, h: dict[str, str], version: str | None) -> None:
        """Header rules in the order the spec's validation implies."""
        if version is None:
            raise http_rules.mismatch("the MCP-Protocol-Version header is required")
        envelope = parse_envelope(msg.params)
        if version.strip() != envelope.protocolVersion:
            raise http_rules.mismatch(f"MCP-Protocol-Version header {version!r} does not match _meta protocolVersion {envelope.protocolVersion!r}")
        if envelope.protocolVersion not in STATELESS_VERSIONS:
            raise unsupported_version(envelope.protocolVersion)
        params = msgspec.json.decode(msg.params) if msg.params is not msgspec.UNSET else {}
        if not isinstance(params, dict):
            raise ProtocolError(jsonrpc.INVALID_PARAMS, "Invalid params: params must be an object")
        assert isinstance(msg.method, str)
        http_rules.check_standard_headers(h, msg.method, params)
        if msg.method == "tools/call":
            name = params.get("name")
            tool = self.app.registry.tools.get(name) if isinstance(name, str) else None
            if tool is not None:
                mirrored = self._mirrored.get(tool.name)
                if mirrored is None:
                    mirrored = self._mirrored[tool.name] = http_rules.header_params(tool.input_schema)
                if mirrored:
                    args = params.get("arguments")
                    http_rules.check_param_headers(h, mirrored, args if isinstance(args, dict) else None)

    async def _answer_stateless(self, req: RequestReceived, ex: Exchange, sse: bool = False) -> None:
        """Run the request in this HTTP exchange: JSON unless it streams (or the client prefers
        SSE); a closed stream cancels it."""
        sse = sse or self.settings.response_mode == "sse" or req.method == "subscriptions/listen"
        peer = DirectPeer(ex, sse and self.settings.response_mode != "json" or req.method == "subscriptions/listen",
                           self.step_up)
        if req.method == "subscriptions/listen":
            async with trio.open_nursery() as nursery:
                nursery.start_soon(peer.heartbeat, self.settings.sse_heartbeat_s)
                await self._run_stateless(req, ex, peer)
                nursery.cancel_scope.cancel()
        else:
            await self._run_stateless(req, ex, peer)

    async def _run_stateless(self, req: RequestReceived, ex: Exchange, peer: DirectPeer) -> None:
        async with ex.cancel_on_disconnect():
            data = await self.dispatcher.handle(req, peer)
            if data is not None:
                await peer.finish(data)

    async def post_initialize(self, ex: Exchange, body: bytes) -> None:
        try:
            msg = jsonrpc.decode(body)
        except ProtocolError as exc:
            await ex.respond(400, jsonrpc.encode_error(None, exc))
            return
        if not isinstance(msg, Message) or msg.method != "initialize" or not msg.is_request:
            await ex.respond(400, error_body(jsonrpc.INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required (or send initialize to open a session)"))
            return
        session = self.sessions.create(self.app.new_connection())
        if session is not None and ex.principal is not None:
            session.owner = ex.principal.owner  # only its owner may use it
        if session is None:
            limit = self.settings.max_sessions
            await ex.respond(503, error_body(jsonrpc.TOO_MANY_SESSIONS, f"Service Unavailable: all {limit} sessions (max_sessions) "
                                             "have a request or stream in progress; retry shortly", msg.id,
                                             {"max_sessions": limit}), [(b"retry-after", b"5")])
            return
        (reply,) = session.conn.receive_message(msg)
        assert isinstance(reply, Reply)
        if error_code(reply.data) is not None:
            await self.sessions.end(session.id)
            await ex.respond(400, reply.data)
            return
        try:
            await self.sessions.save_new(session)  # acknowledged only once shared
        except ProtocolError:
            self.sessions.drop(session.id)
            raise
        await ex.respond(200, reply.data, [(b"mcp-session-id", session.id.encode())])

    async def _session_of(self, ex: Exchange, sid: str) -> Session | None:
        """The session, if it exists and belongs to whoever asks (someone else's session is
        answered like an unknown one)."""
        session = await self.sessions.get(sid)
        if session is not None and session.owner is not None:
            if ex.principal is None or ex.principal.owner != session.owner:
                log.info("refused session %s to a caller who does not own it", sid[:8])
                return None
        return session

    async def post_session(self, ex: Exchange, body: bytes, sid: str, version: str | None) -> None:
        session = await self._session_of(ex, sid)
        if session is None:
            await ex.respond(404, error_body(jsonrpc.INVALID_REQUEST, "Not Found: unknown or expired session; initialize a new one"))
            return
        if version is not None and version.strip() not in HANDSHAKE_VERSIONS:
            await ex.respond(400, error_body(jsonrpc.INVALID_REQUEST, f"Bad Request: unsupported MCP-Protocol-Version {version!r}"))
            return
        shared = session.shared
        before = session.record() if shared is not None else None
        events = session.conn.receive(body)
        if before is not None and session.record() != before:  # initialized, log level, subscriptions
            await self.sessions.save_changes(session, before)
        for ev in events[0].events if len(events) == 1 and isinstance(events[0], Batch) else events:
            if isinstance(ev, RequestReceived):
                ev.principal = ex.principal
        if len(events) == 1 and isinstance(events[0], Batch):
            await self._answer_batch(session, events[0].events, ex)
            return
        requests = [ev for ev in events if isinstance(ev, RequestReceived)]
        for ev in events:
            await self._apply(session, ev)
        if requests:
            await self._answer_in_session(session, requests[0], ex, prefers_sse(ex.headers.get("accept", "")))
        elif any(isinstance(ev, Reply) for ev in events):
            data = next(ev.data for ev in events if isinstance(ev, Reply))
            await ex.respond(http_status_for(error_code(data) or 0) if error_code(data) in (-32700, -32600) else 200, data)
        else:
            await ex.respond(202)

    async def _apply(self, session: Session, ev: Event) -> None:
        """A cancellation or an answer to a server request; with shared state, one for a
        request another process runs (or sent) is passed to it."""
        shared = session.shared
        if isinstance(ev, CancelRequested):
            if not session.in_flight.cancel(ev.request_id) and shared is not None:
                await shared.route_cancel(session.id, ev.request_id)
        elif isinstance(ev, ResponseReceived):
            if not session.deliver(ev) and shared is not None and not asked_here(ev.id):
                error = msgspec.to_builtins(ev.error) if ev.error is not None else None
                await shared.route_response(session.id, {"id": ev.id, "result": ev.result, "error": error})

    async def _answer_batch(self, session: Session, events: list[Event], ex: Exchange) -> None:
        answers: list[bytes] = []
        peer = BufferPeer()

        async def one(req: RequestReceived) -> None:
            data = await self.dispatcher.handle(req, peer, session.in_flight)
            if data is not None:
                answers.append(data)

        async with trio.open_nursery() as nursery:
            for ev in events:
                if isinstance(ev, RequestReceived):
                    nursery.start_soon(one, ev)
                elif isinstance(ev, Reply):
                    answers.append(ev.data)
                else:
                    await self._apply(session, ev)
        if answers:
            await ex.respond(200, jsonrpc.encode_batch(answers))
        else:
            await ex.respond(202)

    async def _answer_in_session(self, session: Session, req: RequestReceived, ex: Exchange, sse: bool = False) -> None:
        """The request runs in the server's nursery, so a dropped connection does not stop it;
        its messages go through the session's replay store."""
        assert self.nursery is not None
        limit = self.settings.max_concurrent_requests
        if session.active >= limit:
            await ex.respond(503, jsonrpc.encode_error(req.id, busy(limit)), [(b"retry-after", b"1")])
            return
        stream = session.new_stream()
        box = await stream.attach(replay=False)
        peer = SessionPeer(session, stream, self.settings.sse_retry_ms)
        session.active += 1
        self.nursery.start_soon(self._run_in_session, session, req, peer, stream)
        try:
            first = await box.get()
        except trio.EndOfChannel:  # the session ended (DELETE, expiry, shutdown) before any answer
            if self.closing.is_set():
                await ex.respond(503, error_body(jsonrpc.INTERNAL_ERROR, "Service Unavailable: the server is shutting down", req.id), [(b"retry-after", b"5")])
            else:
                await ex.respond(404, error_body(jsonrpc.INVALID_REQUEST, "Not Found: the session ended", req.id))
            return
        if first[0] != CLOSE and stream.done and stream.seq == 1 and self.step_up is not None:
            challenge = self.step_up(ex, first[1])
            if challenge is not None:  # the token lacks a scope this request needs: 403
                stream.detach(box)
                await ex.respond(403, first[1], challenge)
                return
        json_ok = self.settings.response_mode == "json" or (self.settings.response_mode == "auto" and not sse)
        if json_ok and first[0] != CLOSE and stream.done and stream.seq == 1 and not peer.wants_sse:
            stream.detach(box)
            busy_now = error_code(first[1]) == jsonrpc.SERVER_BUSY
            await ex.respond(503 if busy_now else 200, first[1], RETRY_SOON if busy_now else None)
            return
        polling = req.features.version >= "2025-11-25"
        with contextlib.suppress(ProtocolError):  # Redis away: it streams all the same, not resumable
            await stream.persist()  # it streams: from now on what it sends can be resumed anywhere
        await ex.start_stream()
        if polling:  # priming event: an id to resume from, and how soon to come back
            await ex.send_chunk(sse_event(b"", stream.event_id("0"), retry_ms=self.settings.sse_retry_ms))
        await self._pump(ex, box, stream, first, polling)

    async def _run_in_session(self, session: Session, req: RequestReceived, peer: SessionPeer, stream: Stream) -> None:
        try:
            data = await self.dispatcher.handle(req, peer, session.in_flight)
            if data is not None:
                await stream.emit(data, final=True)
        finally:
            session.active -= 1
            stream.done = True
            stream.detach()
            session.streams.pop(stream.key, None)

    async def _pump(self, ex: Exchange, box: Outbox[Any], stream: Stream, first: Any, with_ids: bool) -> None:
        """Write a stream's frames as SSE until it ends or the server closes it (closing the
        box: what is queued is still written, then the response ends cleanly). A keep-alive
        comment goes out whenever nothing else did for ``sse_heartbeat_s``, from the start (no
        ``first`` frame yet) on: writing is how a client that vanished without a word is noticed."""
        try:
            frame = first
            while frame is None or frame[0] != CLOSE:
                if frame is not None:
                    await ex.send_chunk(sse_event(frame[1], stream.public_id(frame[0]) if with_ids else None))
                frame = None
                with trio.move_on_after(self.settings.sse_heartbeat_s):
                    frame = await box.get()
                if frame is None:
                    await ex.send_chunk(b": keep-alive\n\n")
        except (trio.EndOfChannel, trio.ClosedResourceError):
            pass
        except OSError:  # the client went away: the stream stays resumable
            pass
        finally:  # also when cancelled (the client hung up): later events wait for a resume
            stream.detach(box)
        try:
            await ex.end_stream()
        except OSError:
            pass

    async def _end_at_shutdown(self, box: Outbox[Any]) -> None:
        """A standalone stream ends (cleanly) when the server starts shutting down; a request's
        stream runs on until its answer, within the shutdown grace period."""
        await self.closing.wait()
        box.close()

    # -- GET and DELETE ----------------------------------------------------------------------------
    async def get(self, ex: Exchange) -> None:
        h = ex.headers
        sid = h.get("mcp-session-id")
        if sid is None:
            await ex.respond(405, error_body(jsonrpc.INVALID_REQUEST, "Method Not Allowed: GET needs a session (stateless clients use subscriptions/listen)"), [(b"allow", b"POST, OPTIONS")])
            return
        if not accepts(h.get("accept", ""), "text/event-stream"):
            await ex.respond(406, error_body(jsonrpc.INVALID_REQUEST, "Not Acceptable: Accept must list text/event-stream"))
            return
        session = await self._session_of(ex, sid)
        if session is None:
            await ex.respond(404, error_body(jsonrpc.INVALID_REQUEST, "Not Found: unknown or expired session"))
            return
        last = (h.get("last-event-id") or "").strip()
        if last:
            key, _, after = last.partition(".")
        elif session.shared is not None:
            key, after = "0", await session.shared.last(session.id, "0")
        else:
            key, after = "0", str(session.standalone.seq)
        stream = session.streams.get(key)
        borrowed = stream is None
        if stream is None:  # finished, or (shared) running elsewhere: replay, then what comes
            stream = Stream(session, key)
            if session.shared is None:
                stream.done = True
            else:
                session.streams[key] = stream
        try:
            box = await stream.attach(after)
        except BaseException:
            if borrowed:
                session.streams.pop(key, None)
            raise
        session.active += 1
        try:
            await ex.start_stream()
            async with ex.cancel_on_disconnect(), trio.open_nursery() as nursery:
                if key == "0":
                    nursery.start_soon(self._end_at_shutdown, box)
                await self._pump(ex, box, stream, None, True)  # heartbeats from now on; ends the response
                nursery.cancel_scope.cancel()
        finally:
            session.active -= 1
            session.touch()
            if borrowed and session.streams.get(key) is stream:
                session.streams.pop(key, None)

    async def delete(self, ex: Exchange) -> None:
        sid = ex.headers.get("mcp-session-id")
        if sid is None:
            await ex.respond(400, error_body(jsonrpc.INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required"))
        elif await self._session_of(ex, sid) is not None and await self.sessions.end(sid):
            await ex.respond(200)
        else:
            await ex.respond(404, error_body(jsonrpc.INVALID_REQUEST, "Not Found: unknown or expired session"))

    async def forward_changes(self) -> None:
        """List-changed and resource-updated notices to every initialized session's GET stream.

        With shared state each process forwards only the changes raised here, to every live
        session in Redis (one round trip for the records, one for the appends); the streams'
        readers, wherever they are, get them through the bus."""
        shared = self.sessions.shared
        with self.app.hub.listen(local_only=shared is not None) as events:
            async for event, arg in events:
                if shared is None:
                    for session in list(self.sessions.sessions.values()):
                        notice = session.conn.change_notice(event, arg)
                        if notice is not None:
                            await session.standalone.emit(notice)
                    continue
                try:
                    await self.forward_shared(event, arg)
                except ProtocolError as exc:  # Redis is away: this notice is lost (logged by the link)
                    log.debug("change notice not forwarded: %s", exc.message)

    async def forward_shared(self, event: str, arg: Any) -> None:
        shared = self.sessions.shared
        assert shared is not None
        if event != "resources/updated" and not event.endswith("/list_changed"):
            return  # nothing a session's GET stream gets (task status goes to listeners)
        records = await shared.load_many(await shared.live())
        scratch = self.app.new_connection()
        items = []
        for sid, record in records.items():  # the records, not a cached copy that may lag
            restore_connection(scratch, record)
            notice = scratch.change_notice(event, arg)
            if notice is not None:
                items.append((sid, "0", notice, False))
        for (sid, _, notice, _), pos in zip(items, await shared.append_many(items)):
            local = self.sessions.sessions.get(sid)
            if local is not None:  # the bus brings the others; our own we deliver here
                local.standalone.deliver_remote(pos, notice, False)


__all__ = ["Streamable"]
