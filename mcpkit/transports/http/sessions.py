"""Handshake-era HTTP sessions: each one's session core and runner, its SSE streams, and the
manager that finds, creates, expires and ends them.

What outlives a request (records, the replay log, what other processes say) is the backend's
(``session_state.py``): in memory for one process, in Redis for many. Nothing here asks which.
"""

from __future__ import annotations

import itertools
import logging
import secrets
import time
import weakref
from typing import Any, Callable

import msgspec
import msgspec.structs
import trio

from ...protocol.connection import ServerConnection
from ...protocol.jsonrpc import Answer, ErrorObject, ProtocolError
from ...protocol.session import Cancel, Resolve, Run, ServerSession
from ...server.dispatch import Dispatcher
from ...server.session_runner import SessionRunner
from .outbox import Outbox
from .session_state import (
    Answered, Appended, Cancelled, Changed, Ended, Reconnected, SessionBackend, SessionRecord,
)
from .shared_sessions import apply_changes

log = logging.getLogger("mcpkit.http")
Frame = tuple[str | None, bytes]  # (event id, JSON-RPC message)
CLOSE = "close"  # frame id telling the live reader to end its HTTP response (SSE polling)


class Stream:
    """One SSE stream of a session: a POST's response stream or the standalone GET stream.

    Every message gets an event id (``KEY.POSITION``) and is kept in the backend's replay log,
    so a client that lost the connection can come back with ``Last-Event-ID``; the live reader
    (if any, here) gets it through a bounded queue. A request's stream is kept only once it
    streams: a request answered with one JSON message, which no client can resume, never is
    (its first message waits, with a provisional id, ``~1``).

    A stream refers to its session weakly: the session owns its streams, and a session that
    ends is freed at once, not when the cycle collector comes by.
    """

    def __init__(self, session: "Session", key: str, *, persisted: bool = True) -> None:
        self._session = weakref.ref(session)
        self.sid = session.id
        self.backend = session.backend
        self.backlog_bytes = session.backlog_bytes
        self.key = key
        self.seq = 0
        self.done = False
        self.reader: Outbox[Frame] | None = None  # the live reader's queue, if one is attached
        self.persisted = persisted
        self.last_pos = "0"  # the newest position delivered here
        self._pending: list[tuple[str, bytes, bool]] = []  # not yet in the log
        self._provisional: dict[str, str] = {}  # provisional id -> position in the log
        self._lock_: trio.Lock | None = None  # appends stay in order (made when the stream is kept)
        self._held: list[tuple[str, bytes, bool]] | None = None  # events appended elsewhere during attach

    @property
    def _lock(self) -> trio.Lock:
        if self._lock_ is None:
            self._lock_ = trio.Lock()
        return self._lock_

    @property
    def session(self) -> "Session":
        session = self._session()
        if session is None:
            raise RuntimeError(f"stream {self.key} outlived its session")
        return session

    def event_id(self, pos: str) -> str:
        return f"{self.key}.{pos}"

    async def emit(self, data: bytes, *, final: bool = False) -> None:
        self.seq += 1
        if not self.persisted and self.seq == 1:
            pos = f"~{self.seq}"
            self._pending.append((pos, data, final))
        else:
            try:
                async with self._lock:
                    await self._persist_pending()
                    pos = await self.backend.append(self.sid, self.key, data, final)
            except ProtocolError:  # shared state away: the live reader still gets it, a resume cannot
                pos = f"~{self.seq}"
            else:  # a reader that attached while the append was under way may have it already
                self.deliver_appended(pos, data, final)
                return
        if final:
            self.done = True
        self.deliver(pos, data, final)

    async def persist(self) -> None:
        """Keep what this stream holds for replay, and from now on everything it gets."""
        async with self._lock:
            await self._persist_pending()

    async def _persist_pending(self) -> None:
        if self.persisted:
            return
        for provisional, data, final in self._pending:
            self._provisional[provisional] = self.last_pos = await self.backend.append(self.sid, self.key, data, final)
        self._pending.clear()
        self.persisted = True

    def public_id(self, event_id: str | None) -> str | None:
        """The id a client may keep: a provisional one becomes the position it got in the log."""
        if event_id is None or not self._provisional:
            return event_id
        pos = event_id.split(".", 1)[1]
        return self.event_id(self._provisional[pos]) if pos in self._provisional else event_id

    def deliver(self, pos: str, data: bytes, final: bool) -> None:
        if self.reader is not None and not self.reader.put((self.event_id(pos), data), len(data)):
            self.reader = None  # gone, or not reading: the rest waits for a resume
        if final and self.reader is not None:
            self.reader.close()
            self.reader = None

    def deliver_appended(self, pos: str, data: bytes, final: bool) -> None:
        """An event appended to the log (by :meth:`emit`, another process or the change
        forwarder) to the live reader, in order and once: a reader attaching meanwhile gets
        it after the kept ones, and one whose replay already held it does not get it twice."""
        if self._held is not None:  # a reader is reading the kept events: after them
            self._held.append((pos, data, final))
            return
        if self.backend.order(pos) <= self.backend.order(self.last_pos):
            return
        self.last_pos = pos
        if final:
            self.done = True
        self.deliver(pos, data, final)

    async def attach(self, after: str = "0", *, replay: bool = True) -> Outbox[Frame]:
        """A queue with the kept messages after position ``after`` (unless ``replay`` is off:
        a new request's stream has none), then the live ones (bounded: see
        ``sse_backlog_bytes``). A newer reader replaces an older one."""
        box: Outbox[Frame] = Outbox(self.backlog_bytes)
        if self.reader is not None:
            self.reader.close()
        self.reader = None
        if replay:
            order = self.backend.order
            cursor = after if order(after) != (-1, -1) else "0"  # the client has everything up to here
            self._held = []  # what arrives while the log is read comes after, not twice
            try:
                kept = await self.backend.read(self.sid, self.key, cursor)
            finally:
                held, self._held = self._held, None
            for pos, data, final in kept + held:  # both in order; held may repeat kept's tail
                if order(pos) <= order(cursor):
                    continue
                box.put((self.event_id(pos), data), 0)  # replay: held by the log anyway
                cursor = pos
                if final:
                    self.done = True
            if order(cursor) > order(self.last_pos):
                self.last_pos = cursor
        if self.done:
            box.close()
        else:
            self.reader = box
        return box

    def close_reader(self) -> None:
        """End the live reader's response; later messages wait in the log for a reconnect."""
        if self.reader is not None:
            self.reader.put((CLOSE, b""), 0)
            self.reader.close()
            self.reader = None

    def detach(self, reader: Outbox[Frame] | None = None) -> None:
        """Stop live delivery (only to ``reader``, if given: a newer reader stays)."""
        if self.reader is not None and (reader is None or self.reader is reader):
            self.reader.close()
            self.reader = None


