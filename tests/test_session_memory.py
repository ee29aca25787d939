"""Issue 22, items 14 and 15: what handshake-era sessions keep for replay, and when it is
freed. Measured on real servers (RSS of the process) and, for the reference cycles, on an
in-process server through real sockets with the cycle collector off."""

from __future__ import annotations

import gc
import json
import socket
import weakref
from pathlib import Path
from typing import Any

import pytest
import trio

from .hostile_plugin import plugin_env
from .http_helpers import INIT, HttpServer, sse_data, wait_until

SSE_FIRST = {"Accept": "text/event-stream, application/json"}  # the client prefers a streamed answer
MIB = 1024 * 1024


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _big_call(srv: HttpServer, sid: str, size: int, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str]]:
    status, h, _ = srv.rpc("tools/call", {"name": "big", "arguments": {"size": size}}, session=sid, rid=1, headers=headers)
    return status, h


def _answered(srv: HttpServer, n: int, size: int, headers: dict[str, str] | None = None) -> tuple[list[str], float]:
    """``n`` new sessions, then one answer of ``size`` bytes in each (JSON, or streamed when
    ``headers`` prefer it): their ids, and the server's RSS before the answers."""
    sids = [srv.initialize() for _ in range(n)]
    before = _rss_mib(srv.proc.pid)
    for sid in sids:
        status, h = _big_call(srv, sid, size, headers)
        assert status == 200 and h["content-type"].startswith("text/event-stream" if headers else "application/json")
    return sids, before


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, str]:
    return {**plugin_env(tmp_path / "site"), "MCPKIT_ACCESS_LOG": "false"}


# -- item 14: only what can be replayed, within the byte bounds ---------------------------------------

def test_answers_sent_as_json_are_not_kept_for_replay(hostile: dict[str, str]) -> None:
    """60 idle sessions with one 3 MB answer each, sent as plain JSON (no event id, so no
    client can ever resume it): nothing of them stays (180 MB stayed before)."""
    with HttpServer("--plugin", "hostile", env=hostile) as srv:
        _, before = _answered(srv, 60, 3_000_000)
        grown = _rss_mib(srv.proc.pid) - before
        assert grown < 60, grown


def test_a_streamed_answer_over_event_store_bytes_is_not_kept(hostile: dict[str, str]) -> None:
    """Streamed 3 MB answers with event_store_bytes at its 1 MiB default: none can be kept
    within the bound, so none is (each session kept its newest whatever its size before)."""
    with HttpServer("--plugin", "hostile", env=hostile) as srv:
        _, before = _answered(srv, 60, 3_000_000, SSE_FIRST)
        grown = _rss_mib(srv.proc.pid) - before
        assert grown < 60, grown


def _resume(port: int, sid: str, last_event_id: str) -> list[str]:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n"
                     f"MCP-Protocol-Version: 2025-11-25\r\nLast-Event-ID: {last_event_id}\r\n\r\n".encode())
        data = b""
        while not data.endswith(b"0\r\n\r\n"):  # the replay of a finished stream ends the response
            chunk = sock.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    return [line for line in sse_data(data.split(b"\r\n\r\n", 1)[1]) if '"jsonrpc"' in line]


def test_all_sessions_replay_stores_share_one_bound(hostile: dict[str, str]) -> None:
    """100 sessions keep one streamed 1 MB answer each (within event_store_bytes); together
    they may keep event_store_total_bytes (16 MiB): the oldest go first, the newest can
    still be resumed."""
    env = {**hostile, "MCPKIT_EVENT_STORE_BYTES": str(2 * MIB), "MCPKIT_EVENT_STORE_TOTAL_BYTES": str(16 * MIB)}
    with HttpServer("--plugin", "hostile", env=env) as srv:
        sids, before = _answered(srv, 100, 1_000_000, SSE_FIRST)
        grown = _rss_mib(srv.proc.pid) - before
        assert grown < 50, grown  # 100 MB stayed before
        # 2025-11-25 streams open with a priming event "1.0"; the answer follows it
        newest = _resume(srv.port, sids[-1], "1.0")
        assert len(newest) == 1 and len(json.loads(newest[0])["result"]["content"][0]["text"]) == 1_000_000
        assert _resume(srv.port, sids[0], "1.0") == []  # the oldest answer made room


