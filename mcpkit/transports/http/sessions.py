"""Handshake-era HTTP sessions: their connection state, SSE streams and the replay store."""

from __future__ import annotations

import collections
import secrets
from typing import Any, Iterator

import trio

from ...protocol.connection import ResponseReceived, ServerConnection
from ...server.context import InFlight, PendingRequests
from .outbox import Outbox

Frame = tuple[str | None, bytes]  # (event id, JSON-RPC message)
CLOSE = "close"  # frame id telling the live reader to end its HTTP response (SSE polling)


class ReplayStore:
    """The session's recent SSE messages for ``Last-Event-ID`` replay, bounded by count and by
    bytes (the newest message is always kept): a session that answers big results cannot pin
    more than ``max_bytes`` of them."""

    def __init__(self, max_events: int, max_bytes: int) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._events: collections.deque[tuple[str, int, bytes]] = collections.deque()
        self._bytes = 0

    def append(self, key: str, seq: int, data: bytes) -> None:
        events = self._events
        events.append((key, seq, data))
        self._bytes += len(data)
        while len(events) > 1 and (len(events) > self.max_events or self._bytes > self.max_bytes):
            self._bytes -= len(events.popleft()[2])

    def __iter__(self) -> Iterator[tuple[str, int, bytes]]:
        return iter(self._events)

    def __len__(self) -> int:
        return len(self._events)


class Stream:
    """One SSE stream of a session: a POST's response stream or the standalone GET stream.

    Every message gets an event id and is kept in the session's bounded store, so a client that
    lost the connection can come back with ``Last-Event-ID`` and get what it missed; the live
    reader (if any) gets messages through a channel.
    """

    def __init__(self, session: "Session", key: str) -> None:
        self.session = session
        self.key = key
        self.seq = 0
        self.done = False
        self.reader: Outbox[Frame] | None = None  # the live reader's queue, if one is attached

    def emit(self, data: bytes, *, final: bool = False) -> None:
        self.seq += 1
        event_id = f"{self.key}-{self.seq}"
        self.session.store.append(self.key, self.seq, data)
        if final:
            self.done = True
        if self.reader is not None and not self.reader.put((event_id, data), len(data)):
            self.reader = None  # gone, or not reading: the rest waits in the store for a resume
        if final and self.reader is not None:
            self.reader.close()
            self.reader = None

    def attach(self, after_seq: int = 0) -> Outbox[Frame]:
        """A queue with the stored messages after ``after_seq``, then the live ones (bounded:
        see ``sse_backlog_bytes``). A newer reader replaces an older one."""
        box: Outbox[Frame] = Outbox(self.session.backlog_bytes)
        for key, seq, data in self.session.store:
            if key == self.key and seq > after_seq:
                box.put((f"{key}-{seq}", data), 0)  # replay: held by the store anyway
        if self.done:
            box.close()
        else:
            if self.reader is not None:
                self.reader.close()
            self.reader = box
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
                 store_bytes: int = 1024 * 1024) -> None:
        self.id = secrets.token_urlsafe(24)  # visible ASCII, unguessable
        self.conn = conn
        self.in_flight = InFlight()
        self.store = ReplayStore(store_size, store_bytes)
        self.backlog_bytes = backlog_bytes
        self.streams: dict[str, Stream] = {}
        self.pending = PendingRequests()
        self.last_seen = trio.current_time()
        self.active = 0  # requests and streams in progress
        self._counter = 0
        self.standalone = self.new_stream("0")

    def new_stream(self, key: str | None = None) -> Stream:
        if key is None:
            self._counter += 1
            key = str(self._counter)
        stream = self.streams[key] = Stream(self, key)
        return stream

    def touch(self) -> None:
        self.last_seen = trio.current_time()

    def deliver(self, response: ResponseReceived) -> None:
        self.pending.deliver(response)

    async def ask(self, stream: Stream, method: str, params: dict[str, Any]) -> Any:
        """Send a server-to-client request on ``stream`` and wait for the client's answer."""

        async def send(data: bytes) -> None:
            stream.emit(data)

        return await self.pending.ask(self.conn.next_request_id(), send, method, params)

    def close(self) -> None:
        for scope in list(self.in_flight.scopes.values()):
            scope.cancel()
        for stream in self.streams.values():
            stream.detach()


class SessionManager:
    def __init__(self, ttl_s: float, max_sessions: int, store_size: int, backlog_bytes: int = 8 * 1024 * 1024,
                 store_bytes: int = 1024 * 1024) -> None:
        self.ttl = ttl_s
        self.max = max_sessions
        self.store_size = store_size
        self.store_bytes = store_bytes
        self.backlog_bytes = backlog_bytes
        self.sessions: dict[str, Session] = {}

    def get(self, session_id: str) -> Session | None:
        session = self.sessions.get(session_id)
        if session is not None:
            session.touch()
        return session

    def create(self, conn: ServerConnection) -> Session | None:
        """A new session, evicting the longest-idle one when full; None if all are busy."""
        if len(self.sessions) >= self.max:
            idle = [s for s in self.sessions.values() if s.active == 0]
            if not idle:
                return None
            self.end(min(idle, key=lambda s: s.last_seen).id)
        session = Session(conn, self.store_size, self.backlog_bytes, self.store_bytes)
        self.sessions[session.id] = session
        return session

    def end(self, session_id: str) -> bool:
        session = self.sessions.pop(session_id, None)
        if session is None:
            return False
        session.close()
        return True

    async def expire_forever(self) -> None:
        """End sessions idle for longer than the TTL."""
        while True:
            await trio.sleep(min(max(self.ttl / 4, 0.05), 30))
            cutoff = trio.current_time() - self.ttl
            for sid, session in list(self.sessions.items()):
                if session.active == 0 and session.last_seen < cutoff:
                    self.end(sid)
