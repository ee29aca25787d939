"""Redis failing in the ways a real one does, under a real `mcpkit serve --state redis://...`:
refusing writes (OOM under maxmemory, READONLY as a replica, MISCONF when it cannot save),
restarting empty (no persistence) while a client holds a stream, stopped with SIGSTOP, and
not there at all when the server starts. Each fault is driven on a real redis-server; the
server must answer 503 with Retry-After, say nothing internal, log one line, stay up, and
recover when Redis does."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest

from .http_helpers import INIT, HttpServer, modern_headers, wait_until
from .scaleout_fixtures import RedisServer, free_port
from .scaleout_plugin import plugin_env

#: what an answer must never contain: Redis's own words, our scripts, an internal error
INTERNAL = ("script", "lua", "oom", "readonly", "read only", "misconf", "maxmemory", "replica", "persist",
            "internal error", "-32603", "traceback", "coredis")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return plugin_env(tmp_path_factory.mktemp("plugin"))


@pytest.fixture
def redis(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis", persist=False)
    yield server
    if server.proc is not None and server.proc.poll() is None:
        server.proc.send_signal(signal.SIGCONT)  # a test may have stopped it
        server.command("CONFIG", "SET", "save", "")  # one that cannot save would refuse to stop
    server.stop()


def serve(redis_url: str, env: dict[str, str], **settings: str) -> HttpServer:
    extra = {f"MCPKIT_{k.upper()}": v for k, v in settings.items()}
    return HttpServer("--plugin", "scaleout", "--state", redis_url, env={**env, **extra})


# -- ways Redis refuses commands ----------------------------------------------------------------------
def _oom(redis: RedisServer) -> Callable[[], None]:
    redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
    redis.command("CONFIG", "SET", "maxmemory", "1")
    return lambda: redis.command("CONFIG", "SET", "maxmemory", "0")


def _readonly(redis: RedisServer) -> Callable[[], None]:
    redis.command("REPLICAOF", "127.0.0.1", str(free_port()))  # a primary that is not there: stays read-only
    return lambda: redis.command("REPLICAOF", "NO", "ONE")


def _misconf(redis: RedisServer) -> Callable[[], None]:
    redis.folder.rmdir()  # its working directory is gone: snapshots fail
    redis.command("CONFIG", "SET", "save", "3600 1")
    redis.command("BGSAVE")
    assert wait_until(lambda: "rdb_last_bgsave_status:err" in redis.command("INFO", "persistence"), 10)
    return lambda: redis.command("CONFIG", "SET", "save", "")  # no snapshots due: writes are accepted again


FAULTS = {"oom": _oom, "readonly": _readonly, "misconf": _misconf}


def _refused_write(redis: RedisServer) -> str:
    return redis.command("SET", "mcpkit:probe", "1")


def _session_post(server: HttpServer, sid: str, message: dict[str, Any]) -> tuple[int, dict[str, str], bytes]:
    return server.call("POST", "/mcp", message, {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})


def _assert_busy(answer: tuple[int, dict[str, str], bytes], url: str) -> None:
    status, headers, body = answer
    assert status == 503 and headers.get("retry-after") == "1", answer
    error = json.loads(body)["error"]
    assert error["code"] == -32000 and url in error["message"] and "retry shortly" in error["message"], error


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_redis_refusing_commands_is_a_503_and_the_server_lives_on(fault: str, redis: RedisServer, env: dict[str, str]) -> None:
    server = serve(redis.url, env, session_ttl_s="20")  # the idle expiry is pushed back every 2 s
    try:
        sid = server.initialize()
        created = time.monotonic()
        recover = FAULTS[fault](redis)
        assert _refused_write(redis).split()[0] in ("OOM", "READONLY", "MISCONF"), "the fault is on"
        bodies: list[bytes] = []

        def keep(answer: tuple[int, dict[str, str], bytes]) -> tuple[int, dict[str, str], bytes]:
            bodies.append(answer[2])
            return answer

        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}
        _assert_busy(keep(server.call("POST", "/mcp", init)), redis.url)  # its record cannot be written
        # a call that streams progress: answered in full (not resumable while Redis refuses)
        ticker = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "ticker", "arguments": {"count": 2, "gap": 0.05}, "_meta": {"progressToken": "p"}}}
        status, headers, body = keep(_session_post(server, sid, ticker))
        assert status == 200 and headers["content-type"].startswith("text/event-stream"), body
        assert b"ticked 2 times" in body and body.count(b"notifications/progress") == 2, body
        # a call whose change notice cannot be written to the sessions' streams: answered all the same
        bump = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "bump", "arguments": {"n": 1}}}
        status, _, body = keep(_session_post(server, sid, bump))
        assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == str(server.proc.pid), body
        status, _, body = keep(server.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "bump", "arguments": {"n": 2}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                                            "io.modelcontextprotocol/clientCapabilities": {}}}},
            modern_headers("tools/call", "bump")))
        assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == str(server.proc.pid), body
        # a change to the session's record
        level = {"jsonrpc": "2.0", "id": 5, "method": "logging/setLevel", "params": {"level": "debug"}}
        _assert_busy(keep(_session_post(server, sid, level)), redis.url)
        # the idle expiry falls due: pushing it back is refused
        time.sleep(max(0.0, created + 2.3 - time.monotonic()))
        where = {"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "where", "arguments": {}}}
        _assert_busy(keep(_session_post(server, sid, where)), redis.url)
        _assert_busy(keep(server.call("DELETE", "/mcp", headers={"Mcp-Session-Id": sid})), redis.url)
        health = json.loads(keep(server.call("GET", "/healthz"))[2])
        assert health["status"] == "degraded" and health["state"]["ok"] is False, health
        leaked = [b for b in bodies if any(word in b.decode(errors="replace").lower() for word in INTERNAL)]
        assert not leaked, leaked
        assert server.proc.poll() is None, "the server is still running"

        recover()
        assert _refused_write(redis) == "OK"
        assert wait_until(lambda: server.rpc("initialize", INIT)[0] == 200, 10), "new sessions again"
        status, _, reply = server.rpc("tools/call", {"name": "where", "arguments": {}}, session=sid)
        assert status == 200 and reply["result"]["content"][0]["text"] == str(server.proc.pid), "the old session lives on"
        assert wait_until(lambda: json.loads(server.call("GET", "/healthz")[2])["state"]["ok"] is True, 10)
        log = server.stderr.decode(errors="replace")
        assert "Traceback" not in log and "-32603" not in log, log
        assert log.count(f"shared state {redis.url} is refusing commands") == 1, log
    finally:
        server.__exit__(None, None, None)


@pytest.mark.parametrize("seconds", [3.0, 0.2])
def test_a_task_whose_record_is_refused_fails_its_call_and_lets_the_server_stop(seconds: float, redis: RedisServer,
                                                                                env: dict[str, str]) -> None:
    """The tool outlives the refusal (3 s), or ends while the record is still being written
    (0.2 s: writes are paused, so the write times out after the tool is done)."""
    server = serve(redis.url, env, state_timeout_s="1")
    try:
        if seconds > 1:
            _oom(redis)
        else:
            redis.command("CLIENT", "PAUSE", "3000", "WRITE")  # reads go on: the task limits are checked
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}
        crunch = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                  "params": {"name": "crunch", "arguments": {"seconds": seconds}, "_meta": meta}}
        _assert_busy(server.call("POST", "/mcp", crunch, modern_headers("tools/call", "crunch")), redis.url)
        redis.command("CONFIG", "SET", "maxmemory", "0")
        redis.command("CLIENT", "UNPAUSE")
        started = time.monotonic()
        assert server.stop() == 0
        assert time.monotonic() - started < 10, "shutdown did not wait for a task that was never stored"
        assert "Traceback" not in server.stderr.decode(errors="replace")
    finally:
        server.__exit__(None, None, None)


# -- Redis restarted empty, or emptied ------------------------------------------------------------------
def _open_stream(server: HttpServer, sid: str) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=12)
    conn.request("GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": sid,
                                         "MCP-Protocol-Version": "2025-11-25"})
    resp = conn.getresponse()
    assert resp.status == 200
    return conn, resp


def _ends(resp: http.client.HTTPResponse) -> float:
    """Seconds until the stream ends (its response is complete); inf if it does not within the
    connection's timeout."""
    started = time.monotonic()
    try:
        while resp.readline():
            pass
    except (socket.timeout, TimeoutError):
        return float("inf")
    return time.monotonic() - started