def test_replay_budget_drops_the_oldest_messages_of_any_store() -> None:
    from mcpkit.transports.http.session_state import ReplayBudget, ReplayStore

    budget = ReplayBudget(10)
    a, b = ReplayStore(100, 8, budget), ReplayStore(100, 8, budget)
    a.append("1", 1, b"aaaa")
    b.append("1", 1, b"bbbb")
    a.append("1", 2, b"cc")
    assert budget.used == 10 and len(a) == 2 and len(b) == 1
    b.append("1", 2, b"dddd")  # 14 > 10: a's "aaaa" (the oldest of all) goes
    assert [d for _, _, d, _ in a] == [b"cc"] and [d for _, _, d, _ in b] == [b"bbbb", b"dddd"] and budget.used == 10
    b.clear()  # a session ended: its bytes are free at once
    assert budget.used == 2
    for seq in range(3, 500):  # the budget's bookkeeping stays small however long it runs
        a.append("1", seq, b"e")
    assert len(a) == 8 and budget.used == 8 and len(budget._order) < 200


def test_the_replay_streams_in_redis_keep_only_what_can_be_replayed_within_the_bounds(tmp_path: Path) -> None:
    """With shared state the replay store is a Redis stream per (session, SSE stream): an
    answer sent as JSON writes none, a streamed one over event_store_bytes (1 MiB) is not
    kept, and a stream keeps at most event_store_bytes of events, the oldest going first
    (it kept the newest whatever its size, and trimmed by an approximate count before)."""
    from mcpkit.server.redis_link import RedisLink
    from mcpkit.transports.http.shared_sessions import RedisBackend

    from .scaleout_fixtures import RedisServer

    redis = RedisServer(tmp_path / "redis")
    try:
        env = {**plugin_env(tmp_path / "site"), "MCPKIT_ACCESS_LOG": "false"}
        with HttpServer("--plugin", "hostile", "--state", redis.url, env=env) as srv:
            sid = srv.initialize()
            assert _big_call(srv, sid, 3_000_000)[1]["content-type"] == "application/json"
            assert redis.command("--scan", "--pattern", "mcpkit:ev:*") == ""  # nothing of it can be replayed
            assert _big_call(srv, sid, 3_000_000, SSE_FIRST)[1]["content-type"].startswith("text/event-stream")
            assert _big_call(srv, sid, 300_000, SSE_FIRST)[0] == 200
            lengths = sorted(int(redis.command("XLEN", key)) for key in redis.command("--scan", "--pattern", "mcpkit:ev:*").split())
            assert lengths == [0, 1], lengths  # the 3 MB answer was streamed, not kept; the 300 KB one is

        async def append_three() -> None:
            link = RedisLink(redis.url)
            async with link.client:
                shared = RedisBackend(link, 60, 1000, MIB)
                for _ in range(3):
                    await shared.append("s", "1", b'"' + b"a" * 400_000 + b'"', False)

        trio.run(append_three)
        assert redis.command("XLEN", "mcpkit:ev:s:1") == "2"  # 1.2 MB > 1 MiB: the oldest went
    finally:
        redis.stop()


# -- item 15: memory returns at DELETE ---------------------------------------------------------------

