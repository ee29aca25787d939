"""Where handshake-era HTTP sessions keep what outlives one request: one small interface, two
implementations (like httpx's transports: the session code never asks which it has).

A :class:`SessionBackend` holds three things:

- **records** — each session's lifecycle state (version, client info, level, subscriptions,
  initialized, owner), with idle expiry;
- **the replay log** — every SSE event a session's streams sent that a client may resume from
  (``Last-Event-ID``), bounded in count and bytes;
- **the bus** — what other processes serving the same sessions tell this one: an event they
  appended to a stream read here, a session they changed or ended, a client's answer to a
  request they sent, a cancellation for a request they run (:meth:`SessionBackend.remote`).

:class:`MemoryBackend` is one process alone: the records are the sessions themselves, the log a
bounded in-memory store, and nothing ever arrives from elsewhere. The Redis backend
(``shared_sessions.py``) lets any process behind a load balancer serve any session.
"""

from __future__ import annotations

import collections
import itertools
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Iterator, Protocol, Union

import msgspec
import trio

#: one event of a stream: (position, JSON-RPC message, final)
Event = tuple[str, bytes, bool]


class SessionRecord(msgspec.Struct, omit_defaults=True):
    version: str
    client_info: dict[str, Any] = {}
    client_capabilities: dict[str, Any] = {}
    log_level: str | None = None
    subscriptions: list[str] = []
    initialized: bool = False
    owner: list[str] | None = None  # (issuer, subject) when the server authenticates


# -- what the bus brings -------------------------------------------------------------------------
@dataclass(slots=True)
class Appended:
    """Another process appended ``event`` to stream ``key`` of session ``sid``."""

    sid: str
    key: str
    event: Event


@dataclass(slots=True)
class Changed:
    """Another process changed session ``sid``: its record is now ``record``."""

    sid: str
    changes: dict[str, Any]
    removed: list[str]


@dataclass(slots=True)
class Ended:
    sid: str


@dataclass(slots=True)
class Answered:
    """The client answered, through another process, a request this process may have sent."""

    sid: str
    request_id: Any
    result: Any = None
    error: Any = None


@dataclass(slots=True)
class Cancelled:
    """The client cancelled, through another process, a request this process may run."""

    sid: str
    request_id: Any


@dataclass(slots=True)
class Reconnected:
    """The bus was away and is back: what it carried meanwhile is lost, read it again."""


Remote = Union[Appended, Changed, Ended, Answered, Cancelled, Reconnected]


class SessionBackend(Protocol):
    """The interface both backends offer."""

    #: prefix of the ids of server-to-client requests ("" alone; this process's tag when an
    #: answer may reach another process, so that one knows it is not its own)
    ask_prefix: str

    # records
    async def create(self, sid: str, record: SessionRecord) -> None: ...
    async def load(self, sid: str) -> SessionRecord | None: ...
    async def update(self, sid: str, before: SessionRecord, after: SessionRecord) -> None: ...
    async def touch(self, sid: str) -> bool: ...
    async def touch_many(self, sids: list[str]) -> list[str]: ...
    async def end(self, sid: str) -> bool: ...
    async def records(self) -> dict[str, SessionRecord]: ...

    # the replay log
    async def append(self, sid: str, key: str, data: bytes, final: bool) -> str: ...
    async def append_many(self, items: list[tuple[str, str, bytes, bool]]) -> list[str]: ...
    async def read(self, sid: str, key: str, after: str) -> list[Event]: ...
    async def last(self, sid: str, key: str) -> str: ...
    def order(self, pos: str) -> tuple[int, int]: ...
    def forget(self, sid: str) -> None: ...
    def written_elsewhere(self, sid: str, key: str) -> bool: ...

    # the bus
    async def cancel_elsewhere(self, sid: str, request_id: Any) -> None: ...
    async def answer_elsewhere(self, sid: str, request_id: Any, result: Any, error: Any) -> None: ...
    def remote(self) -> AsyncIterator[Remote]: ...


