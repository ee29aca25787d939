"""Handshake-era HTTP sessions: their connection state, SSE streams and the replay store.

Each process keeps the sessions it serves here. With shared state (``shared_sessions.py``) the
records and every streamed event also live in Redis, so any process can serve any session:
this module then loads sessions it has not seen, writes events through, and takes the events,
changes and answers other processes announce.
"""

from __future__ import annotations

import collections
import itertools
import logging
import secrets
import weakref
from typing import TYPE_CHECKING, Any, Iterator

import msgspec
import trio

from ...protocol.connection import ResponseReceived, ServerConnection
from ...protocol.jsonrpc import ErrorObject, ProtocolError
from ...server.context import InFlight, PendingRequests
from ...server.redis_link import process_tag
from .outbox import Outbox
from .shared_sessions import SessionRecord, pos_key

if TYPE_CHECKING:
    from .shared_sessions import SharedSessions

log = logging.getLogger("mcpkit.http")
Frame = tuple[str | None, bytes]  # (event id, JSON-RPC message)
CLOSE = "close"  # frame id telling the live reader to end its HTTP response (SSE polling)


class ReplayBudget:
    """The bytes all the replay stores of one process may hold together (``event_store_total_bytes``):
    past it the oldest messages go first, whichever session kept them, so many sessions cannot
    pin more than this however big their answers are."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.used = 0
        self._order: collections.deque[tuple["ReplayStore", int]] = collections.deque()  # in append order
        self._held = 0  # entries of _order their store still holds (the rest are stale)
        self._stamps = itertools.count()

    def charge(self, store: "ReplayStore", size: int) -> int:
        """Count a message ``store`` keeps; returns its stamp (its place in the global order)."""
        if len(self._order) > 2 * self._held + 64:  # forget entries their stores dropped already
            self._order = collections.deque(e for e in self._order if e[0].holds(e[1]))
        self.used += size
        while self.used > self.max_bytes and self._order:
            owner, oldest = self._order.popleft()
            owner.drop_if_oldest(oldest)
        stamp = next(self._stamps)
        self._order.append((store, stamp))
        self._held += 1
        return stamp

    def release(self, size: int) -> None:
        self._held -= 1
        self.used -= size


class ReplayStore:
    """The session's recent SSE messages for ``Last-Event-ID`` replay, bounded by count and by
    bytes: a message bigger than the byte bound is not kept at all (it could only be kept by
    going over it), and with a :class:`ReplayBudget` all stores together stay under its bound."""

    def __init__(self, max_events: int, max_bytes: int, budget: ReplayBudget | None = None) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.budget = budget
        self._events: collections.deque[tuple[str, int, bytes, int]] = collections.deque()  # key, seq, data, stamp
        self._bytes = 0

    def append(self, key: str, seq: int, data: bytes) -> None:
        size = len(data)
        budget = self.budget
        if size > self.max_bytes or self.max_events < 1 or (budget is not None and size > budget.max_bytes):
            return  # it cannot be kept within the bounds: the live reader gets it, a resume cannot
        events = self._events
        while events and (len(events) >= self.max_events or self._bytes + size > self.max_bytes):
            self._drop_oldest()
        stamp = budget.charge(self, size) if budget is not None else 0
        events.append((key, seq, data, stamp))
        self._bytes += size

    def _drop_oldest(self) -> None:
        size = len(self._events.popleft()[2])
        self._bytes -= size
        if self.budget is not None:
            self.budget.release(size)

    def drop_if_oldest(self, stamp: int) -> None:
        if self._events and self._events[0][3] == stamp:
            self._drop_oldest()

    def holds(self, stamp: int) -> bool:
        return bool(self._events) and self._events[0][3] <= stamp

    def clear(self) -> None:
        while self._events:
            self._drop_oldest()

    def __iter__(self) -> Iterator[tuple[str, int, bytes]]:
        return ((key, seq, data) for key, seq, data, _ in self._events)

    def __len__(self) -> int:
        return len(self._events)


class Stream:
    """One SSE stream of a session: a POST's response stream or the standalone GET stream.

    Every message gets an event id (``KEY.POSITION``) and is kept for replay — in the session's
    bounded store, or in Redis with shared state — so a client that lost the connection can
    come back with ``Last-Event-ID``; the live reader (if any, here) gets it through a queue.
    A request's stream is kept (in the store, or in Redis) only once it streams: a request
    answered with one JSON message, which no client can resume, never is (its first message
    waits, with a provisional id under shared state).

    A stream refers to its session weakly: the session owns its streams, and a session that
    ends is freed at once, not when the cycle collector comes by.
    """

    def __init__(self, session: "Session", key: str, *, persisted: bool = True) -> None:
        self._session = weakref.ref(session)
        self.key = key
        self.seq = 0
        self.done = False
        self.reader: Outbox[Frame] | None = None  # the live reader's queue, if one is attached
        self.persisted = persisted
        self.last_pos = "0"  # shared: the newest position delivered here
        self._pending: list[tuple[str, bytes, bool]] = []  # not yet persisted
        self._provisional: dict[str, str] = {}  # provisional id -> position in Redis
        self._lock = trio.Lock()  # appends to Redis stay in order
        self._held: list[tuple[str, bytes, bool]] | None = None  # shared: bus events during attach

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
        shared = self.session.shared
        if shared is None:
            pos = str(self.seq)
            if not self.persisted and self.seq > 1:
                self._keep_pending()  # it streams after all
            if self.persisted:
                self.session.store.append(self.key, self.seq, data)
            else:
                self._pending.append((pos, data, final))
        elif not self.persisted and self.seq == 1:
            pos = f"~{self.seq}"
            self._pending.append((pos, data, final))
        else:
            try:
                async with self._lock:
                    await self._persist_pending()
                    pos = await shared.append(self.session.id, self.key, data, final)
                self.last_pos = pos
            except ProtocolError:  # Redis is away: the live reader still gets it, a resume cannot
                pos = f"~{self.seq}"
        if final:
            self.done = True
        self.deliver(pos, data, final)

    async def persist(self) -> None:
        """Keep what this stream holds for replay (in the store or Redis), and from now on
        everything it gets."""
        async with self._lock:
            await self._persist_pending()

    def _keep_pending(self) -> None:
        store = self.session.store
        for pos, data, _ in self._pending:
            store.append(self.key, int(pos), data)
        self._pending.clear()
        self.persisted = True

    async def _persist_pending(self) -> None:
        shared = self.session.shared
        if self.persisted:
            return
        if shared is None:
            self._keep_pending()
            return
        for provisional, data, final in self._pending:
            self._provisional[provisional] = self.last_pos = await shared.append(self.session.id, self.key, data, final)
        self._pending.clear()
        self.persisted = True

    def public_id(self, event_id: str | None) -> str | None:
        """The id a client may keep: a provisional one becomes the position it got in Redis."""
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

    def deliver_remote(self, pos: str, data: bytes, final: bool) -> None:
        """An event another process appended to this stream (in order, once)."""
        if self._held is not None:  # a reader is reading the kept events: after them
            self._held.append((pos, data, final))
            return
        if pos_key(pos) <= pos_key(self.last_pos):
            return
        self.last_pos = pos
        if final:
            self.done = True
        self.deliver(pos, data, final)

    async def attach(self, after: str = "0", *, replay: bool = True) -> Outbox[Frame]:
        """A queue with the kept messages after position ``after`` (unless ``replay`` is off:
        a new request's stream has none), then the live ones (bounded: see
        ``sse_backlog_bytes``). A newer reader replaces an older one."""
        box: Outbox[Frame] = Outbox(self.session.backlog_bytes)
        if self.reader is not None:
            self.reader.close()
        self.reader = box if not self.done else None
        shared = self.session.shared
        if not replay:
            pass
        elif shared is None:
            after_seq = int(after) if after.isdigit() else 0
            for key, seq, data in self.session.store:
                if key == self.key and seq > after_seq:
                    box.put((f"{key}.{seq}", data), 0)  # replay: held by the store anyway
        else:
            if pos_key(after) == (-1, -1):
                after = "0"  # not a position Redis gave (a client's garbage, a provisional id)
            self.reader = None
            self._held = []  # what the bus brings while Redis is read comes after, not twice
            try:
                kept = await shared.read(self.session.id, self.key, after)
            finally:
                held, self._held = self._held, None
            cursor = after  # the client has everything up to here
            for pos, data, final in kept + held:  # both in order; held may repeat kept's tail
                if pos_key(pos) <= pos_key(cursor):
                    continue
                box.put((self.event_id(pos), data), 0)
                cursor = pos
                if final:
                    self.done = True
            if pos_key(cursor) > pos_key(self.last_pos):
                self.last_pos = cursor
            self.reader = box if not self.done else None
        if self.done:
            self.reader = None
            box.close()
        return box

    def close_reader(self) -> None:
        """End the live reader's response; later messages wait in the store for a reconnect."""
        if self.reader is not None:
            self.reader.put((CLOSE, b""), 0)
            self.reader.close()
            self.reader = None

    def detach(self, reader: Outbox[Frame] | None = None) -> None:
        """Stop live delivery (only to ``reader``, if given: a newer reader stays)."""
        if self.reader is not None and (reader is None or self.reader is reader):
            self.reader.close()
            self.reader = None


