"""Tasks (the io.modelcontextprotocol/tasks extension) against real `mcpkit serve` processes:
durability across disconnects and crashes, isolation, limits, cancellation, notifications,
and mcpkit.client's task handles."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import trio

import mcpkit
import mcpkit.client as mc

from .helpers import MCPKIT, Server, modern_meta
from .http_helpers import HttpServer, modern_headers, sse_data

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}


def meta(**extra: Any) -> dict[str, Any]:
    m = modern_meta()
    m["io.modelcontextprotocol/clientCapabilities"] = {**TASKS, "elicitation": {}}
    m.update(extra)
    return m


@pytest.fixture
def data_env(tmp_path: Path) -> dict[str, str]:
    return {"MCPKIT_DATA_DIR": str(tmp_path / "data")}


def rpc(srv: HttpServer, method: str, params: dict[str, Any], name: str | None = None) -> tuple[int, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": meta()}}
    status, h, raw = srv.call("POST", "/mcp", body, modern_headers(method, name))
    if h.get("content-type", "").startswith("text/event-stream"):
        return status, [json.loads(d) for d in sse_data(raw)][-1]
    return status, json.loads(raw)


def start(srv: HttpServer, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    status, reply = rpc(srv, "tools/call", {"name": tool, "arguments": arguments}, tool)
    assert status == 200, reply
    return reply["result"]


def get(srv: HttpServer, task_id: str) -> tuple[int, Any]:
    return rpc(srv, "tasks/get", {"taskId": task_id}, task_id)


def wait_status(srv: HttpServer, task_id: str, wanted: set[str], timeout: float = 10) -> dict[str, Any]:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        status, reply = get(srv, task_id)
        if "result" in reply and reply["result"]["status"] in wanted:
            return reply["result"]
        time.sleep(0.05)
    raise AssertionError(f"task {task_id} never reached {wanted}: {reply}")


def test_a_task_outlives_its_client_and_a_new_connection_fetches_it(data_env: dict[str, str]) -> None:
    with HttpServer("--plugin", "conformance", env=data_env) as srv:
        url = f"http://127.0.0.1:{srv.port}/mcp"

        async def first() -> str:
            async with mc.connect(url, mode="stateless", tasks=True) as client:
                handle = await client.start_tool("slow_compute", {"seconds": 1.0, "label": "kept"})
                assert isinstance(handle, mc.TaskHandle) and handle.status == "working"
                return handle.task_id  # and the connection goes away

        async def later(task_id: str) -> str:
            async with mc.connect(url, mode="stateless", tasks=True) as client:
                return (await client.task(task_id).wait()).text

        task_id = trio.run(first)
        assert trio.run(later, task_id) == "Computed kept after 1 s"


def test_a_task_of_a_killed_server_is_failed_after_restart(data_env: dict[str, str]) -> None:
    with HttpServer("--plugin", "conformance", env=data_env) as srv:
        task_id = start(srv, "slow_compute", {"seconds": 60})["taskId"]
        assert wait_status(srv, task_id, {"working"})
        srv.proc.kill()  # kill -9: no chance to say anything
        srv.proc.wait()
    with HttpServer("--plugin", "conformance", env=data_env) as srv:
        task = wait_status(srv, task_id, {"failed"})
        assert task["error"]["code"] == -32603 and "stopped before it finished" in task["error"]["message"]


def test_a_task_is_visible_only_to_its_owner(data_env: dict[str, str]) -> None:
    """Two stdio connections (two processes) on one store: one cannot see the other's task."""
    with Server("--plugin", "conformance", env=data_env) as a, Server("--plugin", "conformance", env=data_env) as b:
        created = a.request("tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}, "_meta": meta()})
        task_id = created["result"]["taskId"]
        assert a.request("tasks/get", {"taskId": task_id, "_meta": meta()})["result"]["status"] == "working"
        refused = b.request("tasks/get", {"taskId": task_id, "_meta": meta()})
        assert refused["error"]["code"] == -32602
        assert b.request("tasks/cancel", {"taskId": task_id, "_meta": meta()})["error"]["code"] == -32602
        assert a.request("tasks/get", {"taskId": task_id, "_meta": meta()})["result"]["status"] == "working"


def test_without_the_extension_tasks_are_refused_or_run_at_once(data_env: dict[str, str]) -> None:
    with HttpServer("--plugin", "conformance", env=data_env) as srv:
        plain = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                 "params": {"name": "slow_compute", "arguments": {"seconds": 0.3}, "_meta": modern_meta()}}
        status, _, raw = srv.call("POST", "/mcp", plain, modern_headers("tools/call", "slow_compute"))
        result = json.loads(raw)["result"]
        assert status == 200 and result["resultType"] == "complete" and "after 0.3 s" in result["content"][0]["text"]
        plain["params"]["name"] = "failing_job"  # task support "required"
        status, _, raw = srv.call("POST", "/mcp", plain, modern_headers("tools/call", "failing_job"))
        error = json.loads(raw)["error"]
        assert status == 400 and error["code"] == -32021
        assert error["data"]["requiredCapabilities"]["extensions"] == {"io.modelcontextprotocol/tasks": {}}
        sid = srv.initialize()  # the handshake era: synchronous answers
        status, _, reply = srv.rpc("tools/call", {"name": "slow_compute", "arguments": {"seconds": 0.3}}, session=sid)
        assert status == 200 and "taskId" not in reply["result"] and "after 0.3 s" in reply["result"]["content"][0]["text"]


