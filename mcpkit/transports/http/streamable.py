"""The Streamable HTTP endpoint (/mcp): an adapter that moves bytes between HTTP exchanges and
the session cores — one shared, untracked core for the stateless era, one core per
handshake-era session — and maps their actions to HTTP: status codes, JSON bodies, SSE streams.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from typing import Any

import trio

from ...protocol import jsonrpc
from ...protocol.jsonrpc import Answer, Invalid, Message, ProtocolError
from ...protocol.session import Run, Send, ServerSession
from ...protocol.types import META_PROTOCOL_VERSION
from ...protocol.versions import HANDSHAKE_VERSIONS
from ...server.app import App
from ...server.dispatch import Dispatcher
from ...server.session_runner import SessionRunner
from .exchange import Exchange
from .outbox import Outbox
from .peers import DirectChannel, StepUp, StreamChannel, busy_status, respond_with
from .sessions import CLOSE, PostOrigin, Session, SessionManager, Stream, restore_connection
from .wire import RETRY_SOON, error_body, http_status_for, sse_event

log = logging.getLogger("mcpkit.http")
_META_KEY = META_PROTOCOL_VERSION.encode()


def prefers_sse(accept: str) -> bool:
    """The client listed text/event-stream before application/json: stream the answer."""
    accept = accept.lower()
    sse, js = accept.find("text/event-stream"), accept.find("application/json")
    return sse != -1 and (js == -1 or sse < js)


def accepts(accept: str, *types: str) -> bool:
    accept = accept.lower()
    if "*/*" in accept:
        return True
    for t in types:  # a loop, not all(generator): this runs for every POST
        if t not in accept:
            return False
    return True


class _StatelessOutlet:
    """The stateless era's outlet: every request runs in its own exchange, inline."""

    def channel(self, run: Run) -> DirectChannel:
        return run.origin  # the exchange's channel, made before the request ran

    async def reply(self, answer: Answer, origin: Any) -> None:
        raise AssertionError("stateless refusals are answered by the adapter")  # pragma: no cover

    async def send_batch(self, answers: list[Answer], origin: Any) -> None:
        raise AssertionError("the stateless era has no batches")  # pragma: no cover

    async def elsewhere(self, action: Any) -> None:
        return None  # no ids are tracked: a stateless client cancels by closing its stream


