"""SSE stream replay (mcpkit/transports/http/sessions.py ``Stream``) driven directly, on the
in-memory backend and on the Redis one against a real redis-server: provisional ids, keeping a
stream once it streams, resuming after a position, readers replacing readers, a reader that
stops reading, events appended by someone else, finished streams; and the bounds of the
in-memory replay log (``ReplayStore``, ``ReplayBudget``).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, AsyncIterator, Iterator

import pytest
import trio

from mcpkit.server.dispatch import Dispatcher
from mcpkit.server.redis_link import RedisLink
from mcpkit.testing import build_app
from mcpkit.transports.http.session_state import MemoryBackend, ReplayBudget, ReplayStore, SessionBackend
from mcpkit.transports.http.sessions import CLOSE, Session, SessionManager, Stream
from mcpkit.transports.http.shared_sessions import RedisBackend

from .scaleout_fixtures import RedisServer

BIG = 1 << 20


class LazyRedis:
    """One redis-server for this module, started when a test first needs it."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.server: RedisServer | None = None
        self.prefixes = 0

    def url(self) -> str:
        if self.server is None:
            self.server = RedisServer(self.folder, persist=False)
        return self.server.url

    def prefix(self) -> str:
        self.prefixes += 1
        return f"replay{self.prefixes}"


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LazyRedis]:
    lazy = LazyRedis(tmp_path_factory.mktemp("redis"))
    yield lazy
    if lazy.server is not None:
        lazy.server.stop()


class Backends:
    """This process's backend, and another writer of the same log (another process with Redis;
    the change forwarder, which appends to the log directly, alone)."""

    def __init__(self, kind: str, main: SessionBackend, other: SessionBackend) -> None:
        self.kind = kind
        self.main = main
        self.other = other


@pytest.fixture(params=["memory", "redis"])
async def backends(request: pytest.FixtureRequest, redis: LazyRedis) -> AsyncIterator[Backends]:
    if request.param == "memory":
        alone = MemoryBackend(1000, BIG, 16 * BIG)
        yield Backends("memory", alone, alone)
        return
    url, prefix = redis.url(), redis.prefix()
    links = [RedisLink(url, prefix), RedisLink(url, prefix)]
    async with links[0].client, links[1].client:
        yield Backends("redis", RedisBackend(links[0], 60, 1000, BIG), RedisBackend(links[1], 60, 1000, BIG))


@contextlib.asynccontextmanager
async def a_session(backend: SessionBackend, backlog_bytes: int = BIG) -> AsyncIterator[Session]:
    app, _, _ = build_app({})
    async with trio.open_nursery() as nursery:
        manager = SessionManager(backend, app.new_connection, Dispatcher(app), nursery, ttl_s=60, max_sessions=4,
                                 max_running=4, backlog_bytes=backlog_bytes)
        session = manager.create()
        assert session is not None
        yield session
        manager.drop(session.id)


async def queued(box: Any) -> list[tuple[str | None, bytes]]:
    """What waits in a reader's box now (the box may stay open)."""
    out = []
    while len(box):
        out.append(await box.get())
    return out


async def taken(box: Any) -> list[tuple[str | None, bytes]]:
    """Everything the box holds, and proof that it is closed (EndOfChannel after them)."""
    out = []
    with trio.fail_after(2):
        while True:
            try:
                out.append(await box.get())
            except trio.EndOfChannel:
                return out


def positions(stream: Stream, frames: list[tuple[str | None, bytes]]) -> list[str]:
    return [stream.public_id(eid).split(".", 1)[1] for eid, _ in frames if eid is not None]  # type: ignore[union-attr]


async def kept(backend: SessionBackend, stream: Stream, after: str = "0") -> list[bytes]:
    return [data for _, data, _ in await backend.read(stream.sid, stream.key, after)]


# -- a request's stream: kept only once it streams ------------------------------------------------------

