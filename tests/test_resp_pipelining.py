"""Auto-pipelining in the lean Redis client (issue 27), against a real redis-server: commands
that concurrent callers issue in one scheduler pass go out in one write on one connection and
each caller gets its own replies, in order; an error reply touches only its own command; a
caller that gives up leaves the others their replies; a connection lost mid-pipeline fails
exactly the commands pending on it; the batches in flight are bounded. And the bus: a process
reads the other processes' messages, each once, and never its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest
import trio

from mcpkit.server import resp
from mcpkit.server.redis_link import RedisLink, StateUnavailable, others_patterns
from mcpkit.server.resp import RespError, RespPool

from .scaleout_fixtures import RedisServer


@pytest.fixture
def redis(tmp_path: Path):  # type: ignore[no-untyped-def]
    server = RedisServer(tmp_path / "redis", persist=False)
    yield server
    server.stop()


def _stat(info: bytes, name: str) -> int:
    for line in info.decode().splitlines():
        if line.startswith(name + ":"):
            return int(line.split(":", 1)[1])
    raise AssertionError(f"{name} not in INFO")


def test_concurrent_commands_share_one_write_and_get_their_own_replies(redis: RedisServer) -> None:
    async def main() -> None:
        pool = RespPool(redis.url)
        (before,) = await pool.execute(("INFO", "stats"))
        got: dict[int, list[Any]] = {}

        async def one(n: int) -> None:
            got[n] = await pool.execute(("INCRBY", f"k{n}", n), ("GET", f"k{n}"), ("ECHO", f"caller {n}"))

        async with trio.open_nursery() as nursery:  # all 200 run in the same scheduler pass
            for n in range(200):
                nursery.start_soon(one, n)
        (after,) = await pool.execute(("INFO", "stats"))
        assert got == {n: [n, str(n).encode(), f"caller {n}".encode()] for n in range(200)}
        assert pool.connections == 1
        # Redis read the 600 commands in a few reads (its buffer takes 16 KiB at a time), not in 200:
        # they were written together (the second INFO is one read more)
        reads = _stat(after, "total_reads_processed") - _stat(before, "total_reads_processed")
        assert 2 <= reads <= 6, reads
        assert _stat(after, "total_commands_processed") - _stat(before, "total_commands_processed") == 601
        pool.close()

    trio.run(main)


def test_a_lone_command_is_written_without_waiting_for_company(redis: RedisServer) -> None:
    async def main() -> None:
        pool = RespPool(redis.url)
        await pool.execute(("PING",))
        started = trio.current_time()
        for n in range(200):  # one after the other: each is written when its scheduler pass ends
            assert await pool.execute(("ECHO", str(n))) == [str(n).encode()]
        assert (trio.current_time() - started) / 200 < 0.005  # no timer in the way
        pool.close()

    trio.run(main)


def test_an_error_reply_in_a_pipeline_answers_only_its_own_command(redis: RedisServer) -> None:
    redis.command("SET", "text", "not a hash")

    async def main() -> None:
        pool = RespPool(redis.url)
        got: dict[str, list[Any]] = {}

        async def run(name: str, *commands: tuple[Any, ...]) -> None:
            got[name] = await pool.execute(*commands)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run, "before", ("SET", "a", "1"), ("GET", "a"))
            nursery.start_soon(run, "wrong", ("ECHO", "x"), ("HGET", "text", "f"), ("ECHO", "y"))
            nursery.start_soon(run, "after", ("INCR", "n"), ("GET", "text"))
        assert got["before"] == [b"OK", b"1"] and got["after"] == [1, b"not a hash"]
        x, error, y = got["wrong"]
        assert x == b"x" and y == b"y" and isinstance(error, RespError) and "WRONGTYPE" in str(error)
        assert pool.connections == 1  # the connection goes on
        pool.close()

    trio.run(main)


def test_through_the_link_an_error_reply_is_a_503_for_that_request_only(redis: RedisServer) -> None:
    """Issue 22's rule with pipelining: Redis refusing one request's command (here a wrong type;
    OOM, READONLY in tests/test_redis_faults.py) fails that request alone, never the others in the
    same write, and never the process."""
    redis.command("SET", "text", "not a hash")
    redis.command("SET", "a", "1")

    async def main() -> None:
        link = RedisLink(redis.url, prefix="t")
        outcome: dict[str, Any] = {}

        async def run(name: str, *commands: tuple[Any, ...]) -> None:
            try:
                outcome[name] = await link.run(*commands)
            except StateUnavailable as exc:
                outcome[name] = exc

        async with link.running():
            async with trio.open_nursery() as nursery:
                nursery.start_soon(run, "ok1", ("SET", "b", "2"))
                nursery.start_soon(run, "refused", ("HGET", "text", "f"))
                nursery.start_soon(run, "ok2", ("GET", "a"))
            assert outcome["ok1"] == [b"OK"] and outcome["ok2"] == [b"1"]
            assert isinstance(outcome["refused"], StateUnavailable) and "refusing" in outcome["refused"].message
            assert await link.run(("PING",)) == [b"PONG"]

    trio.run(main)


def test_a_caller_that_gives_up_leaves_the_others_their_replies(redis: RedisServer) -> None:
    async def main() -> None:
        pool = RespPool(redis.url)
        got: dict[str, Any] = {}

        async def impatient() -> None:
            with trio.move_on_after(0.05):  # Redis answers BLPOP after 0.3 s: this caller is gone by then
                got["impatient"] = await pool.execute(("BLPOP", "nothing", "0.3"))

        async def patient() -> None:
            got["patient"] = await pool.execute(("SET", "p", "yes"), ("GET", "p"))  # behind the BLPOP

        async with trio.open_nursery() as nursery:
            nursery.start_soon(impatient)
            await trio.sleep(0.01)  # written after the BLPOP
            nursery.start_soon(patient)
        assert "impatient" not in got and got["patient"] == [b"OK", b"yes"]
        assert await pool.execute(("ECHO", "next")) == [b"next"]  # the BLPOP's late reply was thrown away
        assert pool.connections == 1  # Redis was slow, not stuck: the connection stays
        pool.close()

    trio.run(main)


def test_a_stuck_connection_is_closed_by_a_caller_that_gives_up(redis: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resp, "STALL_S", 0.1)

    async def main() -> None:
        pool = RespPool(redis.url)
        got: dict[str, Any] = {}

        async def impatient() -> None:
            with trio.move_on_after(0.2):
                await pool.execute(("BLPOP", "nothing", "2"))  # nothing comes back for 0.2 s

        async def behind() -> None:
            try:
                got["behind"] = await pool.execute(("SET", "b", "1"))
            except OSError as exc:
                got["behind"] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(impatient)
            await trio.sleep(0.01)
            nursery.start_soon(behind)
        assert isinstance(got["behind"], OSError)  # pending on the closed connection
        assert await pool.execute(("GET", "b")) == [None]  # never ran; a new connection
        assert pool.connections == 2
        pool.close()

    trio.run(main)


async def killed_mid_pipeline(pool: RespPool, kill: Callable[[int], Awaitable[Any]]) -> None:
    """Three commands pending on ``pool``'s connection when ``kill(client id)`` drops it: each
    fails with an OSError, the one answered before does not, and the next command connects
    again (the killed one's queued commands never ran). Shared with the TLS tests."""
    (client_id,) = await pool.execute(("CLIENT", "ID"))
    outcome: dict[str, Any] = {}

    async def run(name: str, *commands: tuple[Any, ...]) -> None:
        try:
            outcome[name] = await pool.execute(*commands)
        except OSError as exc:
            outcome[name] = exc

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "done", ("SET", "done", "1"))
        await trio.sleep(0.05)  # answered before the drop
        nursery.start_soon(run, "blocked", ("BLPOP", "nothing", "5"))
        await trio.sleep(0.02)  # the others are written after it (one pass runs tasks in any order)
        nursery.start_soon(run, "behind1", ("SET", "behind1", "1"))
        nursery.start_soon(run, "behind2", ("INCR", "behind2"), ("PING",))
        await trio.sleep(0.1)
        assert pool._conn is not None and len(pool._conn.pending) == 3
        await kill(client_id)
    assert outcome["done"] == [b"OK"]
    for name in ("blocked", "behind1", "behind2"):
        assert isinstance(outcome[name], OSError), outcome
    assert await pool.execute(("GET", "done"), ("EXISTS", "behind1", "behind2")) == [b"1", 0]
    assert pool.connections == 2