class Session:
    def __init__(self, conn: ServerConnection, store_size: int, backlog_bytes: int = 8 * 1024 * 1024,
                 store_bytes: int = 1024 * 1024, *, shared: "SharedSessions | None" = None, sid: str | None = None,
                 budget: ReplayBudget | None = None) -> None:
        self.id = sid or secrets.token_urlsafe(24)  # visible ASCII, unguessable
        self.conn = conn
        self.shared = shared
        self.in_flight = InFlight()
        self.store = ReplayStore(store_size, store_bytes, budget)
        self.backlog_bytes = backlog_bytes
        self.streams: dict[str, Stream] = {}
        self.pending = PendingRequests()
        self.last_seen = trio.current_time()
        self.touched = self.last_seen  # shared: when Redis last heard of it from here
        self.active = 0  # requests and streams in progress
        #: (issuer, subject) of the principal that opened it; only they may use it (None: open)
        self.owner: tuple[str, str] | None = None
        self._counter = itertools.count(1)
        self._asks = itertools.count(1)
        self.standalone = self.new_stream("0")

    def new_stream(self, key: str | None = None) -> Stream:
        if key is None:
            key = f"{process_tag()}{next(self._counter)}" if self.shared is not None else str(next(self._counter))
        stream = self.streams[key] = Stream(self, key, persisted=key == "0")
        return stream

    def touch(self) -> None:
        self.last_seen = trio.current_time()

    # -- the record other processes share --------------------------------------------------------
    def record(self) -> "SessionRecord":
        c = self.conn
        return SessionRecord(version=c.version or "", client_info=c.client_info, client_capabilities=c.client_capabilities,
                             log_level=c.log_level, subscriptions=sorted(c.subscriptions), initialized=c.initialized,
                             owner=list(self.owner) if self.owner else None)

    def restore(self, rec: "SessionRecord") -> None:
        restore_connection(self.conn, rec)
        self.owner = (rec.owner[0], rec.owner[1]) if rec.owner and len(rec.owner) == 2 else None

    # -- server-to-client requests ------------------------------------------------------------------
    def deliver(self, response: ResponseReceived) -> bool:
        """An answer to a server request; False if none of ours is waiting for it."""
        return self.pending.deliver(response)

    def deliver_routed(self, response: dict[str, Any]) -> None:
        err = response.get("error")
        error = msgspec.convert(err, ErrorObject) if isinstance(err, dict) else None
        self.pending.deliver(ResponseReceived(response.get("id"), response.get("result"), error))

    async def ask(self, stream: Stream, method: str, params: dict[str, Any]) -> Any:
        """Send a server-to-client request on ``stream`` and wait for the client's answer."""

        async def send(data: bytes) -> None:
            await stream.emit(data)

        # with shared state the answer may reach another process: ids say whose request it is
        request_id: Any = f"{process_tag()}.{next(self._asks)}" if self.shared is not None else self.conn.next_request_id()
        return await self.pending.ask(request_id, send, method, params)

    def close(self) -> None:
        for scope in list(self.in_flight.scopes.values()):
            scope.cancel()
        for stream in self.streams.values():
            stream.detach()
        self.store.clear()  # its replay messages are freed now, not when the session object goes