async def test_a_requests_single_answer_keeps_a_provisional_id_and_nothing_in_the_log(backends: Backends) -> None:
    async with a_session(backends.main) as session:
        stream = session.new_stream()
        box = await stream.attach(replay=False)
        await stream.emit(b'{"answer": 1}', final=True)
        ((event_id, data),) = await taken(box)
        assert event_id == f"{stream.key}.~1" and data == b'{"answer": 1}'
        assert await kept(backends.main, stream) == []  # no client can resume it: nothing kept
        assert stream.public_id(event_id) == event_id and stream.done


async def test_a_second_message_keeps_the_stream_and_the_first_gets_its_real_position(backends: Backends) -> None:
    async with a_session(backends.main) as session:
        stream = session.new_stream()
        box = await stream.attach(replay=False)
        await stream.emit(b'"progress"')
        await stream.emit(b'"answer"', final=True)
        (first, _), (second, _) = await taken(box)
        assert first == f"{stream.key}.~1"  # sent before anyone knew the stream would be kept
        logged = await backends.main.read(stream.sid, stream.key, "0")
        assert [data for _, data, _ in logged] == [b'"progress"', b'"answer"']
        assert stream.public_id(first) == f"{stream.key}.{logged[0][0]}"  # what a client may keep
        assert second == f"{stream.key}.{logged[1][0]}" and logged[1][2] is True


async def test_persist_keeps_what_waits_before_a_second_message(backends: Backends) -> None:
    async with a_session(backends.main) as session:
        stream = session.new_stream()
        await stream.emit(b'"first"')
        assert await kept(backends.main, stream) == []
        await stream.persist()
        assert await kept(backends.main, stream) == [b'"first"'] and stream.persisted


# -- resuming --------------------------------------------------------------------------------------------

async def test_attach_replays_after_the_clients_position_then_goes_live(backends: Backends) -> None:
    async with a_session(backends.main) as session:
        stream = session.standalone
        for i in range(3):
            await stream.emit(b"%d" % i)
        first = (await backends.main.read(stream.sid, stream.key, "0"))[0][0]
        box = await stream.attach(first)
        assert [d for _, d in await queued(box)] == [b"1", b"2"]
        await stream.emit(b"3")
        assert [d for _, d in await queued(box)] == [b"3"]
        again = await stream.attach("not-a-position")  # garbage: everything kept
        assert [d for _, d in await queued(again)] == [b"0", b"1", b"2", b"3"]


async def test_a_newer_reader_replaces_the_older_one(backends: Backends) -> None:
    async with a_session(backends.main) as session:
        stream = session.standalone
        await stream.emit(b"a")
        old = await stream.attach()
        new = await stream.attach()
        await stream.emit(b"b")
        assert [d for _, d in await taken(old)] == [b"a"]  # closed, nothing live after it
        assert [d for _, d in await queued(new)] == [b"a", b"b"] and not new.closed
        stream.detach(old)  # the old reader's response ends: the new one stays
        assert stream.reader is new
        stream.close_reader()  # SSE polling: the response ends, the rest waits in the log
        assert (await taken(new))[-1] == (CLOSE, b"") and stream.reader is None
        await stream.emit(b"c")
        assert await kept(backends.main, stream) == [b"a", b"b", b"c"]


async def test_a_reader_that_stops_reading_loses_its_stream_not_the_log(backends: Backends) -> None:
    async with a_session(backends.main, backlog_bytes=10) as session:
        stream = session.standalone
        box = await stream.attach()
        for i in range(5):
            await stream.emit(b"message %d" % i)  # 9 bytes each: the second is over the bound
        assert box.overflowed and box.closed and stream.reader is None
        got = await taken(box)
        assert [d for _, d in got] == [b"message 0"]
        resumed = await stream.attach(stream.public_id(got[-1][0]).split(".", 1)[1])  # type: ignore[union-attr]
        assert [d for _, d in await queued(resumed)] == [b"message %d" % i for i in range(1, 5)]


