"""Scale-out on Redis with real parts: a redis-server, three `mcpkit serve --state redis://...`
processes and HAProxy round-robin in front of them with no stickiness. Whole sessions run
through the proxy (official SDK client and mcpkit.client), so every request may land on any
process; a stream holder is killed with -9 and the client resumes elsewhere; Redis is stopped
and restarted under load."""

from __future__ import annotations

import asyncio
import http.client
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
import trio

import mcpkit.client as mc

from .http_helpers import INIT, HttpServer, modern_headers, sse_events, wait_until
from .scaleout_fixtures import Cluster, RedisServer
from .scaleout_plugin import plugin_env
from .test_tasks import meta


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return plugin_env(tmp_path_factory.mktemp("plugin"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, redis: RedisServer, env: dict[str, str]) -> Iterator[Cluster]:
    c = Cluster(tmp_path_factory.mktemp("cluster"), redis, env)
    yield c
    c.close()


def pids_of(cluster: Cluster) -> set[str]:
    return {str(s.proc.pid) for s in cluster.servers}


def text(result: Any) -> str:
    return result.content[0].text


# -- whole sessions through the proxy ------------------------------------------------------------
def test_official_sdk_client_runs_a_whole_session_across_processes(cluster: Cluster) -> None:
    from mcp import Client
    from mcp.types import ElicitResult

    url = f"http://127.0.0.1:{cluster.proxy.port}/mcp"  # type: ignore[union-attr]
    notices: list[str] = []

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if method == "notifications/tools/list_changed":
            notices.append(method)

    async def on_elicit(context: Any, params: Any) -> ElicitResult:
        return ElicitResult(action="accept", content={"ok": True})

    async def run() -> dict[str, Any]:
        async with Client(url, mode="legacy", message_handler=on_message, elicitation_callback=on_elicit) as client:
            assert client.protocol_version == "2025-11-25"
            ran_on = [text(await client.call_tool("where", {})) for _ in range(9)]
            touched_on = [text(await client.call_tool("touch_tools", {})) for _ in range(6)]
            for _ in range(100):  # the GET stream is held by one process; changes came from all
                if len(notices) >= 6:
                    break
                await asyncio.sleep(0.05)
            answers = [json.loads(text(await client.call_tool("confirm", {"question": f"q{i}"}))) for i in range(6)]
            tools = [t.name for t in (await client.list_tools()).tools]
            return {"ran_on": ran_on, "touched_on": touched_on, "answers": answers, "tools": tools}

    out = asyncio.run(run())
    assert set(out["ran_on"]) == pids_of(cluster), "round robin should spread calls over all three"
    assert len(set(out["touched_on"])) >= 2
    assert notices == ["notifications/tools/list_changed"] * 6, "each change once, wherever it was raised"
    assert all(a["answer"] == {"action": "accept", "content": {"ok": True}} for a in out["answers"])
    assert "confirm" in out["tools"]


def test_mcpkit_client_runs_a_whole_session_across_processes(cluster: Cluster) -> None:
    url = f"http://127.0.0.1:{cluster.proxy.port}/mcp"  # type: ignore[union-attr]
    notices: list[tuple[str, Any]] = []

    def on_notification(method: str, params: Any) -> None:
        notices.append((method, params))

    async def run() -> dict[str, Any]:
        async with mc.connect(url, mode="handshake", on_elicitation=lambda p: {"action": "accept", "content": {"ok": False}},
                              on_notification=on_notification) as client:
            ran_on = [(await client.call_tool("where")).text for _ in range(6)]
            progress: list[float] = []
            ticked = await client.call_tool("ticker", {"count": 3, "gap": 0.05}, progress=lambda p, t, m: progress.append(p))
            async with client.listen(resource_uris=["tick://1", "tick://2", "tick://3"]) as updates:
                bumped_on = [(await client.call_tool("bump", {"n": n})).text for n in (1, 2, 3)]
                got = []
                with trio.move_on_after(10):
                    async for note in updates:
                        if note.method == "notifications/resources/updated":
                            got.append(note.params["uri"])
                            if len(got) == 3:
                                break
            answer = json.loads((await client.call_tool("confirm", {"question": "sure?"})).text)
            return {"ran_on": ran_on, "ticked": ticked.text, "progress": progress, "bumped_on": bumped_on,
                    "got": got, "answer": answer}

    out = trio.run(run)
    assert set(out["ran_on"]) == pids_of(cluster)
    assert out["progress"] == [1, 2, 3] and out["ticked"].startswith("ticked 3 times")
    assert len(set(out["bumped_on"])) >= 2 and out["got"] == ["tick://1", "tick://2", "tick://3"]
    assert out["answer"]["answer"] == {"action": "accept", "content": {"ok": False}}


# -- a stream holder killed with -9 ------------------------------------------------------------------
def _open_stream(port: int, sid: str, last: str | None = None) -> tuple[http.client.HTTPConnection, Any]:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=15)
    headers = {"Accept": "text/event-stream", "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    if last:
        headers["Last-Event-ID"] = last
    c.request("GET", "/mcp", headers=headers)
    resp = c.getresponse()
    assert resp.status == 200 and resp.getheader("content-type", "").startswith("text/event-stream")
    return c, resp


def _read_updates(resp: Any, count: int, got: list[tuple[str, str]]) -> None:
    for event in sse_events(resp):
        if "data" in event:
            msg = json.loads(event["data"])
            got.append((event.get("id", ""), msg["params"]["uri"]))
            if len(got) == count:
                return


def in_order(ids: list[str]) -> bool:
    """Event ids (``STREAM.POSITION``, a Redis stream position) strictly increasing."""
    keys = [tuple(int(x) for x in i.partition(".")[2].split("-")) for i in ids]
    return all(a < b for a, b in zip(keys, keys[1:]))


def _call(target: HttpServer, sid: str, name: str, arguments: dict[str, Any]) -> Any:
    status, _, reply = target.rpc("tools/call", {"name": name, "arguments": arguments}, session=sid)
    assert status == 200, reply
    return reply["result"]


def test_killing_the_process_holding_a_stream_loses_nothing(tmp_path: Path, redis: RedisServer, env: dict[str, str]) -> None:
    cluster = Cluster(tmp_path, redis, env)
    try:
        via = cluster.via
        sid = via.initialize()
        for n in range(1, 13):
            assert via.rpc("resources/subscribe", {"uri": f"tick://{n}"}, session=sid)[0] == 200
        holder, others = cluster.servers[0], cluster.servers[1:]
        conn, resp = _open_stream(holder.port, sid)
        first: list[tuple[str, str]] = []
        reader = threading.Thread(target=_read_updates, args=(resp, 6, first), daemon=True)
        reader.start()
        time.sleep(0.3)  # the stream is open on the holder
        for n in range(1, 7):
            _call(others[n % 2], sid, "bump", {"n": n})  # raised on the other two processes
        reader.join(10)
        # a change a call raises is in the session's stream before the call is answered
        assert [uri for _, uri in first] == [f"tick://{n}" for n in range(1, 7)]
        holder.proc.send_signal(signal.SIGKILL)
        holder.proc.wait(10)
        conn.close()
        for n in range(7, 13):  # while the client is away; the proxy finds the live processes
            _call(via, sid, "bump", {"n": n})
        _, resp2 = _open_stream(cluster.proxy.port, sid, last=first[-1][0])  # type: ignore[union-attr]
        rest: list[tuple[str, str]] = []
        reader2 = threading.Thread(target=_read_updates, args=(resp2, 7, rest), daemon=True)
        reader2.start()
        reader2.join(2.0)  # six are due; a seventh would be a duplicate
        assert [uri for _, uri in rest] == [f"tick://{n}" for n in range(7, 13)]  # one at a time, in order
        ids = [i for i, _ in first + rest]
        assert len(set(ids)) == 12 and in_order(ids), "every event once, in order"
    finally:
        cluster.close()


def test_a_request_stream_resumes_on_another_process(cluster: Cluster) -> None:
    """SSE polling: a request's stream is closed mid-way; the client reconnects through the
    proxy (landing anywhere) with Last-Event-ID and gets the rest and the answer."""
    via = cluster.via
    sid = via.initialize()
    c = http.client.HTTPConnection("127.0.0.1", cluster.servers[1].port, timeout=15)
    body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
            "params": {"name": "ticker", "arguments": {"count": 6, "gap": 0.15}, "_meta": {"progressToken": "t"}}}
    c.request("POST", "/mcp", json.dumps(body), {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                                                 "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
    resp = c.getresponse()
    assert resp.getheader("content-type", "").startswith("text/event-stream")
    seen: list[Any] = []
    last = None
    for event in sse_events(resp):
        last = event.get("id", last)
        if "data" in event and event["data"]:
            seen.append(json.loads(event["data"])["params"]["progress"])
            if len(seen) == 2:
                break
    c.close()  # the client goes away; the request runs on
    time.sleep(0.5)
    rest: list[Any] = []
    for _ in range(3):  # reconnect through the proxy: whichever process it lands on
        _, r = _open_stream(cluster.proxy.port, sid, last=last)  # type: ignore[union-attr]
        for event in sse_events(r):
            last = event.get("id", last)
            if "data" in event and event["data"]:
                rest.append(json.loads(event["data"]))
                if "result" in rest[-1]:
                    break
        if rest and "result" in rest[-1]:
            break
    progress = seen + [m["params"]["progress"] for m in rest if m.get("method") == "notifications/progress"]
    assert progress == [1, 2, 3, 4, 5, 6]
    assert rest[-1]["id"] == 7 and rest[-1]["result"]["content"][0]["text"].startswith("ticked 6 times")


# -- tasks and stateless calls ------------------------------------------------------------------------
def _stateless(target: HttpServer, method: str, params: dict[str, Any], name: str | None = None) -> tuple[int, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta()}}
    status, _, raw = target.call("POST", "/mcp", body, modern_headers(method, name))
    return status, json.loads(raw) if raw else None


def test_tasks_are_served_by_any_process(cluster: Cluster) -> None:
    via = cluster.via
    status, reply = _stateless(via, "tools/call", {"name": "crunch", "arguments": {"seconds": 0.6}}, "crunch")
    assert status == 200 and "taskId" in reply["result"], reply
    task_id = reply["result"]["taskId"]
    seen_by = set()
    final = None
    end = time.monotonic() + 15
    while time.monotonic() < end:
        for srv in cluster.servers:  # each process answers tasks/get from Redis
            status, got = _stateless(srv, "tasks/get", {"taskId": task_id}, task_id)
            assert status == 200, got
            seen_by.add(srv.port)
            if got["result"]["status"] == "completed":
                final = got["result"]
        if final:
            break
        time.sleep(0.1)
    assert final is not None and len(seen_by) == 3
    assert final["result"]["content"][0]["text"].startswith("crunched in ")
    status, other = _stateless(via, "tools/call", {"name": "crunch", "arguments": {"seconds": 30}}, "crunch")
    other_id = other["result"]["taskId"]
    assert _stateless(via, "tasks/cancel", {"taskId": other_id}, other_id)[0] == 200
    assert wait_until(lambda: _stateless(via, "tasks/get", {"taskId": other_id}, other_id)[1]["result"]["status"] == "cancelled", 10)


# -- Redis away -------------------------------------------------------------------------------------------
def test_redis_stopped_and_restarted(tmp_path: Path, env: dict[str, str]) -> None:
    own = RedisServer(tmp_path / "redis")
    cluster = Cluster(tmp_path, own, env, 2)
    try:
        via = cluster.via
        sid = via.initialize()
        assert _call(via, sid, "where", {})
        own.stop()
        started = time.monotonic()
        status, headers, reply = via.rpc("initialize", INIT)
        assert status == 503 and headers.get("retry-after") == "1"
        assert reply["error"]["code"] == -32000 and own.url in reply["error"]["message"]
        results = [via.rpc("tools/call", {"name": "where", "arguments": {}}, session=sid) for _ in range(6)]
        assert all(s in (200, 503) for s, _, _ in results)  # a cached session may still answer
        assert all("error" in r and r["error"]["code"] == -32000 for s, _, r in results if s == 503)
        status, reply = _stateless(via, "tools/call", {"name": "where", "arguments": {}}, "where")
        assert status == 200 and reply["result"]["content"][0]["text"].isdigit(), "stateless calls need no Redis"
        health = json.loads(via.call("GET", "/healthz")[2])
        assert health["status"] == "degraded" and health["state"]["ok"] is False
        assert time.monotonic() - started < 15, "no request waited past the state timeout"
        own.start()
        assert wait_until(lambda: via.rpc("initialize", INIT)[0] == 200, 15), "service resumes"
        assert _call(via, sid, "where", {}), "the session survived (Redis kept it)"
        def logs() -> list[str]:
            return [srv.stderr.decode(errors="replace") for srv in cluster.servers]

        # a process that needed Redis while it was away said so once, naming the URL, and that it is back
        assert wait_until(lambda: any(f"shared state {own.url} cannot be reached" in log for log in logs()), 5)
        assert wait_until(lambda: all(("is reachable again" in log) == ("cannot be reached" in log) for log in logs()), 10)
        for log in logs():
            assert "Traceback" not in log and log.count("cannot be reached") <= 1, log
    finally:
        cluster.close()
        own.stop()


def test_healthz_and_keys(cluster: Cluster, redis: RedisServer) -> None:
    health = json.loads(cluster.via.call("GET", "/healthz")[2])
    assert health["state"]["backend"] == "redis" and health["state"]["ok"] is True and health["status"] == "ok"
    assert all(k.startswith("mcpkit:") for k in redis.command("--scan").split())


def test_hostile_last_event_ids_get_a_stream_not_an_error(cluster: Cluster) -> None:
    sid = cluster.via.initialize()
    for last in ("0.garbage", "zz", "0.123-abc", "0.~1", "x" * 200 + ".1-1", "0.99999999999999999999-1"):
        conn, resp = _open_stream(cluster.servers[0].port, sid, last=last)  # asserts 200 + SSE
        conn.close()
    log = cluster.servers[0].stderr.decode(errors="replace")
    assert "Traceback" not in log and "unexpected error" not in log


def test_forked_workers_get_their_own_process_tag() -> None:
    """Ids a process hands out (stream keys, server-request ids) and its bus messages carry a
    tag; `--workers N` forks after the app is built, so each child must make its own."""
    from mcpkit.server.redis_link import process_tag

    parent = process_tag()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its tag and leave at once
        os.write(write, process_tag().encode())
        os._exit(0)
    os.close(write)
    child = os.read(read, 64).decode()
    os.waitpid(pid, 0)
    assert child and parent and child != parent and process_tag() == parent


def test_forked_workers_share_sessions_through_redis(redis: RedisServer, env: dict[str, str]) -> None:
    """`--workers 2 --state redis://…`: the app (and its Redis client) is built before the fork;
    both workers serve one session, calls in parallel on fresh connections."""
    with HttpServer("--plugin", "scaleout", "--state", redis.url, "--workers", "2", env=env) as srv:
        sid = srv.initialize()
        results: list[Any] = []

        def call() -> None:
            results.append(srv.rpc("tools/call", {"name": "where", "arguments": {}}, session=sid))

        for _ in range(3):
            threads = [threading.Thread(target=call) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(15)
        assert len(results) == 24 and all(status == 200 and "result" in reply for status, _, reply in results)
        pids = {reply["result"]["content"][0]["text"] for _, _, reply in results}
        assert str(srv.proc.pid) not in pids  # the workers answered, not the supervisor
        answer = srv.rpc("tools/call", {"name": "touch_tools", "arguments": {}}, session=sid)
        assert answer[0] == 200
        assert "Traceback" not in srv.stderr.decode(errors="replace")


def test_subscriptions_listen_gets_changes_raised_on_another_process(cluster: Cluster) -> None:
    """Stateless era: a `subscriptions/listen` stream held by one process hears a list change
    and a resource update raised by a call on another."""
    first, second = (f"http://127.0.0.1:{s.port}/mcp" for s in cluster.servers[:2])

    async def run() -> list[tuple[str, Any]]:
        got: list[tuple[str, Any]] = []
        async with mc.connect(first, mode="stateless") as listener, mc.connect(second, mode="stateless") as caller:
            async with listener.listen(tools=True, resource_uris=["tick://42"]) as notes:
                await trio.sleep(0.5)  # the listen stream is open
                await caller.call_tool("touch_tools")
                await caller.call_tool("bump", {"n": 42})
                with trio.move_on_after(10):
                    async for note in notes:
                        if note.method in ("notifications/tools/list_changed", "notifications/resources/updated"):
                            got.append((note.method, note.params.get("uri")))
                            if len(got) == 2:
                                break
        return got

    assert trio.run(run) == [("notifications/tools/list_changed", None), ("notifications/resources/updated", "tick://42")]
