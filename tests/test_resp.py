"""The scale-out link's lean Redis client (mcpkit/server/resp.py) against a real redis-server:
replies of every RESP kind, error replies in their place, transactions, a password and a
database from the URL, the bus, and a restarted Redis whose old connections are not reused.
Auto-pipelining (issue 27) is in tests/test_resp_pipelining.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from mcpkit.server import resp
from mcpkit.server.resp import RespError, RespPool, encode

from .scaleout_fixtures import RedisServer


@pytest.fixture
def redis(tmp_path: Path):  # type: ignore[no-untyped-def]
    server = RedisServer(tmp_path / "redis", persist=False)
    yield server
    server.stop()


def test_encode_sends_bulk_strings_of_any_argument() -> None:
    assert encode(("SET", "k", b"v\r\n"), ("EXPIRE", "k", 5)) == (
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$3\r\nv\r\n\r\n*3\r\n$6\r\nEXPIRE\r\n$1\r\nk\r\n$1\r\n5\r\n")
    with pytest.raises(TypeError):
        encode(("SET", "k", None))


def test_replies_errors_and_transactions(redis: RedisServer) -> None:
    async def main() -> None:
        pool = RespPool(redis.url)
        big = b"x" * 300_000  # arrives in several reads
        replies = await pool.execute(("SET", "s", big), ("GET", "s"), ("GET", "missing"), ("INCRBY", "n", 41),
                                     ("RPUSH", "l", "a", "b"), ("LRANGE", "l", 0, -1), ("HGET", "l", "f"), ("PING",))
        assert replies[:6] == [b"OK", big, None, 41, 2, [b"a", b"b"]]
        assert isinstance(replies[6], RespError) and "WRONGTYPE" in str(replies[6])
        assert replies[7] == b"PONG"  # the connection goes on after an error reply
        tx = await pool.execute(("MULTI",), ("INCR", "n"), ("ZADD", "z", 1.5, "m"), ("EXEC",))
        assert tx == [b"OK", b"QUEUED", b"QUEUED", [42, 1]]
        assert pool.connections == 1  # one connection served all of it
        pool.close()

    trio.run(main)


def test_password_and_database_from_the_url(redis: RedisServer) -> None:
    redis.command("CONFIG", "SET", "requirepass", "s3cret")

    async def main() -> None:
        pool = RespPool(f"redis://:s3cret@127.0.0.1:{redis.port}/3")
        assert await pool.execute(("SET", "in3", "yes")) == [b"OK"]
        wrong = RespPool(f"redis://:nope@127.0.0.1:{redis.port}/0")
        with pytest.raises(RespError):
            await wrong.execute(("PING",))
        pool.close()

    trio.run(main)
    assert redis.command("-a", "s3cret", "--no-auth-warning", "-n", "3", "GET", "in3") == "yes"
    assert redis.command("-a", "s3cret", "--no-auth-warning", "-n", "0", "GET", "in3") == ""


def test_the_bus_and_a_restarted_redis(redis: RedisServer) -> None:
    async def main() -> None:
        pool = RespPool(redis.url)
        sub = await pool.subscribe("chan")
        got: list[bytes] = []

        async def read() -> None:
            async for reply in sub.replies():
                got.append(reply[2])
                if len(got) == 2:
                    return

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            assert await pool.execute(("PUBLISH", "chan", "one"), ("PUBLISH", "chan", "two")) == [1, 1]
        assert got == [b"one", b"two"]
        sub.close()
        redis.stop()
        with pytest.raises(OSError):
            await pool.execute(("PING",))  # the idle connection is closed, and no new one can be made
        redis.start()
        assert await pool.execute(("PING",)) == [b"PONG"]  # not through a dead connection
        pool.close()

    trio.run(main)