def test_deleting_sessions_returns_their_memory_at_once(hostile: dict[str, str]) -> None:
    """200 sessions each keep a streamed 3 MB answer (~600 MB); DELETE them all and, with no
    further traffic, the memory is back within a few seconds (it waited for the cycle
    collector before)."""
    env = {**hostile, "MCPKIT_EVENT_STORE_BYTES": str(4 * MIB), "MCPKIT_EVENT_STORE_TOTAL_BYTES": str(1024 * MIB)}
    with HttpServer("--plugin", "hostile", env=env) as srv:
        sids, baseline = _answered(srv, 200, 3_000_000, SSE_FIRST)
        full = _rss_mib(srv.proc.pid)
        assert full - baseline > 400, (baseline, full)  # they are kept, so the measure means something
        for sid in sids:
            assert srv.call("DELETE", "/mcp", headers={"Mcp-Session-Id": sid})[0] == 200
        assert wait_until(lambda: _rss_mib(srv.proc.pid) - baseline < 100, timeout=5), (baseline, full, _rss_mib(srv.proc.pid))


def test_a_deleted_session_is_freed_by_reference_counting_alone() -> None:
    """An in-process server, real sockets: a session that answered, streamed progress and had
    a GET stream open when it was deleted is gone as soon as DELETE is answered, with the
    cycle collector off (no reference cycle keeps it)."""
    from mcpkit.server.app import App
    from mcpkit.server.registry import Registry
    from mcpkit.server.settings import Settings
    from mcpkit.transports.http.asgi import HttpApp
    from mcpkit.transports.http.binding import bind
    from mcpkit.transports.http.h1.listener import HttpServer as Listener

    from . import hostile_plugin

    registry = Registry()
    for tool in (hostile_plugin.big, hostile_plugin.slow):
        registry.add(tool, "hostile")
    app = App(registry=registry, settings=Settings(access_log=False, task_store="memory"))
    http_app = HttpApp(app)
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    client = _RawClient(port)

    async def main() -> None:
        async with http_app.running(), trio.open_nursery() as nursery:
            await nursery.start(Listener(http_app, app.settings).serve, [sock])
            sid = await trio.to_thread.run_sync(client.use_a_session)
            ref = weakref.ref(http_app.sessions.sessions[sid])
            gc.disable()
            try:
                assert await trio.to_thread.run_sync(client.delete, sid) == 200
                with trio.move_on_after(3):
                    while ref() is not None:
                        await trio.sleep(0.05)
                assert ref() is None, gc.get_referrers(ref())
            finally:
                gc.enable()
                client.close()
            nursery.cancel_scope.cancel()

    trio.run(main)


class _RawClient:
    """A client in a thread: a session with a JSON answer, a streamed answer with progress,
    and a GET stream left open."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.stream: socket.socket | None = None

    def _post(self, body: dict[str, Any], sid: str | None = None, accept: str = "application/json, text/event-stream") -> tuple[bytes, bytes]:
        data = json.dumps(body).encode()
        extra = f"Mcp-Session-Id: {sid}\r\nMCP-Protocol-Version: 2025-11-25\r\n" if sid else ""
        head = (f"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: {accept}\r\n{extra}"
                f"Content-Length: {len(data)}\r\nConnection: close\r\n\r\n").encode()
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(head + data)
            out = b""
            while chunk := sock.recv(1 << 20):
                out += chunk
        head_part, _, rest = out.partition(b"\r\n\r\n")
        return head_part, rest

    def use_a_session(self) -> str:
        head, _ = self._post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
        sid = next(line.split(b":", 1)[1].strip().decode() for line in head.split(b"\r\n")
                   if line.lower().startswith(b"mcp-session-id:"))
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"}, sid)
        self._post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "big", "arguments": {"size": 1000}}}, sid)
        _, body = self._post({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "big", "arguments": {"size": 2000}}}, sid, accept="text/event-stream, application/json")
        assert b"xxxx" in body
        self.stream = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        self.stream.sendall(f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: {sid}\r\n"
                            "MCP-Protocol-Version: 2025-11-25\r\n\r\n".encode())
        assert self.stream.recv(4096).startswith(b"HTTP/1.1 200")
        return sid

    def delete(self, sid: str) -> int:
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(f"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nMcp-Session-Id: {sid}\r\nConnection: close\r\n\r\n".encode())
            return int(sock.recv(4096).split(b" ", 2)[1])

    def close(self) -> None:
        if self.stream is not None:
            self.stream.close()