def _assert_gone_and_reinitialize(server: HttpServer, sid: str) -> None:
    status, _, _ = server.call("GET", "/mcp", headers={"Accept": "text/event-stream", "Mcp-Session-Id": sid})
    assert status == 404, "a reconnect is told the session is gone"
    assert server.rpc("tools/call", {"name": "where", "arguments": {}}, session=sid)[0] == 404
    fresh = server.initialize()
    assert server.rpc("tools/call", {"name": "where", "arguments": {}}, session=fresh)[0] == 200


@pytest.mark.parametrize("loss", ["restart", "flush"])
def test_a_stream_ends_when_redis_loses_its_session(loss: str, redis: RedisServer, env: dict[str, str]) -> None:
    """Restarted without persistence: noticed when the bus reconnects (the TTL is long, so the
    expiry round is far off). Flushed: no reconnect, noticed by the expiry round — which also
    keeps a session whose stream is open alive past its TTL."""
    server = serve(redis.url, env, session_ttl_s="1800" if loss == "restart" else "2")
    try:
        sid = server.initialize()
        conn, resp = _open_stream(server, sid)
        if loss == "restart":
            redis.stop()
            redis.start()  # empty: every session is gone
        else:
            time.sleep(3)  # longer than the TTL: the open stream keeps the session's record alive
            assert redis.command("EXISTS", f"mcpkit:sess:{sid}") == "1"
            assert server.rpc("tools/call", {"name": "where", "arguments": {}}, session=sid)[0] == 200
            redis.command("FLUSHALL")  # Redis loses it without a restart (a flush, an eviction)
        took = _ends(resp)
        conn.close()
        assert took < 5, "the stream ends soon after Redis has lost the session"
        _assert_gone_and_reinitialize(server, sid)
        assert "Traceback" not in server.stderr.decode(errors="replace")
    finally:
        server.__exit__(None, None, None)


