"""Shutdown answers every request (issue 22, item 9): real `mcpkit serve` processes with calls
in flight get a real SIGTERM, or lose their stdin; each call still running gets a JSON-RPC
error (-32000, "server shutting down") before the process exits, within a bound."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from mcpkit.server.context import STOP_BOUND_S
from mcpkit.transports.stdio import EOF_GRACE_S

from .helpers import Server
from .http_helpers import HttpServer, sse_data, sse_events, wait_until
from .shutdown_plugin import plugin_env

CALLS = 20


@pytest.fixture
def shutdown_env(tmp_path: Path) -> dict[str, str]:
    return plugin_env(tmp_path / "site")


def _start_calls(srv: Server, tool: str, ids: list[Any]) -> None:
    """Send the calls, then a ping: once it is answered every call has been read (each is
    running, or is stopped as it starts)."""
    srv.initialize()
    for rid in ids:
        srv.send({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
    assert srv.request("ping")["result"] == {}


def _answers(srv: Server, count: int, timeout: float) -> dict[Any, dict[str, Any]]:
    out: dict[Any, dict[str, Any]] = {}
    deadline = time.monotonic() + timeout
    while len(out) < count:
        msg = srv.recv(max(0.01, deadline - time.monotonic()))
        if "id" in msg and "method" not in msg:
            out[msg["id"]] = msg
    return out


def _is_shutdown_error(msg: dict[str, Any]) -> bool:
    error = msg.get("error") or {}
    return error.get("code") == -32000 and "shutting down" in error.get("message", "")


def test_stdio_sigterm_answers_every_call_in_flight(shutdown_env: dict[str, str]) -> None:
    with Server("--plugin", "shutdown", env=shutdown_env) as srv:
        ids = list(range(1, CALLS + 1))
        _start_calls(srv, "nap", ids)
        started = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        answers = _answers(srv, CALLS, timeout=STOP_BOUND_S)
        assert srv.proc.wait(STOP_BOUND_S) == 0
        took = time.monotonic() - started
        assert sorted(answers) == ids and all(_is_shutdown_error(m) for m in answers.values()), answers
        assert took < STOP_BOUND_S, took
        assert b"Traceback" not in srv.stderr


def test_stdio_end_of_input_answers_what_outlives_the_grace(shutdown_env: dict[str, str]) -> None:
    with Server("--plugin", "shutdown", env=shutdown_env) as srv:
        _start_calls(srv, "nap", ["a", "b", "c"])
        started = time.monotonic()
        assert srv.proc.stdin is not None
        srv.proc.stdin.close()
        answers = _answers(srv, 3, timeout=EOF_GRACE_S + STOP_BOUND_S)
        assert time.monotonic() - started >= EOF_GRACE_S - 0.1  # the grace was given first
        assert all(_is_shutdown_error(m) for m in answers.values()), answers
        assert srv.proc.wait(STOP_BOUND_S) == 0


def test_stdio_a_tool_that_ignores_cancellation_cannot_hold_the_exit(shutdown_env: dict[str, str]) -> None:
    with Server("--plugin", "shutdown", env=shutdown_env) as srv:
        srv.initialize()
        srv.send({"jsonrpc": "2.0", "id": "deaf", "method": "tools/call", "params": {"name": "deaf", "arguments": {}}})
        _start_calls(srv, "nap", ["nap"])
        started = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        answers = _answers(srv, 2, timeout=2 * STOP_BOUND_S)
        assert srv.proc.wait(2 * STOP_BOUND_S) == 1  # it did not stop cleanly: say so
        assert time.monotonic() - started < 2 * STOP_BOUND_S
        assert _is_shutdown_error(answers["nap"]) and _is_shutdown_error(answers["deaf"]), answers
        stderr = srv.all_stderr()
        assert b"did not stop within" in stderr and b"Traceback" not in stderr


def test_stdio_batch_in_flight_is_answered_as_a_batch(shutdown_env: dict[str, str]) -> None:
    with Server("--plugin", "shutdown", env=shutdown_env) as srv:
        srv.initialize("2025-03-26")  # the last version with batches
        srv.send_raw(json.dumps([{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "nap", "arguments": {}}}
                                 for i in (1, 2)]).encode())
        assert srv.request("ping")["result"] == {}
        srv.proc.send_signal(signal.SIGTERM)
        batch = srv.recv(STOP_BOUND_S)
        assert isinstance(batch, list) and sorted(m["id"] for m in batch) == [1, 2]
        assert all(_is_shutdown_error(m) for m in batch)
        assert srv.proc.wait(STOP_BOUND_S) == 0


# -- HTTP ----------------------------------------------------------------------------------------
GRACE_S = 1.0
_STATELESS_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


def _post(port: int, body: dict[str, Any], headers: dict[str, str], path: str = "/mcp") -> tuple[int, str, bytes]:
    """One POST on its own connection: status, content type, the whole body ("" and b"" when
    the connection closed without an answer)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **headers})
        resp = conn.getresponse()
        return resp.status, resp.getheader("content-type") or "", resp.read()
    except (http.client.HTTPException, OSError):
        return 0, "", b""
    finally:
        conn.close()


def _answer_of(status: int, content_type: str, body: bytes) -> dict[str, Any]:
    """The JSON-RPC answer in a JSON body or as the last SSE event."""
    assert status, "the connection closed without an answer"
    if content_type.startswith("text/event-stream"):
        return json.loads(sse_data(body)[-1])
    return json.loads(body)


