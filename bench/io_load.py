"""The I/O benchmark's load: N users, each doing a session per call on its own keep-alive connection.

Every user loops as the public benchmark's k6 script does: for each of the three tools a
session of its own (``initialize`` → ``notifications/initialized`` → ``tools/call`` →
``DELETE`` when the server gave a session id), then a ``tools/list`` session, then 50 ms of
think time. Answers are checked as that script checks them. Runs on asyncio (uvloop when
installed) with httptools, so the generator costs little of the machine it shares.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import httptools
import msgspec

ACCEPT = b"application/json, text/event-stream"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "bench-io", "version": "1.0"}}}
INITIALIZED = msgspec.json.encode({"jsonrpc": "2.0", "method": "notifications/initialized"})
LIST = msgspec.json.encode({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}})
THINK_S = 0.05


def tool_calls(user: int) -> list[tuple[str, bytes]]:
    uid = f"user-{user % 1000:05d}"
    calls = [("search_products", {"category": "Electronics", "min_price": 50.0, "max_price": 500.0, "limit": 10}),
             ("get_user_cart", {"user_id": uid}),
             ("checkout", {"user_id": uid, "items": [{"product_id": 42, "quantity": 2}, {"product_id": 1337, "quantity": 1}]})]
    return [(name, msgspec.json.encode({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                        "params": {"name": name, "arguments": args}})) for name, args in calls]


def tool_ok(name: str, result: Any) -> bool:
    try:
        data = msgspec.json.decode(result["content"][0]["text"])
        if name == "search_products":
            return data["total_found"] == 2251 and len(data["products"]) == 10 and len(data["top10_popular_ids"]) == 10
        if name == "get_user_cart":
            return len(data["cart"]["items"]) >= 1 and len(data["recent_history"]) == 5
        return data["status"] == "confirmed" and data["total"] > 0 and data["items_count"] == 2
    except (KeyError, IndexError, TypeError, msgspec.DecodeError):
        return False


def rpc_body(body: bytes) -> Any:
    """The JSON-RPC message in a JSON or SSE-framed answer."""
    text = body.strip()
    if text[:1] in (b"{", b"["):
        return msgspec.json.decode(text)
    for line in text.split(b"\n"):
        if line.startswith(b"data:") and line[5:].strip()[:1] == b"{":
            return msgspec.json.decode(line[5:].strip())
    return None


@dataclass
class Stats:
    """What one measured window saw. A request counts when it ends inside the window."""

    latencies: dict[str, list[float]] = field(default_factory=dict)
    mcp_requests: int = 0
    http_requests: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    recording: bool = False

    def add(self, kind: str, seconds: float, mcp: bool) -> None:
        if self.recording:
            self.latencies.setdefault(kind, []).append(seconds)
            self.http_requests += 1
            self.mcp_requests += mcp

    def error(self, kind: str) -> None:
        if self.recording:
            self.errors[kind] = self.errors.get(kind, 0) + 1


class Connection(asyncio.Protocol):
    """One keep-alive HTTP/1.1 connection; one request at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.waiter: asyncio.Future[tuple[int, str | None, bytes]] | None = None
        self.body: list[bytes] = []
        self.sid: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_exception(ConnectionError("connection closed"))

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_exception(exc)

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"mcp-session-id":
            self.sid = value.decode()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)

    def on_message_complete(self) -> None:
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result((self.parser.get_status_code(), self.sid, b"".join(self.body)))


class User:
    def __init__(self, port: int, number: int, stats: Stats) -> None:
        self.port, self.number, self.stats = port, number, stats
        self.conn: Connection | None = None
        self.calls = tool_calls(number)

    async def send(self, method: str, body: bytes, sid: str | None) -> tuple[int, str | None, bytes]:
        loop = asyncio.get_running_loop()
        if self.conn is None or self.conn.transport is None:
            _, self.conn = await loop.create_connection(Connection, "127.0.0.1", self.port)
        conn = self.conn
        conn.body, conn.sid = [], None
        conn.waiter = loop.create_future()
        head = [f"{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\n".encode()]
        if body:
            head.append(b"Content-Type: application/json\r\nAccept: %s\r\nContent-Length: %d\r\n" % (ACCEPT, len(body)))
        if sid:
            head.append(b"Mcp-Session-Id: %s\r\n" % sid.encode())
        assert conn.transport is not None
        conn.transport.write(b"".join(head) + b"\r\n" + body)
        return await asyncio.wait_for(conn.waiter, 30)

    async def timed(self, kind: str, method: str, body: bytes, sid: str | None, mcp: bool) -> tuple[int, str | None, bytes]:
        t0 = time.perf_counter()
        try:
            out = await self.send(method, body, sid)
        except (OSError, ConnectionError, asyncio.TimeoutError, httptools.HttpParserError):
            self.conn = None
            self.stats.error(kind)
            return 0, None, b""
        self.stats.add(kind, time.perf_counter() - t0, mcp)
        return out

    async def session(self, kind: str, call: bytes, check: Any) -> None:
        status, sid, body = await self.timed("initialize", "POST", msgspec.json.encode(INIT), None, True)
        if status != 200:
            self.stats.error("initialize")
            return
        await self.timed("notification", "POST", INITIALIZED, sid, False)
        status, _, body = await self.timed(kind, "POST", call, sid, True)
        message = rpc_body(body) if status == 200 else None
        if not (isinstance(message, dict) and "result" in message and check(message["result"])):
            self.stats.error(kind)
        if sid:
            await self.timed("delete", "DELETE", b"", sid, False)

    async def run(self, stop: asyncio.Event, think: float = THINK_S) -> None:
        while not stop.is_set():
            for name, call in self.calls:
                await self.session(name, call, lambda result, name=name: tool_ok(name, result))
            await self.session("tools/list", LIST, lambda result: len(result.get("tools", [])) == 3)
            if think:
                await asyncio.sleep(think)
        if self.conn is not None and self.conn.transport is not None:
            self.conn.transport.close()


async def drive(port: int, users: int, warm_s: float, seconds: float, on_window: Any, think: float = THINK_S) -> Stats:
    """Run ``users`` users: ``warm_s`` unrecorded, then ``seconds`` recorded. ``on_window(start)``
    is called at the window's start (True) and end (False), e.g. to read CPU counters."""
    stats, stop = Stats(), asyncio.Event()
    tasks = [asyncio.create_task(User(port, n + 1, stats).run(stop, think)) for n in range(users)]
    try:
        await asyncio.sleep(warm_s)
        on_window(True)
        stats.recording = True
        await asyncio.sleep(seconds)
        stats.recording = False
        on_window(False)
    finally:
        stop.set()
        await asyncio.wait(tasks, timeout=30)
        for t in tasks:
            t.cancel()
    return stats


def run(port: int, users: int, warm_s: float, seconds: float, on_window: Any, think: float = THINK_S) -> Stats:
    coro = drive(port, users, warm_s, seconds, on_window, think)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    return uvloop.run(coro)
