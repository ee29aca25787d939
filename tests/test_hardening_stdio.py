"""Hostile and careless input on stdio: every line gets an answer, nothing kills the server.

Each test here reproduces a defect the fuzz campaign found (issue 11) against a real
``mcpkit serve`` process.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from .helpers import MCPKIT, Server
from .hostile_plugin import plugin_env


@pytest.fixture
def hostile(tmp_path: Path) -> dict[str, str]:
    return plugin_env(tmp_path / "site")


def _alive(srv: Server) -> None:
    assert srv.request("ping")["result"] == {}


def test_invalid_utf8_is_a_parse_error_and_the_server_lives(hello: Server) -> None:
    hello.initialize()
    hello.send_raw(b'{"jsonrpc":"2.0","id":1,"method":"\xff"}')
    reply = hello.recv()
    assert reply["error"]["code"] == -32700 and "UTF-8" in reply["error"]["message"]
    # inside the arguments too: -32700 before any tool sees it, no traceback logged
    hello.send_raw(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"greet","arguments":{"name":"\xc3\x28"}}}')
    assert hello.recv()["error"]["code"] == -32700
    _alive(hello)
    assert b"Traceback" not in hello.stderr


@pytest.mark.parametrize("line", [
    b"[" * 1500,
    b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":' + b'{"a":' * 1000 + b"1" + b"}" * 1000 + b"}}",
    b'{"jsonrpc":"2.0","id":1,"method":"ping","params":' + b"[" * 200 + b"]" * 200 + b"}",
])
def test_deep_nesting_is_a_parse_error_and_the_server_lives(hello: Server, line: bytes) -> None:
    hello.initialize()
    hello.send_raw(line)
    reply = hello.recv()
    assert reply["error"]["code"] == -32700 and "nests deeper than 128" in reply["error"]["message"]
    _alive(hello)
    assert b"Traceback" not in hello.stderr


def test_nesting_within_the_limit_is_served(tmp_path: Path, hostile: dict[str, str]) -> None:
    value: object = 1
    for _ in range(100):
        value = [value]
    with Server("--plugin", "hostile", env=hostile) as srv:
        srv.initialize()
        reply = srv.request("tools/call", {"name": "echo", "arguments": {"value": value}})
        assert reply["result"]["isError"] is False and reply["result"]["structuredContent"]["result"] == value


def test_oversized_line_is_refused_and_the_next_line_served(hello: Server) -> None:
    hello.initialize()
    hello.send_raw(b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"pad":"' + b"x" * (5 * 1024 * 1024) + b'"}}')
    reply = hello.recv(timeout=20)
    assert reply["id"] is None and reply["error"]["code"] == -32600
    assert "max_message_bytes" in reply["error"]["message"]
    _alive(hello)


def test_message_limit_is_a_setting(tmp_path: Path) -> None:
    with Server("--plugin", "hello", env={"MCPKIT_MAX_MESSAGE_BYTES": "1000"}) as srv:
        srv.initialize()
        srv.send_raw(b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"pad":"' + b"x" * 2000 + b'"}}')
        assert "1000 bytes" in srv.recv()["error"]["message"]
        _alive(srv)


def test_stuck_sync_tool_cannot_starve_the_others(hostile: dict[str, str]) -> None:
    with Server("--plugin", "hostile", env=hostile) as srv:
        srv.initialize()
        started = time.monotonic()
        for i in range(60):
            srv.send({"jsonrpc": "2.0", "id": f"s{i}", "method": "tools/call", "params": {"name": "stuck", "arguments": {}}})
        # every other plain tool still answers at once
        for _ in range(5):
            t0 = time.monotonic()
            reply = srv.request("tools/call", {"name": "quick", "arguments": {}}, timeout=5)
            assert reply["result"]["content"][0]["text"] == "quick"
            assert time.monotonic() - t0 < 1.0
        # and the stuck calls answered their timeout on time, slot or no slot
        stuck = [m for m in srv.seen if str(m.get("id", "")).startswith("s")]
        while len(stuck) < 60:
            stuck.append(srv.recv(timeout=5))
        assert all(m["result"]["isError"] and "timed out" in m["result"]["content"][0]["text"] for m in stuck)
        assert time.monotonic() - started < 5


def test_requests_in_flight_are_capped_per_connection(hostile: dict[str, str]) -> None:
    with Server("--plugin", "hostile", env={**hostile, "MCPKIT_MAX_CONCURRENT_REQUESTS": "3"}) as srv:
        srv.initialize()
        for i in range(4):
            srv.send({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "stuck", "arguments": {"seconds": 0.3}}})
        first = srv.recv()
        assert first["id"] == 3 and first["error"]["code"] == -32000 and "max_concurrent_requests" in first["error"]["message"]
        assert sorted(srv.recv()["id"] for _ in range(3)) == [0, 1, 2]
        _alive(srv)


def test_stdin_from_a_regular_file(tmp_path: Path) -> None:
    script = tmp_path / "input.jsonl"
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet", "arguments": {"name": "file"}}},
    ]
    script.write_text("".join(json.dumps(m) + "\n" for m in lines))
    with script.open("rb") as stdin:
        proc = subprocess.run([MCPKIT, "serve", "--plugin", "hello"], stdin=stdin, capture_output=True, timeout=30)
    assert proc.returncode == 0, proc.stderr.decode()
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert [r["id"] for r in replies] == [0, 1] and "file" in replies[1]["result"]["content"][0]["text"]
    assert b"Traceback" not in proc.stderr and b"Error" not in proc.stderr


def test_a_request_waiting_on_a_client_that_never_answers_times_out(hostile: dict[str, str]) -> None:
    with Server("--plugin", "hostile", env={**hostile, "MCPKIT_DEFAULT_TIMEOUT": "0.5"}) as srv:
        srv.initialize(capabilities={"elicitation": {}})
        reply = srv.request("prompts/get", {"name": "ask_first"})
        assert any(m.get("method") == "elicitation/create" for m in srv.seen)  # asked, never answered
        assert reply["error"]["code"] == -32001 and "timed out after 0.5 s" in reply["error"]["message"]
        _alive(srv)


def test_errors_echo_a_huge_value_once_and_bounded(hello: Server) -> None:
    """A 3 MiB URI (tool name, prompt name, method) comes back clipped with a marker, once."""
    hello.initialize()
    huge = "x" * (3 * 1024 * 1024)
    asks = [("resources/read", {"uri": f"hello://{huge}"}), ("tools/call", {"name": huge, "arguments": {}}),
            ("prompts/get", {"name": huge}), (huge, {})]
    for method, params in asks:
        hello.send({"jsonrpc": "2.0", "id": 7, "method": method, "params": params})
        line = hello.lines.get(timeout=30)
        assert line is not None and len(line) < 1000, len(line or b"")
        error = json.loads(line)["error"]
        assert line.count(b"x" * 150) == 1 and "more characters]" in line.decode(), error
    hello.send({"jsonrpc": "2.0", "id": 8, "method": "resources/read", "params": {"uri": "hello://nothing"}})
    error = json.loads(hello.lines.get(timeout=10))["error"]  # the spec's shape: the URI in data
    assert error == {"code": -32002, "message": "Resource not found", "data": {"uri": "hello://nothing"}}
    _alive(hello)