def test_a_connection_dropped_mid_pipeline_fails_exactly_the_pending_commands(redis: RedisServer) -> None:
    async def main() -> None:
        pool = RespPool(redis.url)
        await killed_mid_pipeline(pool, lambda cid: trio.to_thread.run_sync(redis.command, "CLIENT", "KILL", "ID", str(cid)))
        pool.close()

    trio.run(main)


def test_batches_in_flight_are_bounded(redis: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resp, "MAX_PENDING", 2)
    peak: list[int] = []

    async def main() -> None:
        pool = RespPool(redis.url)
        await pool.execute(("PING",))

        async def one(n: int) -> None:
            assert pool._conn is not None
            peak.append(len(pool._conn.pending))
            assert await pool.execute(("BLPOP", f"none{n}", "0.02")) == [None]
            peak.append(len(pool._conn.pending))

        async with trio.open_nursery() as nursery:
            for n in range(6):
                nursery.start_soon(one, n)
        assert max(peak) <= 2 and pool.connections == 1
        pool.close()

    trio.run(main)


@pytest.mark.parametrize("prefix", ["mcpkit", "we*ird[?]\\"])
def test_the_bus_brings_each_other_process_s_messages_once_and_never_its_own(redis: RedisServer, prefix: str) -> None:
    base = f"{prefix}:bus:"
    me = "a1b2c3d4"
    others = ["a1b2c3d5", "b1b2c3d4", "a1b2c3d0", "ffffffff", "a1000000"]

    async def main() -> None:
        pool = RespPool(redis.url)
        sub = await pool.psubscribe(*others_patterns(base, me))
        got: list[bytes] = []

        async def read() -> None:
            async for reply in sub.replies():
                assert reply[0] == b"pmessage"
                got.append(reply[3])
                if reply[3] == b"last":
                    return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            publishes = [("PUBLISH", base + me, "mine")] + [("PUBLISH", base + tag, tag) for tag in others]
            publishes += [("PUBLISH", prefix + ":bus", "old channel"), ("PUBLISH", base + others[0], "last")]
            counts = await pool.execute(*publishes)
        assert counts == [0, 1, 1, 1, 1, 1, 0, 1]  # each delivered to one pattern: once
        assert got == [tag.encode() for tag in others] + [b"last"]
        sub.close()
        pool.close()

    trio.run(main)