def _nap(rid: Any, stateless: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "nap", "arguments": {}}
    if stateless:
        params["_meta"] = _STATELESS_META
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


@pytest.mark.parametrize("kind", ["mcpkit", "hypercorn"])
def test_http_calls_still_running_after_the_grace_get_an_error_answer(shutdown_env: dict[str, str], kind: str) -> None:
    env = {**shutdown_env, "MCPKIT_HTTP_SERVER": kind, "MCPKIT_SHUTDOWN_GRACE_S": str(GRACE_S)}
    with HttpServer("--plugin", "shutdown", env=env) as srv:
        sid = srv.initialize()
        stateless = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28",
                     "Mcp-Method": "tools/call", "Mcp-Name": "nap"}
        in_session = {"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
        calls = {  # name -> (body, headers): JSON and SSE answers, stateless and in a session
            "stateless-json": (_nap(1, True), stateless),
            "stateless-json-2": (_nap(2, True), stateless),
            "stateless-sse": (_nap(3, True), {**stateless, "Accept": "text/event-stream, application/json"}),
            "session-json": (_nap(4, False), in_session),
            "session-sse": (_nap(5, False), {**in_session, "Accept": "text/event-stream, application/json"}),
        }
        results: dict[str, tuple[int, str, bytes]] = {}
        threads = [threading.Thread(target=lambda n=name, c=call: results.__setitem__(n, _post(srv.port, *c)))
                   for name, call in calls.items()]
        for t in threads:
            t.start()
        legacy = _LegacyClient(srv.port)
        legacy.call(_nap("legacy", False))
        time.sleep(0.5)  # every call is running
        started = time.monotonic()
        srv.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(GRACE_S + STOP_BOUND_S + 5)
        answers = {name: _answer_of(*results[name]) for name in calls}
        answers["legacy"] = legacy.answer("legacy", timeout=GRACE_S + STOP_BOUND_S + 5)
        assert srv.proc.wait(GRACE_S + STOP_BOUND_S + 5) == 0
        took = time.monotonic() - started
        assert all(_is_shutdown_error(a) for a in answers.values()), answers
        assert results["stateless-json"][0] == 503 and results["session-json"][0] == 503  # retry elsewhere
        assert results["stateless-sse"][1].startswith("text/event-stream") and results["session-sse"][1].startswith("text/event-stream")
        assert GRACE_S <= took < GRACE_S + STOP_BOUND_S + 1, took  # the grace first, then the answers, bounded
        assert b"Traceback" not in srv.stderr


class _LegacyClient:
    """The 2024-11-05 HTTP+SSE transport: a GET /sse stream and POSTs to /messages."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        self.conn.request("GET", "/sse", headers={"Accept": "text/event-stream"})
        self.events = sse_events(self.conn.getresponse())
        self.endpoint = next(self.events)["data"]
        self.call({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "tests", "version": "0"}}})
        assert self.answer("init", timeout=10)["result"]
        self.call({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, msg: dict[str, Any]) -> None:
        assert _post(self.port, msg, {}, self.endpoint)[0] == 202

    def answer(self, rid: Any, timeout: float) -> dict[str, Any]:
        self.conn.sock.settimeout(timeout)  # type: ignore[union-attr]
        for event in self.events:
            msg = json.loads(event["data"])
            if msg.get("id") == rid:
                return msg
        raise AssertionError(f"the stream ended without an answer to {rid!r}")


# -- --workers: orphans and the access log (issue 22, item 10; issue 23) ---------------------------
def _descendants(pid: int) -> set[int]:
    out: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            with open(f"/proc/{parent}/task/{parent}/children") as f:
                kids = {int(k) for k in f.read().split()}
        except OSError:
            continue
        out |= kids
        todo.extend(kids)
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited
    except OSError:
        return False


@pytest.mark.parametrize("kind", ["mcpkit", "hypercorn"])
def test_workers_exit_when_their_parent_is_killed(kind: str) -> None:
    with HttpServer("--plugin", "hello", "--workers", "2", env={"MCPKIT_HTTP_SERVER": kind}) as srv:
        pids: set[int] = set()
        assert wait_until(lambda: len(pids.update([json.loads(srv.call("GET", "/healthz")[2])["pid"]]) or pids) == 2, timeout=15)
        family = _descendants(srv.proc.pid)
        assert pids <= family
        srv.proc.kill()  # SIGKILL: the parent can pass nothing on
        srv.proc.wait()
        gone = wait_until(lambda: not any(_alive(pid) for pid in family), timeout=5)
        left = sorted(pid for pid in family if _alive(pid))
        for pid in left:  # do not leave them behind when the test fails
            os.kill(pid, signal.SIGKILL)
        assert gone, f"still running after their parent died: {left}"
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", srv.port), timeout=1)  # nobody serves the port


@pytest.mark.parametrize("kind", ["mcpkit", "hypercorn"])
def test_workers_write_the_access_log(kind: str) -> None:
    with HttpServer("--plugin", "hello", "--workers", "2", env={"MCPKIT_HTTP_SERVER": kind}) as srv:
        srv.call("GET", "/healthz", headers={"X-Request-ID": "from-a-worker"})
        assert wait_until(lambda: b'"GET /healthz" 200' in srv.stderr and b"request_id=from-a-worker" in srv.stderr)
        assert srv.stop() == 0