class PostOrigin:
    """One POST of a session: where what its message causes goes (the HTTP adapter reads it
    when the session has acted)."""

    __slots__ = ("channel", "replies", "batch", "_batch_done", "headers")

    def __init__(self, headers: dict[str, str] | None = None) -> None:
        #: the POST's headers, kept only when observers watch (the trace context of its request)
        self.headers = headers
        self.channel: Any = None  # the channel of the request it carries, if any
        self.replies: list[Answer] = []  # answers made at once
        self.batch: list[Answer] | None = None
        self._batch_done: trio.Event | None = None

    @property
    def batch_done(self) -> trio.Event:
        """Set when the batch's answers are in ``batch`` (made only for a POST with a batch)."""
        if self._batch_done is None:
            self._batch_done = trio.Event()
        return self._batch_done


class _Dropped:
    """A batch member's channel: its notifications have nowhere to go (the answer is the batch's)."""

    can_ask = False

    async def message(self, data: bytes) -> None:
        return None

    async def answer(self, answer: Answer) -> None:
        return None

    def done(self) -> None:
        return None


_DROPPED = _Dropped()


class _SessionOutlet:
    """What the session runner sends, routed by the POST that caused it. It holds no reference
    to the session (so nothing keeps an ended session alive)."""

    def __init__(self, sid: str, backend: SessionBackend) -> None:
        self.sid = sid
        self.backend = backend

    def channel(self, run: Run) -> Any:
        origin = run.origin
        if run.in_batch or not isinstance(origin, PostOrigin) or origin.channel is None:
            return _DROPPED
        return origin.channel

    async def reply(self, answer: Answer, origin: Any) -> None:
        if isinstance(origin, PostOrigin):
            origin.replies.append(answer)

    async def send_batch(self, answers: list[Answer], origin: Any) -> None:
        if isinstance(origin, PostOrigin):
            origin.batch = answers
            origin.batch_done.set()

    async def elsewhere(self, action: Cancel | Resolve) -> None:
        """A cancellation or answer for a request another process may run or have sent."""
        prefix = self.backend.ask_prefix
        if isinstance(action, Cancel):
            await self.backend.cancel_elsewhere(self.sid, action.request_id)
        elif not (isinstance(action.request_id, str) and action.request_id.startswith(prefix)):
            error = msgspec.to_builtins(action.error) if action.error is not None else None
            await self.backend.answer_elsewhere(self.sid, action.request_id, action.result, error)