# -- one process alone ---------------------------------------------------------------------------
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
    """One session's recent events for ``Last-Event-ID`` replay, bounded by count and by bytes:
    an event bigger than the byte bound is not kept at all (it could only be kept by going over
    it), and with a :class:`ReplayBudget` all stores together stay under its bound."""

    def __init__(self, max_events: int, max_bytes: int, budget: ReplayBudget | None = None) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self.budget = budget
        self._events: collections.deque[tuple[str, int, bytes, bool, int]] = collections.deque()  # key, seq, data, final, stamp
        self._bytes = 0

    def append(self, key: str, seq: int, data: bytes, final: bool = False) -> None:
        size = len(data)
        budget = self.budget
        if size > self.max_bytes or self.max_events < 1 or (budget is not None and size > budget.max_bytes):
            return  # it cannot be kept within the bounds: the live reader gets it, a resume cannot
        events = self._events
        while events and (len(events) >= self.max_events or self._bytes + size > self.max_bytes):
            self._drop_oldest()
        stamp = budget.charge(self, size) if budget is not None else 0
        events.append((key, seq, data, final, stamp))
        self._bytes += size

    def _drop_oldest(self) -> None:
        size = len(self._events.popleft()[2])
        self._bytes -= size
        if self.budget is not None:
            self.budget.release(size)

    def drop_if_oldest(self, stamp: int) -> None:
        if self._events and self._events[0][4] == stamp:
            self._drop_oldest()

    def holds(self, stamp: int) -> bool:
        return bool(self._events) and self._events[0][4] <= stamp

    def clear(self) -> None:
        while self._events:
            self._drop_oldest()

    def __iter__(self) -> Iterator[tuple[str, int, bytes, bool]]:
        return ((key, seq, data, final) for key, seq, data, final, _ in self._events)

    def __len__(self) -> int:
        return len(self._events)


@dataclass
class _Log:
    store: ReplayStore
    positions: dict[str, int] = field(default_factory=dict)  # stream key -> last position given


class MemoryBackend:
    """One process alone: sessions live only here, so records need no keeping elsewhere, the
    replay log is a bounded store per session, and no other process ever says anything."""

    ask_prefix = ""

    def __init__(self, store_size: int, store_bytes: int, total_bytes: int) -> None:
        self.store_size = store_size
        self.store_bytes = store_bytes
        self.budget = ReplayBudget(total_bytes)
        self._logs: dict[str, _Log] = {}

    # records: the session objects are the truth
    async def create(self, sid: str, record: SessionRecord) -> None:
        return None

    async def load(self, sid: str) -> SessionRecord | None:
        return None  # a session not in this process does not exist

    async def update(self, sid: str, before: SessionRecord, after: SessionRecord) -> None:
        return None

    async def touch(self, sid: str) -> bool:
        return True

    async def touch_many(self, sids: list[str]) -> list[str]:
        return []

    async def end(self, sid: str) -> bool:
        self.forget(sid)
        return False  # only the session object knew it

    async def records(self) -> dict[str, SessionRecord]:
        return {}  # the manager's own sessions are all there are

    # the replay log
    def _log(self, sid: str) -> _Log:
        log = self._logs.get(sid)
        if log is None:
            log = self._logs[sid] = _Log(ReplayStore(self.store_size, self.store_bytes, self.budget))
        return log

    async def append(self, sid: str, key: str, data: bytes, final: bool) -> str:
        log = self._log(sid)
        seq = log.positions[key] = log.positions.get(key, 0) + 1
        log.store.append(key, seq, data, final)
        return str(seq)

    async def append_many(self, items: list[tuple[str, str, bytes, bool]]) -> list[str]:
        return [await self.append(*item) for item in items]

    async def read(self, sid: str, key: str, after: str) -> list[Event]:
        log = self._logs.get(sid)
        if log is None:
            return []
        after_seq = int(after) if after.isdigit() else 0
        return [(str(seq), data, final) for k, seq, data, final in log.store if k == key and seq > after_seq]

    async def last(self, sid: str, key: str) -> str:
        log = self._logs.get(sid)
        return str(log.positions.get(key, 0)) if log is not None else "0"

    def order(self, pos: str) -> tuple[int, int]:
        return (int(pos), 0) if pos.isdigit() and len(pos) < 20 else (-1, -1)

    def forget(self, sid: str) -> None:
        log = self._logs.pop(sid, None)
        if log is not None:
            log.store.clear()  # its replay messages are freed now, not when the last reference goes

    def written_elsewhere(self, sid: str, key: str) -> bool:
        return False  # a stream not running here has finished

    # the bus: nobody else
    async def cancel_elsewhere(self, sid: str, request_id: Any) -> None:
        return None

    async def answer_elsewhere(self, sid: str, request_id: Any, result: Any, error: Any) -> None:
        return None

    async def remote(self) -> AsyncIterator[Remote]:
        await trio.sleep_forever()
        yield Reconnected()  # pragma: no cover - never reached; makes this an async generator


__all__ = [
    "Answered", "Appended", "Cancelled", "Changed", "Ended", "Event", "MemoryBackend", "Reconnected", "Remote",
    "ReplayBudget", "ReplayStore", "SessionBackend", "SessionRecord",
]