class Streamable:
    def __init__(self, app: App, sessions: SessionManager, nursery: trio.Nursery, step_up: StepUp | None) -> None:
        self.app = app
        self.settings = app.settings
        self.sessions = sessions
        self.dispatcher = sessions.dispatcher
        stateless = app.new_connection(allow_handshake=False)
        self.stateless = ServerSession(stateless, max_running=self.settings.max_connections, track=False)
        self.stateless_runner = SessionRunner(self.stateless, self.dispatcher, _StatelessOutlet(), transport="http")
        self.nursery = nursery  # runs session requests, so a dropped connection does not stop them
        self.closing = trio.Event()
        self.step_up = step_up

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
        accept = h.get("accept", "").lower()
        if not accepts(accept, "application/json", "text/event-stream"):
            await ex.respond(406, error_body(jsonrpc.INVALID_REQUEST, "Not Acceptable: Accept must list application/json and text/event-stream"))
            return
        if "application/json" not in h.get("content-type", "").lower():
            await ex.respond(415, error_body(jsonrpc.INVALID_REQUEST, "Unsupported Media Type: Content-Type must be application/json"))
            return
        body = await ex.read_body(self.settings.max_message_bytes)
        sid = h.get("mcp-session-id")
        version = h.get("mcp-protocol-version")
        if sid is None and (_META_KEY in body or (version is not None and version not in HANDSHAKE_VERSIONS)):
            await self.post_stateless(ex, body, accept)
        elif sid is None:
            await self.post_initialize(ex, body)
        else:
            await self.post_session(ex, body, sid, version)

    async def post_stateless(self, ex: Exchange, body: bytes, accept: str) -> None:
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
        sse = prefers_sse(accept) or self.settings.response_mode == "sse"
        listen = msg.method == "subscriptions/listen"
        channel = DirectChannel(ex, listen or (sse and self.settings.response_mode != "json"), self.step_up)
        observers = self.app.observers
        if observers:
            channel.observers = observers
        (action,) = self.stateless.receive_message(msg, stateless=True, headers=ex.headers, origin=channel)
        if not isinstance(action, Run):  # refused before it ran (headers, envelope, version, busy)
            assert isinstance(action, Send), action  # a stateless request is run or answered at once
            answer = functools.partial(respond_with, ex, action.answer, self.step_up)
            if observers and busy_status(action.answer):
                observers.rejected("limits", "http")
            if observers and action.lifecycle is not None:  # the protocol core's refusal: a request like any other
                await self.stateless_runner.reply_observed(action, answer, ex.headers)
            else:
                await answer()
            return
        action.request.principal = ex.principal
        try:
            if listen:  # held open: keep-alives meanwhile, and the end when the client leaves
                async with ex.cancel_on_disconnect(), trio.open_nursery() as nursery:
                    nursery.start_soon(channel.heartbeat, self.settings.sse_heartbeat_s)
                    await self.stateless_runner.execute([action], inline=True)
                    nursery.cancel_scope.cancel()
            elif ex.can_watch:  # the request's own scope ends when the client leaves
                await self.stateless_runner.execute([action], inline=True, scopes=_Watched(ex))
            else:
                async with ex.cancel_on_disconnect():
                    await self.stateless_runner.execute([action], inline=True)
        finally:
            if observers and channel.streamed:
                observers.stream_closed("http")

    async def post_initialize(self, ex: Exchange, body: bytes) -> None:
        try:
            msg = jsonrpc.decode(body)
        except ProtocolError as exc:
            await ex.respond(400, jsonrpc.encode_error(None, exc))
            return
        if not isinstance(msg, Message) or msg.method != "initialize" or not msg.is_request:
            await ex.respond(400, error_body(jsonrpc.INVALID_REQUEST, "Bad Request: Mcp-Session-Id header is required (or send initialize to open a session)"))
            return
        session = self.sessions.create()
        if session is None:
            if self.app.observers:
                self.app.observers.rejected("sessions", "http")
            limit = self.settings.max_sessions
            await ex.respond(503, error_body(jsonrpc.TOO_MANY_SESSIONS, f"Service Unavailable: all {limit} sessions (max_sessions) "
                                             "have a request or stream in progress; retry shortly", msg.id,
                                             {"max_sessions": limit}), [(b"retry-after", b"5")])
            return
        if ex.principal is not None:
            session.owner = ex.principal.owner  # only its owner may use it
        post = PostOrigin(ex.headers if self.app.observers else None)  # its trace context, when watched
        await session.runner.execute(session.core.receive_message(msg, origin=post))
        (answer,) = post.replies
        if answer.error is not None:
            await self.sessions.end(session.id)
            await ex.respond(400, answer.encode())
            return
        try:
            await self.sessions.save_new(session)  # acknowledged only once shared
        except ProtocolError:
            self.sessions.drop(session.id)
            raise
        await ex.respond(200, answer.encode(), [(b"mcp-session-id", session.id.encode())])

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
        post = PostOrigin(ex.headers if self.app.observers else None)
        revision = session.conn.revision
        actions = session.core.receive(body, origin=post)
        if session.conn.revision != revision:  # initialized, log level, subscriptions
            await self.sessions.save_changes(session)
        single: Run | None = None
        batch = False
        for action in actions:
            if isinstance(action, Run):
                action.request.principal = ex.principal
                batch = batch or action.in_batch
                if not action.in_batch:
                    single = action
        box: Outbox[Any] | None = None
        if single is not None:  # its stream, before it can send anything
            stream = session.new_stream()
            box = await stream.attach(replay=False)
            post.channel = StreamChannel(stream, _release(session, stream))
            session.active += 1
        await session.runner.execute(actions)
        if single is not None and box is not None:
            await self._answer_request(session, single, post.channel, box, ex)
        elif batch or post.batch is not None:
            await post.batch_done.wait()
            if post.batch:
                await ex.respond(200, jsonrpc.encode_batch([a.encode() for a in post.batch]))
            else:
                await ex.respond(202)
        elif post.replies:
            answer = post.replies[0]
            status = http_status_for(answer.code) if answer.code in (jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST) else 200
            if busy_status(answer):
                if self.app.observers:
                    self.app.observers.rejected("limits", "http")
                await ex.respond(503, answer.encode(), RETRY_SOON)
            else:
                await ex.respond(status, answer.encode())
        else:
            await ex.respond(202)

    async def _answer_request(self, session: Session, run: Run, channel: StreamChannel, box: Outbox[Any],
                              ex: Exchange) -> None:
        """A request in a session: one JSON answer when nothing streamed, else an SSE stream
        (resumable: its messages are in the replay log). The request runs on if the client
        goes away."""
        stream = channel.stream
        try:
            first = await box.get()
        except trio.EndOfChannel:  # the session ended (DELETE, expiry, shutdown) before any answer
            if self.closing.is_set():
                await ex.respond(503, error_body(jsonrpc.INTERNAL_ERROR, "Service Unavailable: the server is shutting down", run.request.id), [(b"retry-after", b"5")])
            else:
                await ex.respond(404, error_body(jsonrpc.INVALID_REQUEST, "Not Found: the session ended", run.request.id))
            return
        answered = first[0] != CLOSE and stream.done and stream.seq == 1 and channel.final is not None
        if answered and self.step_up is not None and channel.final is not None:
            challenge = self.step_up(ex, channel.final)
            if challenge is not None:  # the token lacks a scope this request needs: 403
                stream.detach(box)
                await ex.respond(403, first[1], challenge)
                return
        mode = self.settings.response_mode
        json_ok = mode == "json" or (mode == "auto" and not prefers_sse(ex.headers.get("accept", "")))
        if json_ok and answered and not channel.wants_sse:
            stream.detach(box)
            busy_now = channel.final is not None and busy_status(channel.final)
            if busy_now and self.app.observers:
                self.app.observers.rejected("limits", "http")
            await ex.respond(503 if busy_now else 200, first[1], RETRY_SOON if busy_now else None)
            return
        polling = run.request.features.version >= "2025-11-25"
        with contextlib.suppress(ProtocolError):  # shared state away: it streams all the same, not resumable
            await stream.persist()  # it streams: from now on what it sends can be resumed anywhere
        await ex.start_stream()
        if polling:  # priming event: an id to resume from, and how soon to come back
            await ex.send_chunk(sse_event(b"", stream.event_id("0"), retry_ms=self.settings.sse_retry_ms))
        await self._pump(ex, box, stream, first, polling)

    async def _pump(self, ex: Exchange, box: Outbox[Any], stream: Stream, first: Any, with_ids: bool) -> None:
        """Write a stream's frames as SSE until it ends or the server closes it (closing the
        box: what is queued is still written, then the response ends cleanly). A keep-alive
        comment goes out whenever nothing else did for ``sse_heartbeat_s``, from the start (no
        ``first`` frame yet) on: writing is how a client that vanished without a word is noticed."""
        observers = self.app.observers
        if observers:
            observers.stream_opened("http")
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
            if observers:
                observers.stream_closed("http")
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
        backend = session.backend
        last = (h.get("last-event-id") or "").strip()
        if last:
            key, _, after = last.partition(".")
        else:
            key, after = "0", await backend.last(session.id, "0")
        stream = session.streams.get(key)
        borrowed = stream is None
        if stream is None:  # finished, or running in another process: replay, then what comes
            stream = Stream(session, key)
            if backend.written_elsewhere(session.id, key):
                session.streams[key] = stream
            else:
                stream.done = True
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

    # -- change notices ----------------------------------------------------------------------------
    async def forward_change(self, event: str, arg: Any) -> None:
        """A relay of the change hub: the notice every initialized session's GET stream gets
        for a change raised here, written into the replay log of every session of the
        deployment (one round trip for the records, one for the appends, with shared state) and
        delivered to the streams read here; the bus brings it to those read elsewhere."""
        if event != "resources/updated" and not event.endswith("/list_changed"):
            return  # nothing a session's GET stream gets (task status goes to listeners)
        backend = self.sessions.backend
        records = await backend.records()  # the records, not a cached copy that may lag
        local = self.sessions.sessions
        scratch = self.app.new_connection()
        items = []
        for sid in [*records, *(sid for sid in local if sid not in records)]:
            record = records.get(sid)
            if record is not None:
                restore_connection(scratch, record)
                notice = scratch.change_notice(event, arg)
            else:
                notice = local[sid].conn.change_notice(event, arg)
            if notice is not None:
                items.append((sid, "0", notice, False))
        for (sid, _, notice, _), pos in zip(items, await backend.append_many(items)):
            session = local.get(sid)
            if session is not None:
                session.standalone.deliver_appended(pos, notice, False)


class _Watched:
    """The scope registry a stateless request runs with: the dispatcher registers the request's
    cancel scope here, and the exchange cancels it if the client goes away (no watcher task,
    no second scope, where the HTTP server can do that)."""

    __slots__ = ("_ex", "_scope")

    def __init__(self, ex: Exchange) -> None:
        self._ex = ex
        self._scope: trio.CancelScope | None = None

    def __setitem__(self, request_id: Any, scope: trio.CancelScope) -> None:
        self._scope = scope
        self._ex.watch(scope)

    def get(self, request_id: Any) -> trio.CancelScope | None:
        return self._scope

    def __delitem__(self, request_id: Any) -> None:
        if self._scope is not None:
            self._ex.unwatch(self._scope)
            self._scope = None


def _release(session: Session, stream: Stream) -> Any:
    """What ends a request's stream when the request is over (answered or not)."""

    def done() -> None:
        session.active -= 1
        stream.done = True
        stream.detach()
        session.streams.pop(stream.key, None)

    return done


__all__ = ["Streamable", "accepts", "prefers_sse"]