class Session:
    def __init__(self, sid: str, conn: ServerConnection, backend: SessionBackend, dispatcher: Dispatcher,
                 nursery: trio.Nursery, *, max_running: int, backlog_bytes: int) -> None:
        self.id = sid
        self.backend = backend
        self.backlog_bytes = backlog_bytes
        self.core = ServerSession(conn, max_running=max_running, ask_prefix=backend.ask_prefix)
        self.runner = SessionRunner(self.core, dispatcher, _SessionOutlet(sid, backend), nursery,
                                    transport="http", session_id=sid)
        self.streams: dict[str, Stream] = {}
        self.last_seen = trio.current_time()
        self.touched = self.last_seen  # when the backend last heard of it from here
        self.active = 0  # requests and streams in progress
        #: (issuer, subject) of the principal that opened it; only they may use it (None: open)
        self.owner: tuple[str, str] | None = None
        self.saved: SessionRecord | None = None  # the record as the backend last got it
        #: when it was opened here (perf_counter), for observers; None: opened elsewhere, loaded here
        self.opened: float | None = None
        self._counter = itertools.count(1)
        self._prefix = backend.ask_prefix.rstrip(".")
        self.standalone = self.new_stream("0")

    @property
    def conn(self) -> ServerConnection:
        return self.core.conn

    def new_stream(self, key: str | None = None) -> Stream:
        if key is None:
            key = f"{self._prefix}{next(self._counter)}"  # unique across processes sharing it
        stream = self.streams[key] = Stream(self, key, persisted=key == "0")
        return stream

    def touch(self) -> None:
        self.last_seen = trio.current_time()

    def record(self) -> SessionRecord:
        c = self.conn
        return SessionRecord(version=c.version or "", client_info=c.client_info, client_capabilities=c.client_capabilities,
                             log_level=c.log_level, subscriptions=sorted(c.subscriptions), initialized=c.initialized,
                             owner=list(self.owner) if self.owner else None)

    def restore(self, rec: SessionRecord) -> None:
        restore_connection(self.conn, rec)
        self.owner = (rec.owner[0], rec.owner[1]) if rec.owner and len(rec.owner) == 2 else None
        self.saved = rec

    def close(self) -> None:
        self.runner.close()
        for stream in self.streams.values():
            stream.detach()
        self.backend.forget(self.id)


def restore_connection(c: ServerConnection, rec: SessionRecord) -> None:
    """Put a session record's state into a connection."""
    c.version, c.client_info, c.client_capabilities = rec.version or None, rec.client_info, rec.client_capabilities  # type: ignore[assignment]
    c.log_level, c.subscriptions, c.initialized = rec.log_level, set(rec.subscriptions), rec.initialized  # type: ignore[assignment]