# -- events appended by someone else ---------------------------------------------------------------------

async def test_events_appended_elsewhere_are_delivered_once_and_in_order(backends: Backends) -> None:
    async with a_session(backends.main) as session:
        stream = session.standalone
        box = await stream.attach()
        await stream.emit(b"mine")
        theirs = [await backends.other.append(stream.sid, stream.key, b"theirs %d" % i, False) for i in range(3)]
        stream.deliver_appended(theirs[1], b"theirs 1", False)  # the bus brought the second first
        stream.deliver_appended(theirs[0], b"theirs 0", False)  # older than what was delivered: dropped
        stream.deliver_appended(theirs[1], b"theirs 1", False)  # twice: once
        stream.deliver_appended(theirs[2], b"theirs 2", False)
        assert [d for _, d in await queued(box)] == [b"mine", b"theirs 1", b"theirs 2"]
        assert stream.last_pos == theirs[2]
        end = await backends.other.append(stream.sid, stream.key, b"the end", True)
        stream.deliver_appended(end, b"the end", True)
        assert [d for _, d in await taken(box)] == [b"the end"] and stream.done


@pytest.mark.parametrize("backends", ["redis"], indirect=True)  # the memory log is read without yielding
async def test_events_arriving_while_the_log_is_read_come_after_the_replay_once(backends: Backends) -> None:
    async with a_session(backends.main) as session:
        stream = session.standalone
        for i in range(3):
            await stream.emit(b"%d" % i)
        early = await backends.other.append(stream.sid, stream.key, b"3", False)
        # one the read cannot see (as if appended just after it ran): a position after everything
        # in this stream (a later millisecond), which Redis gave to another stream
        await trio.sleep(0.005)
        late = await backends.other.append(stream.sid, "elsewhere", b"4", False)
        assert backends.main.order(late) > backends.main.order(early)
        boxes: list[Any] = []

        async def reconnect() -> None:
            boxes.append(await stream.attach())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(reconnect)
            while stream._held is None:  # the reader is reading the log (from Redis)
                await trio.sleep(0)
            stream.deliver_appended(early, b"3", False)  # in the log already: the replay has it
            stream.deliver_appended(late, b"4", False)
            assert not boxes, "the log was read before anything arrived: nothing was tested"
        assert [d for _, d in await queued(boxes[0])] == [b"0", b"1", b"2", b"3", b"4"]
        assert stream.last_pos == late


class SlowAnswers(MemoryBackend):
    """The in-memory log with a network's delay between storing an event and saying so (what
    Redis does): an append is in the log before its caller hears back."""

    async def append(self, sid: str, key: str, data: bytes, final: bool) -> str:
        pos = await super().append(sid, key, data, final)
        await trio.sleep(0.05)
        return pos


async def test_an_event_stored_while_a_reader_attaches_reaches_it_once() -> None:
    """A client resumes on the process whose request is emitting: the replay reads an event
    whose append has not returned yet; when it returns, the reader must not get it again."""
    backend = SlowAnswers(1000, BIG, 16 * BIG)
    async with a_session(backend) as session:
        stream = session.new_stream()
        await stream.emit(b"1")
        await stream.emit(b"2")  # streams: kept from here
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream.emit, b"3")
            await trio.sleep(0.01)  # "3" is in the log, its append has not returned
            box = await stream.attach("0")
            await trio.sleep(0.1)  # the append returns and delivers
        assert [d for _, d in await queued(box)] == [b"1", b"2", b"3"]
        await stream.emit(b"4")
        assert [d for _, d in await queued(box)] == [b"4"]


# -- finished streams ---------------------------------------------------------------------------------------

