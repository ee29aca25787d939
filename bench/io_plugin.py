"""The I/O benchmark's three tools as an mcpkit plugin (bench_io.py serves it as ``benchio``).

Each tool calls the catalogue API (bench/io_api.py) and Redis, some calls at once, as the
public benchmark's tools do. ``[plugins.benchio]`` (or ``MCPKIT_PLUGIN__BENCHIO__*``):
``api_url``, ``redis_url``, and ``client``:
  * ``mcpkit`` (default): the recipe in docs/writing-plugins.md — ``mcpkit.http_client()``
    and one coredis client per plugin, both opened by the lifespan; several Redis commands
    of one tool go in one pipeline.
  * ``httpx``: what a plugin author writes without the recipe — an ``httpx.AsyncClient`` and
    one awaited coredis command per Redis call (the baseline issue 27 measured).
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, AsyncIterator, Awaitable, Callable, TypeVar

import coredis
import msgspec
import trio

import mcpkit

T = TypeVar("T")
encode = msgspec.json.Encoder().encode


class CartItem(msgspec.Struct):
    product_id: int
    quantity: int


class Clients:
    http: Any = None
    redis: Any = None
    recipe = True


clients = Clients()


async def both(first: Callable[[], Awaitable[Any]], second: Callable[[], Awaitable[Any]]) -> tuple[Any, Any]:
    """Run two calls at once; their results in order."""
    out: list[Any] = [None, None]

    async def run(i: int, fn: Callable[[], Awaitable[Any]]) -> None:
        out[i] = await fn()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, 1, second)
        await run(0, first)
    return out[0], out[1]


def _text(data: dict[str, Any]) -> str:
    return encode(data).decode()


@mcpkit.tool
async def search_products(category: str = "Electronics", min_price: float = 50.0, max_price: float = 500.0,
                          limit: int = 10) -> str:
    """Search products by category and price range, merged with popularity data."""
    params = {"category": category, "min_price": min_price, "max_price": max_price, "limit": limit}
    search, popular = await both(lambda: clients.http.get("/products/search", params=params),
                                 lambda: clients.redis.zrevrange("bench:popular", 0, 9))
    found = search.json()
    top10 = [int(m.split(":")[1]) for m in popular]
    rank = {pid: i + 1 for i, pid in enumerate(top10)}
    products = [{"id": p["id"], "sku": p["sku"], "name": p["name"], "price": p["price"], "rating": p["rating"],
                 "popularity_rank": rank.get(p["id"], 0)} for p in found.get("products", [])]
    return _text({"category": category, "total_found": found.get("total_found", 0), "products": products,
                  "top10_popular_ids": top10, "server_type": "mcpkit"})


@mcpkit.tool
async def get_user_cart(user_id: str = "user-00042") -> str:
    """Get user cart details with recent order history."""
    cart = await clients.redis.hgetall(f"bench:cart:{user_id}")
    items = msgspec.json.decode(cart.get("items", "[]"))
    first = items[0]["product_id"] if items else 1
    product, history = await both(lambda: clients.http.get(f"/products/{first}"),
                                  lambda: clients.redis.lrange(f"bench:history:{user_id}", 0, 4))
    product.raise_for_status()
    recent = []
    for entry in history:
        try:
            recent.append(msgspec.json.decode(entry))
        except msgspec.DecodeError:
            recent.append({"raw": entry})
    return _text({"user_id": user_id, "cart": {"items": items, "item_count": len(items),
                                               "estimated_total": float(cart.get("total", 0))},
                  "recent_history": recent, "server_type": "mcpkit"})


@mcpkit.tool
async def checkout(user_id: str = "user-00042", items: list[CartItem] | None = None) -> str:
    """Process checkout: calculate total, update rate limit, record history."""
    if items is None:
        items = [CartItem(42, 2), CartItem(1337, 1)]
    number = int(user_id.rsplit("-", 1)[1]) if "-" in user_id else 42
    rate_key = f"bench:ratelimit:user-{number % 100:05d}"
    now = int(time.time())
    entry = encode({"order_id": f"ORD-{user_id}-{now}", "items": items, "ts": now})
    product = items[0].product_id if items else 1
    redis = clients.redis

    async def writes() -> int:
        if clients.recipe:  # three commands, one round trip
            async with redis.pipeline(transaction=False) as pipe:
                count = pipe.incr(rate_key)
                pipe.rpush(f"bench:history:{user_id}", [entry])
                pipe.zincrby("bench:popular", f"product:{product}", 1)
            return await count
        counts = await both(lambda: redis.incr(rate_key), lambda: both(
            lambda: redis.rpush(f"bench:history:{user_id}", [entry]),
            lambda: redis.zincrby("bench:popular", f"product:{product}", 1)))
        return counts[0]

    payload = {"user_id": user_id, "items": msgspec.to_builtins(items)}
    calc, count = await both(lambda: clients.http.post("/cart/calculate", json=payload), writes)
    total = calc.json()
    return _text({"order_id": total.get("order_id", f"ORD-{user_id}-{now}"), "user_id": user_id,
                  "total": total.get("total", 0), "items_count": len(items), "rate_limit_count": count,
                  "status": "confirmed", "server_type": "mcpkit"})


@contextlib.asynccontextmanager
async def _opened(config: dict[str, Any]) -> AsyncIterator[None]:
    api, redis_url = config.get("api_url", "http://127.0.0.1:8100"), config.get("redis_url", "redis://127.0.0.1:6379/0")
    clients.recipe = config.get("client", "mcpkit") == "mcpkit"
    if clients.recipe:
        http: Any = mcpkit.http_client(api, timeout=10.0)
    else:
        import httpx

        http = httpx.AsyncClient(base_url=api, timeout=10.0)
    clients.redis = mcpkit.redis_client(redis_url) if clients.recipe else coredis.Redis.from_url(redis_url, decode_responses=True)
    async with http, clients.redis:
        clients.http = http
        yield


@mcpkit.hookimpl
def mcpkit_tools(config: dict[str, Any]) -> list[Any]:
    return [search_products, get_user_cart, checkout]


@mcpkit.hookimpl
def mcpkit_lifespan(config: dict[str, Any]) -> Any:
    return _opened(config)