# -- Redis stopped: one deadline per request --------------------------------------------------------------
def test_a_request_waits_for_a_stopped_redis_once_not_per_command(redis: RedisServer, env: dict[str, str]) -> None:
    server = serve(redis.url, env, state_timeout_s="2")
    try:
        sid = server.initialize()
        assert redis.proc is not None
        os.kill(redis.proc.pid, signal.SIGSTOP)
        try:
            # bump raises a change notice: written to the sessions' streams, then told to the other
            # processes — two commands in turn, each of which would wait the whole timeout
            started = time.monotonic()
            status, _, reply = server.rpc("tools/call", {"name": "bump", "arguments": {"n": 1}}, session=sid)
            in_session = time.monotonic() - started
            assert status == 200 and reply["result"]["isError"] is False
            started = time.monotonic()
            status, _, body = server.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "bump", "arguments": {"n": 2}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                                                "io.modelcontextprotocol/clientCapabilities": {}}}},
                modern_headers("tools/call", "bump"))
            stateless = time.monotonic() - started
            assert status == 200, body
            started = time.monotonic()
            _assert_busy(server.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}),
                         redis.url)
            init = time.monotonic() - started
        finally:
            os.kill(redis.proc.pid, signal.SIGCONT)
        # one state_timeout_s (2 s) per request, with room for a loaded machine; twice would be 4 s
        assert max(in_session, stateless, init) < 3.2, (in_session, stateless, init)
        assert min(in_session, stateless, init) > 1.5, "each waited for Redis, up to the deadline"
        assert wait_until(lambda: server.rpc("initialize", INIT)[0] == 200, 10)
        assert "Traceback" not in server.stderr.decode(errors="replace")
    finally:
        server.__exit__(None, None, None)


# -- Redis away at start ----------------------------------------------------------------------------------
def test_the_server_starts_without_redis_and_uses_it_once_it_is_there(tmp_path: Path, env: dict[str, str]) -> None:
    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    server = serve(url, env)
    redis: RedisServer | None = None
    try:
        lines = [line for line in server.stderr.decode(errors="replace").splitlines() if url in line]
        assert len(lines) == 1 and "start Redis" in lines[0] and "--state" in lines[0], lines
        assert server.proc.poll() is None
        status, _, body = server.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "where", "arguments": {}, "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                                                       "io.modelcontextprotocol/clientCapabilities": {}}}},
            modern_headers("tools/call", "where"))
        assert status == 200, "stateless calls need no Redis"
        _assert_busy(server.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT}), url)
        assert json.loads(server.call("GET", "/healthz")[2])["status"] == "degraded"
        redis = RedisServer(tmp_path / "redis", persist=False, port=port)
        assert wait_until(lambda: server.rpc("initialize", INIT)[0] == 200, 15), "it uses Redis once it is there"
        sid = server.initialize()
        assert server.rpc("tools/call", {"name": "where", "arguments": {}}, session=sid)[0] == 200
        assert redis.command("EXISTS", f"mcpkit:sess:{sid}") == "1"
        assert json.loads(server.call("GET", "/healthz")[2])["status"] == "ok"
        log = server.stderr.decode(errors="replace")
        assert "Traceback" not in log and "is reachable again" in log, log
    finally:
        server.__exit__(None, None, None)
        if redis is not None:
            redis.stop()


def test_the_server_starts_when_redis_hangs_and_says_so_in_one_line(redis: RedisServer, env: dict[str, str]) -> None:
    assert redis.proc is not None
    os.kill(redis.proc.pid, signal.SIGSTOP)  # it accepts connections and never answers
    try:
        server = serve(redis.url, env, state_timeout_s="1")
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)
    try:
        assert wait_until(lambda: server.rpc("initialize", INIT)[0] == 200, 10)
        # the log reaches stderr through a non-blocking sink and a reader thread: wait for it
        wait_until(lambda: "reachable again" in server.stderr.decode(errors="replace"), 5)
        log = server.stderr.decode(errors="replace")
        assert "Traceback" not in log, log
        lines = [line for line in log.splitlines() if "mcpkit.http.access" not in line and "serving MCP" not in line]
        assert len(lines) == 2 and "cannot be reached at start-up" in lines[0] and "reachable again" in lines[1], lines
    finally:
        server.__exit__(None, None, None)