async def test_a_finished_stream_closes_its_reader_and_replays_to_the_end(backends: Backends) -> None:
    async with a_session(backends.main) as session:
        stream = session.new_stream()
        await stream.persist()
        live = await stream.attach(replay=False)
        await stream.emit(b'"note"')
        await stream.emit(b'"answer"', final=True)
        assert [d for _, d in await taken(live)] == [b'"note"', b'"answer"'] and stream.reader is None
        await stream.emit(b'"late"')  # nothing may follow a final message to a reader
        resumed = await stream.attach()
        assert [d for _, d in await taken(resumed)][:2] == [b'"note"', b'"answer"'] and stream.reader is None


# -- the in-memory replay log's bounds ----------------------------------------------------------------------

def test_a_replay_store_keeps_the_newest_within_its_count_and_bytes() -> None:
    by_count = ReplayStore(max_events=3, max_bytes=100)
    for seq in range(1, 6):
        by_count.append("k", seq, b"x")
    assert [seq for _, seq, _, _ in by_count] == [3, 4, 5]
    by_bytes = ReplayStore(max_events=100, max_bytes=10)
    for seq, data in enumerate([b"aaaa", b"bbbb", b"cccc"], 1):
        by_bytes.append("k", seq, data)
    assert [d for _, _, d, _ in by_bytes] == [b"bbbb", b"cccc"]
    by_bytes.append("k", 4, b"z" * 11)  # bigger than the bound alone: not kept, nothing dropped for it
    assert [d for _, _, d, _ in by_bytes] == [b"bbbb", b"cccc"]
    nothing = ReplayStore(max_events=0, max_bytes=100)
    nothing.append("k", 1, b"x")
    assert len(nothing) == 0


def test_the_budget_bounds_all_stores_together_and_frees_what_a_store_drops() -> None:
    budget = ReplayBudget(12)
    a, b = ReplayStore(100, 100, budget), ReplayStore(100, 100, budget)
    a.append("k", 1, b"a" * 5)
    b.append("k", 1, b"b" * 5)
    a.append("k", 2, b"c" * 5)  # 15 > 12: the oldest of all (a's first) goes
    assert [d for _, _, d, _ in a] == [b"c" * 5] and len(b) == 1 and budget.used == 10
    b.append("k", 2, b"d" * 13)  # bigger than the whole budget: not kept
    assert len(b) == 1 and budget.used == 10
    a.clear()
    assert budget.used == 5


async def test_memory_backend_positions_and_forgetting() -> None:
    backend = MemoryBackend(store_size=2, store_bytes=100, total_bytes=1000)
    assert [await backend.append("s", "1", b"x", False) for _ in range(3)] == ["1", "2", "3"]
    assert [pos for pos, _, _ in await backend.read("s", "1", "0")] == ["2", "3"]  # the first fell out
    assert [pos for pos, _, _ in await backend.read("s", "1", "2")] == ["3"]
    assert await backend.append("s", "2", b"y", False) == "1"  # each stream numbers its own events
    assert [pos for pos, _, _ in await backend.read("s", "1", "0")] == ["3"]  # the bound is the session's
    assert await backend.last("s", "1") == "3"
    assert backend.order("12") > backend.order("9") and backend.order("~1") == (-1, -1)
    backend.forget("s")
    assert await backend.read("s", "1", "0") == [] and backend.budget.used == 0


@pytest.mark.parametrize("size, kept_count", [(300_000, 3), (400_000, 2), (2 * BIG, 0)])
async def test_the_redis_log_keeps_the_newest_within_event_store_bytes(redis: LazyRedis, size: int, kept_count: int) -> None:
    link = RedisLink(redis.url(), redis.prefix())
    async with link.client:
        backend = RedisBackend(link, 60, 1000, BIG)
        ids = [await backend.append("s", "1", b"x" * size, False) for _ in range(3)]
        logged = await backend.read("s", "1", "0")
        assert [pos for pos, _, _ in logged] == ids[3 - kept_count:]
        assert backend.order(ids[0]) < backend.order(ids[1]) < backend.order(ids[2])