def restore_connection(c: ServerConnection, rec: "SessionRecord") -> None:
    """Put a shared session record's state into a connection."""
    c.version, c.client_info, c.client_capabilities = rec.version or None, rec.client_info, rec.client_capabilities  # type: ignore[assignment]
    c.log_level, c.subscriptions, c.initialized = rec.log_level, set(rec.subscriptions), rec.initialized  # type: ignore[assignment]


def asked_here(request_id: Any) -> bool:
    """Was this server request sent by this process (its id carries our tag)?"""
    return not isinstance(request_id, str) or request_id.startswith(f"{process_tag()}.")


class SessionManager:
    """The sessions this process serves. Alone (memory state) it is the whole truth, capped at
    ``max_sessions`` with the longest-idle evicted; with shared state it is a cache of Redis
    records: a session another process opened is loaded on first use, and expiry is Redis's."""

    def __init__(self, ttl_s: float, max_sessions: int, store_size: int, backlog_bytes: int = 8 * 1024 * 1024,
                 store_bytes: int = 1024 * 1024, shared: "SharedSessions | None" = None,
                 store_total_bytes: int = 256 * 1024 * 1024) -> None:
        self.ttl = ttl_s
        self.max = max_sessions
        self.store_size = store_size
        self.store_bytes = store_bytes
        self.budget = ReplayBudget(store_total_bytes)  # all the sessions' replay stores together
        self.backlog_bytes = backlog_bytes
        self.shared = shared
        self.sessions: dict[str, Session] = {}
        self.new_connection: Any = None  # shared: makes the connection for a session loaded from Redis
        if shared is not None:
            shared.bind(self)

    def _session(self, conn: ServerConnection, sid: str | None = None) -> Session:
        return Session(conn, self.store_size, self.backlog_bytes, self.store_bytes, shared=self.shared, sid=sid,
                       budget=self.budget)

    async def get(self, session_id: str) -> Session | None:
        session = self.sessions.get(session_id)
        shared = self.shared
        if shared is None:
            if session is not None:
                session.touch()
            return session
        now = trio.current_time()
        if session is None:
            if len(session_id) > 64 or self.new_connection is None:
                return None
            record = await shared.load(session_id)
            if record is None:
                return None
            session = self.sessions.get(session_id)  # another request may have loaded it meanwhile
            if session is None:
                session = self._session(self.new_connection(), session_id)
                session.restore(record)
                self.sessions[session_id] = session
                session.touched = now
        elif now - session.touched > min(5.0, self.ttl / 10):  # tell Redis it is in use, now and then
            session.touched = now
            if not await shared.touch(session_id):
                self.drop(session_id)
                return None
        session.touch()
        return session

    def create(self, conn: ServerConnection) -> Session | None:
        """A new session, evicting the longest-idle one when full; None if all are busy."""
        if self.shared is None and len(self.sessions) >= self.max:
            idle = [s for s in self.sessions.values() if s.active == 0]
            if not idle:
                return None
            self.drop(min(idle, key=lambda s: s.last_seen).id)  # alone, ending is forgetting
        session = self._session(conn)
        self.sessions[session.id] = session
        return session

    async def save_new(self, session: Session) -> None:
        """Shared state: write a new session's record (before its initialize is answered)."""
        if self.shared is not None:
            await self.shared.create(session.id, session.record())

    async def save_changes(self, session: Session, before: "SessionRecord") -> None:
        """Shared state: write what a message changed (initialized, log level, subscriptions)."""
        if self.shared is not None:
            await self.shared.update(session.id, before, session.record())

    async def end(self, session_id: str) -> bool:
        existed = self.drop(session_id)
        if self.shared is not None:
            existed = await self.shared.end(session_id) or existed
        return existed

    def drop(self, session_id: Any) -> bool:
        """Forget a session here (ended, or evicted from the cache)."""
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        session.close()
        return True

    async def expire_forever(self) -> None:
        """End sessions idle for longer than the TTL (shared: only forget them here — Redis
        expires the records, and another process may be serving them — and keep the records
        of sessions in use here from expiring, forgetting any that Redis lost)."""
        while True:
            await trio.sleep(min(max(self.ttl / 4, 0.05), 30))
            cutoff = trio.current_time() - self.ttl
            for sid, session in list(self.sessions.items()):
                if session.active == 0 and session.last_seen < cutoff:
                    self.drop(sid)
            await self.keep_in_use()

    async def keep_in_use(self) -> None:
        """Shared: push back the expiry in Redis of the sessions in use here (streams open,
        requests running), and forget those it no longer has — expired, or lost when Redis
        restarted empty — which ends their streams: the clients reconnect, get 404, and
        initialize again. Idle sessions are checked when next used (:meth:`get`)."""
        sids = [sid for sid, session in self.sessions.items() if session.active]
        if self.shared is None or not sids:
            return
        try:
            lost = await self.shared.touch_many(sids)
        except ProtocolError:
            return  # Redis away or refusing: the next round tries again (the link logs it)
        if lost:
            log.warning("%d sessions served here are gone from shared state (Redis restarted empty, or was flushed); "
                        "their streams end and their clients start new sessions", len(lost))
        for sid in lost:
            self.drop(sid)
