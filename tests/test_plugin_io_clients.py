"""The recipe for I/O tools (docs/writing-plugins.md): mcpkit.http_client and mcpkit.redis_client
opened by a plugin's lifespan, used by its tools, closed with the plugin — against a real HTTP
server on loopback and a real redis-server."""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio

import mcpkit
import mcpkit.testing

from .scaleout_fixtures import RedisServer
from .scripted_http import Seen, answer, read_request, scripted


class Counting(dict):  # type: ignore[type-arg]
    """os.environ that counts how often coredis's variables are read."""

    reads = 0

    def get(self, key: Any, default: Any = None) -> Any:
        if isinstance(key, str) and key.startswith("COREDIS_"):
            Counting.reads += 1
        return super().get(key, default)


@pytest.fixture
def redis(tmp_path: Path) -> Any:
    server = RedisServer(tmp_path / "redis")
    yield server
    server.stop()


class StockPlugin:
    """A plugin with one tool that asks an HTTP API and Redis at once, as the docs show."""

    def __init__(self, api_url: str, redis_url: str) -> None:
        self.api_url, self.redis_url = api_url, redis_url
        self.http: mcpkit.HttpClient | None = None
        self.redis: Any = None

    @mcpkit.hookimpl
    def mcpkit_tools(self, config: dict[str, Any]) -> list[Any]:
        @mcpkit.tool
        async def stock(sku: str) -> dict[str, Any]:
            """Price from the API, units from Redis."""
            assert self.http is not None
            async with self.redis.pipeline(transaction=False) as pipe:
                units = pipe.incrby(f"stock:{sku}", 0)
                pipe.incr("lookups")
            price = (await self.http.get("/price", params={"sku": sku})).raise_for_status().json()
            return {"sku": sku, "price": price["price"], "units": await units}

        return [stock]

    @mcpkit.hookimpl
    def mcpkit_lifespan(self, config: dict[str, Any]) -> Any:
        return self._open()

    @contextlib.asynccontextmanager
    async def _open(self) -> AsyncIterator[None]:
        async with mcpkit.http_client(self.api_url, timeout=5) as http, mcpkit.redis_client(self.redis_url) as redis:
            self.http, self.redis = http, redis
            yield


async def price_api(stream: trio.abc.Stream, seen: Seen) -> None:
    buf = bytearray()
    while (request := await read_request(stream, buf, seen)) is not None:
        sku = request[0].split()[1].split("sku=")[1]
        await stream.send_all(answer(json.dumps({"sku": sku, "price": 9.5})))


async def test_a_plugin_opens_both_clients_in_its_lifespan_and_they_close_with_it(redis: RedisServer) -> None:
    redis.command("SET", "stock:a1", "7")
    async with scripted(price_api) as (url, _):
        plugin = StockPlugin(url, redis.url)
        async with mcpkit.testing.connect({"stock": plugin}) as client:
            result = await client.call_tool("stock", {"sku": "a1"})
            assert not result.is_error, result.text
            assert result.structured == {"sku": "a1", "price": 9.5, "units": 7}
        assert redis.command("GET", "lookups") == "1"
        with pytest.raises(RuntimeError, match="closed"):  # closed with the plugin
            assert plugin.http is not None
            await plugin.http.get("/price", params={"sku": "a1"})


async def test_coredis_reads_its_environment_once_not_per_command(redis: RedisServer, monkeypatch: pytest.MonkeyPatch) -> None:
    counting = Counting(os.environ)
    monkeypatch.setattr(os, "environ", counting)
    client = mcpkit.redis_client(redis.url)
    async with client:
        Counting.reads = 0
        for i in range(20):
            await client.set("k", str(i))
            assert await client.get("k") == str(i)
        assert Counting.reads == 0
    import coredis

    before = coredis.Config.optimized  # coredis's own switch still works when frozen
    try:
        coredis.Config.optimized = True
        assert coredis.Config.optimized is True
    finally:
        coredis.Config.optimized = before
    assert coredis.Config.optimized is before


async def test_the_recipe_in_the_docs_runs_as_written(redis: RedisServer) -> None:
    """docs/writing-plugins.md's example plugin, taken from the page, against real servers."""
    import types

    from .helpers import ROOT

    page = (ROOT / "docs" / "writing-plugins.md").read_text()
    start = page.index("```python\n", page.index("## Tools that call HTTP APIs and Redis")) + len("```python\n")
    module = types.ModuleType("shop_plugin")
    exec(compile(page[start:page.index("```", start)], "writing-plugins.md", "exec"), module.__dict__)

    async def price(stream: trio.abc.Stream, seen: Seen) -> None:
        buf = bytearray()
        while (request := await read_request(stream, buf, seen)) is not None:
            assert request[0] == "POST /v1/price HTTP/1.1" and request[2] == b'{"sku":"a-1"}'
            await stream.send_all(answer('{"total":12.5}'))

    async with scripted(price) as (url, seen):
        config = {"plugins": {"shop": {"api_url": f"{url}/v1", "redis_url": redis.url}}}
        async with mcpkit.testing.connect({"shop": module}, config=config) as client:
            for n in (1, 2):
                result = await client.call_tool("checkout", {"user_id": "u1", "sku": "a-1"})
                assert not result.is_error, result.text
                assert result.structured == {"price": 12.5, "orders": n}
        assert redis.command("LRANGE", "history:u1", "0", "-1") == "a-1\na-1"
        assert len(seen.requests) == 2 and seen.connections == 1  # one kept-alive connection