class SessionManager:
    """The sessions this process serves, at most ``max_sessions`` of them (the longest idle one
    makes room; with shared state it is only forgotten here, and loaded again when next used).
    A session another process opened is loaded from the backend on first use."""

    def __init__(self, backend: SessionBackend, new_connection: Callable[[], ServerConnection], dispatcher: Dispatcher,
                 nursery: trio.Nursery, *, ttl_s: float, max_sessions: int, max_running: int,
                 backlog_bytes: int) -> None:
        self.backend = backend
        self.new_connection = new_connection
        self.dispatcher = dispatcher
        self.nursery = nursery
        self.ttl = ttl_s
        self.max = max_sessions
        self.max_running = max_running
        self.backlog_bytes = backlog_bytes
        self.sessions: dict[str, Session] = {}

    def _session(self, sid: str) -> Session:
        return Session(sid, self.new_connection(), self.backend, self.dispatcher, self.nursery,
                       max_running=self.max_running, backlog_bytes=self.backlog_bytes)

    async def get(self, session_id: str) -> Session | None:
        session = self.sessions.get(session_id)
        now = trio.current_time()
        if session is None:
            if len(session_id) > 64 or not self._make_room():
                return None
            record = await self.backend.load(session_id)
            if record is None:
                return None
            session = self.sessions.get(session_id)  # another request may have loaded it meanwhile
            if session is None:
                session = self.sessions[session_id] = self._session(session_id)
                session.restore(record)
                session.touched = now
        elif now - session.touched > min(5.0, self.ttl / 10):  # tell the backend it is in use, now and then
            session.touched = now
            if not await self.backend.touch(session_id):
                self.drop(session_id)
                return None
        session.touch()
        return session

    def _make_room(self) -> bool:
        """Below ``max_sessions``, or the longest-idle session made room; False if all are busy."""
        if len(self.sessions) < self.max:
            return True
        idle = [s for s in self.sessions.values() if s.active == 0]
        if not idle:
            return False
        self.drop(min(idle, key=lambda s: s.last_seen).id)
        return True

    def create(self) -> Session | None:
        """A new session; None when every session here is busy."""
        if not self._make_room():
            return None
        session = self._session(secrets.token_urlsafe(24))  # visible ASCII, unguessable
        self.sessions[session.id] = session
        observers = self.dispatcher.app.observers
        if observers:
            session.opened = time.perf_counter()
            observers.session_opened("http", session.id)
        return session

    async def save_new(self, session: Session) -> None:
        """Write a new session's record (before its initialize is answered)."""
        record = session.record()
        await self.backend.create(session.id, record)
        session.saved = record

    async def save_changes(self, session: Session) -> None:
        """Write what messages changed (initialized, log level, subscriptions)."""
        record = session.record()
        before = session.saved or record
        if before.initialized != record.initialized and before == msgspec.structs.replace(record, initialized=before.initialized):
            return  # only notifications/initialized: nothing decides by it, so it travels with the next change
        await self.backend.update(session.id, before, record)
        session.saved = record

    async def end(self, session_id: str) -> bool:
        existed = self.drop(session_id)
        return await self.backend.end(session_id) or existed

    def drop(self, session_id: Any) -> bool:
        """Forget a session here (ended, evicted, or gone from shared state)."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        session.close()
        if session.opened is not None:  # ended (DELETE, expiry, shutdown) or evicted here
            observers = self.dispatcher.app.observers
            if observers:
                observers.session_closed("http", session.id, time.perf_counter() - session.opened)
        return True

    async def expire_forever(self) -> None:
        """Forget sessions idle for longer than the TTL (the backend expires their records),
        keep the records of sessions in use here from expiring, forget any the backend lost."""
        while True:
            await trio.sleep(min(max(self.ttl / 4, 0.05), 30))
            cutoff = trio.current_time() - self.ttl
            for sid, session in list(self.sessions.items()):
                if session.active == 0 and session.last_seen < cutoff:
                    self.drop(sid)
            await self.keep_in_use()

    async def keep_in_use(self) -> None:
        """Push back the expiry of the sessions in use here (streams open, requests running),
        and forget those the backend no longer has — expired, or lost when Redis restarted
        empty — which ends their streams: the clients reconnect, get 404, and initialize
        again. Idle sessions are checked when next used (:meth:`get`)."""
        sids = [sid for sid, session in self.sessions.items() if session.active]
        if not sids:
            return
        try:
            lost = await self.backend.touch_many(sids)
        except ProtocolError:
            return  # shared state away or refusing: the next round tries again (the link logs it)
        if lost:
            log.warning("%d sessions served here are gone from shared state (Redis restarted empty, or was flushed); "
                        "their streams end and their clients start new sessions", len(lost))
        for sid in lost:
            self.drop(sid)

    async def follow_remote(self) -> None:
        """Act on what other processes say (nothing, for one process alone)."""
        async for item in self.backend.remote():
            try:
                await self._remote(item)
            except ProtocolError as exc:  # shared state away during a catch-up: the next one retries
                log.debug("catch-up skipped: %s", exc.message)

    async def _remote(self, item: Any) -> None:
        if isinstance(item, Reconnected):
            await self._catch_up()
            return
        session = self.sessions.get(item.sid)
        if session is None:
            return
        if isinstance(item, Appended):
            stream = session.streams.get(item.key)
            if stream is not None:
                stream.deliver_appended(*item.event)
        elif isinstance(item, Ended):
            self.drop(item.sid)
        elif isinstance(item, Changed):
            session.restore(apply_changes(session.record(), item.changes, item.removed))
        elif isinstance(item, Answered):
            error = msgspec.convert(item.error, ErrorObject) if isinstance(item.error, dict) else None
            session.runner.resolve(Resolve(item.request_id, item.result, error))
        elif isinstance(item, Cancelled):
            scope = session.runner.scopes.get(item.request_id)
            if scope is not None:
                scope.cancel()

    async def _catch_up(self) -> None:
        """After a bus outage: forget the sessions in use here that shared state lost meanwhile,
        then give the live readers here what they missed, from the log."""
        await self.keep_in_use()
        for session in list(self.sessions.values()):
            for stream in list(session.streams.values()):
                if stream.reader is None:
                    continue
                for pos, data, final in await self.backend.read(session.id, stream.key, stream.last_pos):
                    stream.deliver_appended(pos, data, final)