def test_cancellation_races_and_idempotence(data_env: dict[str, str]) -> None:
    with HttpServer("--plugin", "conformance", env=data_env) as srv:
        ids = [start(srv, "slow_compute", {"seconds": 30})["taskId"] for _ in range(5)]
        for task_id in ids:  # cancel at once, twice
            ack = rpc(srv, "tasks/cancel", {"taskId": task_id}, task_id)[1]["result"]
            assert ack["resultType"] == "complete" and "taskId" not in ack and "status" not in ack
            assert "result" in rpc(srv, "tasks/cancel", {"taskId": task_id}, task_id)[1]
        assert all(wait_status(srv, t, {"cancelled"})["status"] == "cancelled" for t in ids)
        done = start(srv, "slow_compute", {"seconds": 0.2, "label": "done"})["taskId"]
        assert wait_status(srv, done, {"completed"})
        assert "result" in rpc(srv, "tasks/cancel", {"taskId": done}, done)[1]  # terminal: still an ack
        assert get(srv, done)[1]["result"]["status"] == "completed"
        parked = start(srv, "confirm_delete", {"filename": "x"})["taskId"]
        assert wait_status(srv, parked, {"input_required"})["inputRequests"]
        rpc(srv, "tasks/cancel", {"taskId": parked}, parked)
        assert wait_status(srv, parked, {"cancelled"})["status"] == "cancelled"


def test_caps_on_live_tasks(data_env: dict[str, str]) -> None:
    env = {**data_env, "MCPKIT_MAX_TASKS_PER_PRINCIPAL": "3"}
    with HttpServer("--plugin", "conformance", env=env) as srv:
        for _ in range(3):
            start(srv, "slow_compute", {"seconds": 30})
        status, reply = rpc(srv, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}}, "slow_compute")
        assert reply["error"]["code"] == -32000 and "max_tasks_per_principal" in reply["error"]["message"]


def test_results_go_after_their_ttl(data_env: dict[str, str]) -> None:
    with HttpServer("--plugin", "conformance", env={**data_env, "MCPKIT_TASK_TTL_MS": "1500"}) as srv:
        created = start(srv, "slow_compute", {"seconds": 0.2})
        assert created["ttlMs"] == 1500
        assert wait_status(srv, created["taskId"], {"completed"})
        time.sleep(1.6)
        assert get(srv, created["taskId"])[1]["error"]["code"] == -32602


def test_status_notifications_through_subscriptions_listen(data_env: dict[str, str]) -> None:
    with HttpServer("--plugin", "conformance", env=data_env) as srv:
        task_id = start(srv, "slow_compute", {"seconds": 0.5})["taskId"]
        c = srv.conn(timeout=10)
        body = {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
                "params": {"notifications": {"taskIds": [task_id, "not-mine"]}, "_meta": meta()}}
        c.request("POST", "/mcp", json.dumps(body), {"Content-Type": "application/json",
                                                     "Accept": "application/json, text/event-stream",
                                                     **modern_headers("subscriptions/listen")})
        resp = c.getresponse()
        seen: list[dict[str, Any]] = []
        while not any(m.get("method") == "notifications/tasks" and m["params"]["status"] == "completed" for m in seen):
            line = resp.fp.readline()
            if line.startswith(b"data:"):
                seen.append(json.loads(line[5:]))
        ack = seen[0]
        assert ack["method"] == "notifications/subscriptions/acknowledged" and ack["params"]["notifications"]["taskIds"] == [task_id]
        final = seen[-1]["params"]
        assert final["taskId"] == task_id and final["result"]["content"][0]["text"].startswith("Computed")
        c.close()


