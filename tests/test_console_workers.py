"""The console with `--workers 2`, on mcpkit's server and on hypercorn (issue 25): whichever worker answers the page, it shows the
calls of both — each worker writes its state to the deployment's snapshot folder once a second and
the answering one merges the others' (docs/console.md)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .http_helpers import ACCEPT, HttpServer, modern_headers

PLUGIN = str(Path(__file__).parent / "console_plugin.py")
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
CALLS = 6


def state(srv: HttpServer) -> dict[str, Any]:
    status, _, body = srv.call("GET", "/console/api/state")  # a new connection each time: any worker may answer
    assert status == 200
    return json.loads(body)


def slow_call(srv: HttpServer, answers: list[Any]) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "slow", "arguments": {"seconds": 3}, "_meta": META}}
    status, _, raw = srv.call("POST", "/mcp", body, headers={**modern_headers("tools/call", "slow"), "Accept": ACCEPT})
    answers.append((status, json.loads(raw)))


@pytest.mark.parametrize("server", ["mcpkit", "hypercorn"])
def test_every_worker_shows_the_calls_of_all(server: str) -> None:
    with HttpServer("--console", "--workers", "2", "--server", server, PLUGIN, "--plugin", "console_plugin") as srv:
        deadline = time.monotonic() + 10
        while len(state(srv)["workers"]) < 2:  # both have written their first snapshot
            assert time.monotonic() < deadline, "the second worker's snapshot never came"
            time.sleep(0.2)
        answers: list[Any] = []
        threads = [threading.Thread(target=slow_call, args=(srv, answers)) for _ in range(CALLS)]
        for t in threads:
            t.start()
        seen = []
        deadline = time.monotonic() + 2.5
        while time.monotonic() < deadline:
            view = state(srv)
            if view["inflight_count"] == CALLS:
                seen.append(view)
            time.sleep(0.1)
        assert len(seen) >= 3, "the merged view never showed all the calls in flight"
        for view in seen:  # coherent whichever worker answered
            assert len(view["workers"]) == 2 and {c["worker"] for c in view["inflight"]} <= set(view["workers"])
            assert [c["target"] for c in view["inflight"]] == ["slow"] * CALLS
        print("answered by workers", sorted({v["worker"] for v in seen}), "calls ran on",
              sorted({c["worker"] for c in seen[-1]["inflight"]}))
        for t in threads:
            t.join(10)
        assert [a[0] for a in answers] == [200] * CALLS
        deadline = time.monotonic() + 4
        while True:
            view = state(srv)
            if view["inflight_count"] == 0 and view["tools"].get("slow", {}).get("calls") == CALLS:
                break
            assert time.monotonic() < deadline, view
            time.sleep(0.2)
        assert [c["target"] for c in view["recent"]] == ["slow"] * CALLS
        assert view["tools"]["slow"]["p50_ms"] >= 2900
        # a try-it call lands on one worker and is seen from the other too
        status, _, body = srv.call("POST", "/console/api/call", {"tool": "repeat", "arguments": {"word": "w", "times": 2}})
        assert status == 200 and json.loads(body)["result"]["content"][0]["text"] == "w w"
        deadline = time.monotonic() + 4
        while state(srv)["tools"].get("repeat", {}).get("calls") != 1:
            assert time.monotonic() < deadline, "the try-it call never showed"
            time.sleep(0.2)
        time.sleep(1.2)  # both workers' snapshots are renewed by now: every answer has it
        assert [state(srv)["tools"]["repeat"]["calls"] for _ in range(8)] == [1] * 8
