"""Shutdown answers every request (issue 22, item 9): real `mcpkit serve` processes with calls
in flight get a real SIGTERM, or lose their stdin; each call still running gets a JSON-RPC
error (-32000, "server shutting down") before the process exits, within a bound."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from mcpkit.transports.stdio import EOF_GRACE_S, STOP_BOUND_S

from .helpers import Server
from .shutdown_plugin import plugin_env

CALLS = 20


@pytest.fixture
def shutdown_env(tmp_path: Path) -> dict[str, str]:
    return plugin_env(tmp_path / "site")


def _start_calls(srv: Server, tool: str, ids: list[Any]) -> None:
    """Send the calls, then a ping: once it is answered every call has been read and runs."""
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
        assert b"did not stop within" in srv.stderr and b"Traceback" not in srv.stderr


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