def test_a_thousand_concurrent_tasks_in_bounded_memory(data_env: dict[str, str]) -> None:
    env = {**data_env, "MCPKIT_MAX_TASKS_PER_PRINCIPAL": "5000", "MCPKIT_MAX_LIVE_TASKS": "5000",
           "MCPKIT_TASK_ESCALATE_MS": "0"}
    with HttpServer("--plugin", "conformance", env=env) as srv:
        url = f"http://127.0.0.1:{srv.port}/mcp"
        before = _rss_mib(srv.proc.pid)

        async def main() -> list[str]:
            async with mc.connect(url, mode="stateless", tasks=True, prefetch_tools=False) as client:
                handles: list[Any] = []

                async def one() -> None:
                    handles.append(await client.start_tool("slow_compute", {"seconds": 3}, validate=False))

                async with trio.open_nursery() as nursery:
                    for _ in range(1000):
                        nursery.start_soon(one)
                return [h.task_id for h in handles]

        ids = trio.run(main)
        assert len(set(ids)) == 1000
        grown = _rss_mib(srv.proc.pid) - before
        print(f"1,000 live tasks: RSS {before:.1f} -> {before + grown:.1f} MiB")
        assert grown < 80, f"1,000 live tasks took {grown:.1f} MiB"
        assert wait_status(srv, ids[-1], {"completed"}, timeout=30)


def test_index_repository_runs_as_a_task_with_status_messages(tmp_path: Path, data_env: dict[str, str]) -> None:
    repo = tmp_path / "repo"
    for i in range(300):
        (repo / f"d{i % 7}").mkdir(parents=True, exist_ok=True)
        (repo / f"d{i % 7}" / f"f{i}.py").write_text(f"VALUE_{i} = {i}\n" * 50)
    env = {**data_env, "MCPKIT_TASK_ESCALATE_MS": "0", "MCPKIT_PLUGIN__CODESEARCH__ROOTS": json.dumps([str(tmp_path)])}
    with HttpServer("--plugin", "codesearch", env=env) as srv:
        url = f"http://127.0.0.1:{srv.port}/mcp"
        states: list[dict[str, Any]] = []

        async def main() -> Any:
            async with mc.connect(url, mode="stateless", tasks=True) as client:
                handle = await client.start_tool("index_repository", {"repository": str(repo)})
                assert isinstance(handle, mc.TaskHandle)
                return await handle.wait(on_status=states.append)

        result = trio.run(main)
        assert result.structured["status"] == "completed" and result.structured["files_added"] == 300
        assert states[-1]["status"] == "completed"


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def test_cli_task_commands(data_env: dict[str, str]) -> None:
    with HttpServer("--plugin", "conformance", env=data_env) as srv:
        url = f"http://127.0.0.1:{srv.port}/mcp"
        env = {**os.environ, **data_env}
        done = subprocess.run([MCPKIT, "call", url, "slow_compute", "seconds=0.5", "label=cli", "--task"],
                              capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0 and done.stdout.strip() == "Computed cli after 0.5 s"
        assert "task: completed" in done.stderr and "mcpkit task get" in done.stderr
        task_id = start(srv, "slow_compute", {"seconds": 30})["taskId"]
        shown = subprocess.run([MCPKIT, "task", "get", url, task_id], capture_output=True, text=True, timeout=30, env=env)
        assert shown.returncode == 0 and json.loads(shown.stdout)["status"] == "working"
        cancelled = subprocess.run([MCPKIT, "task", "cancel", url, task_id], capture_output=True, text=True, timeout=30, env=env)
        assert cancelled.returncode == 0
        assert wait_status(srv, task_id, {"cancelled"})
        missing = subprocess.run([MCPKIT, "task", "get", url, "nope"], capture_output=True, text=True, timeout=30, env=env)
        assert missing.returncode == 2 and "Unknown task" in missing.stderr


async def test_tasks_in_the_in_memory_pair() -> None:
    """mcpkit.testing serves task-capable tools too (tasks kept in memory there)."""
    from mcpkit.testing import connect

    @mcpkit.tool(task="optional")
    async def slow(ctx: mcpkit.Context) -> str:
        await ctx.start_task()
        await ctx.report_progress(1, 2, "half way")
        return "done"

    class Plugin:
        @mcpkit.hookimpl
        def mcpkit_tools(self, config: dict) -> list:
            return [slow]

    async with connect(Plugin(), mode="stateless", tasks=True) as client:
        assert client.app.settings.task_store == "memory"
        handle = await client.start_tool("slow", {})
        assert isinstance(handle, mc.TaskHandle)
        assert (await handle.wait()).text == "done"
