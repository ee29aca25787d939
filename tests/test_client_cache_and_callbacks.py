"""mcpkit.client against the scripted peer: the tool cache, retries and broken connections,
requests from the server, progress and log callbacks (see test_client_behaviour.py for how the
peer and its wire log work)."""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio

import mcpkit.client as mc
from mcpkit.client import errors as E
from mcpkit.client.session import Handlers, Session
from mcpkit.httpclient import HttpClient

from .http_helpers import HttpServer


from .client_peer import PEER, Wire, free_port, fresh_era_memory, handshake, peer, wait_for, wire  # noqa: F401


# --- the tool cache ------------------------------------------------------------------------------

async def test_tool_list_is_fetched_once_right_after_connecting(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake") as client:
        await client.ping()
        assert wire.methods() == ["initialize", "notifications/initialized", "tools/list", "ping"]
        names = [t["name"] for t in await client.list_tools()]
        assert "echo" in names and "added" not in names
        await client.call_tool("echo", {"text": "a"})
        await client.call_tool("add", {"a": 1, "b": 2})
        await client.ping()
        assert len(wire.received("tools/list")) == 1


async def test_no_prefetch_when_turned_off(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake", prefetch_tools=False) as client:
        await client.ping()
        assert wire.methods() == ["initialize", "notifications/initialized", "ping"]
        await client.call_tool("echo", {"text": "a"})  # the first call fetches the schema
        await client.ping()
        assert wire.methods()[3:] == ["tools/list", "tools/call", "ping"]


async def test_server_ttl_expires_and_the_next_use_refetches(wire: Wire) -> None:
    async with mc.connect(peer("--era", "modern", "--ttl-ms", "300"), tools_ttl=600) as client:
        await client.call_tool("echo", {"text": "fresh"})
        await client.list_tools()
        await client.ping()
        assert wire.traffic() == ["server/discover", "tools/list", "tools/call"]
        await trio.sleep(0.35)
        await client.call_tool("echo", {"text": "stale"})
        await client.list_tools()
        await client.ping()
        assert wire.traffic()[3:] == ["tools/list", "tools/call"]
        await trio.sleep(0.35)
        await client.list_tools()
        await client.ping()
        assert wire.traffic()[5:] == ["tools/list"]


async def test_server_ttl_wins_over_the_setting(wire: Wire) -> None:
    async with mc.connect(peer("--era", "modern", "--ttl-ms", "60000"), tools_ttl=0.1) as client:
        await trio.sleep(0.2)
        await client.list_tools()
        await client.call_tool("echo", {"text": "x"})
        await client.ping()
        assert len(wire.received("tools/list")) == 1


@pytest.mark.parametrize("ttl", ["0", "-5"])
async def test_zero_or_negative_ttl_is_immediately_stale(wire: Wire, ttl: str) -> None:
    async with mc.connect(peer("--era", "modern", "--ttl-ms", ttl), tools_ttl=600) as client:
        await client.list_tools()
        await client.list_tools()
        await client.ping()
        assert len(wire.received("tools/list")) == 3


async def test_tools_ttl_setting_applies_without_server_ttl(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake", tools_ttl=0.3) as client:
        await client.list_tools()
        await client.ping()
        assert len(wire.received("tools/list")) == 1
        await trio.sleep(0.35)
        await client.call_tool("echo", {"text": "x"})
        await client.ping()
        assert wire.methods()[-3:] == ["tools/list", "tools/call", "ping"]
    async with mc.connect(handshake(), mode="handshake") as client:  # default: 300 s
        await trio.sleep(0.35)
        await client.list_tools()
        await client.ping()
        assert len([e for e in wire.received("tools/list") if e["pid"] == wire.pids()[-1]]) == 1


async def test_list_changed_notification_invalidates_the_cache(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake") as client:
        assert "added" not in [t["name"] for t in await client.list_tools()]
        await client.call_tool("changed")
        await client.ping()
        assert len(wire.received("tools/list")) == 1  # invalidated, not refetched eagerly
        assert "added" in [t["name"] for t in await client.list_tools()]
        await client.list_tools()
        await client.ping()
        assert len(wire.received("tools/list")) == 2


async def test_list_changed_while_the_list_is_in_flight_is_not_lost(wire: Wire) -> None:
    """The peer answers tools/list and says list_changed in the same write: the list just
    received may already be out of date, so the next use must fetch it again."""
    async with mc.connect(handshake("--changed-after-list"), mode="handshake") as client:
        await client.ping()
        assert len(wire.received("tools/list")) == 1
        assert "added" in [t["name"] for t in await client.list_tools()]
        await client.ping()
        assert len(wire.received("tools/list")) == 2


async def test_invalidate_tools_by_hand(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake") as client:
        client.invalidate_tools()
        await client.list_tools()
        await client.list_tools()
        await client.list_tools(refresh=True)
        await client.ping()
        assert len(wire.received("tools/list")) == 3


INVALID_ARGUMENTS = [
    ({}, "name", "is required"),
    ({"name": 5}, "name", "expected string, got an integer"),
    ({"name": "x", "count": "3"}, "count", "expected integer, got a string"),
    ({"name": "x", "count": -1}, "count", "must be at least 0"),
    ({"name": "x", "mode": "medium"}, "mode", "must be one of 'fast', 'careful'"),
    ({"name": "x", "opts": {"flag": True}}, "opts.depth", "is required"),
    ({"name": "x", "opts": {"depth": 1, "flag": "yes"}}, "opts.flag", "expected boolean"),
    ({"name": "x", "tags": ["a", 3]}, "tags[1]", "expected string"),
    ({"name": "x", "bogus": 1}, "bogus", "is not an accepted argument"),
]


async def test_invalid_arguments_never_reach_the_peer(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake") as client:
        for arguments, field, rule in INVALID_ARGUMENTS:
            with pytest.raises(E.InvalidArguments) as info:
                await client.call_tool("strict", arguments)
            assert info.value.code == "E103"
            assert info.value.field == field, arguments
            assert f"argument {field!r}" in info.value.message and rule in info.value.message, info.value.message
        await client.ping()
        assert wire.calls() == []
        assert wire.methods() == ["initialize", "notifications/initialized", "tools/list", "ping"]
        # a good call goes through, and validate=False leaves the judgement to the server
        assert (await client.call_tool("strict", {"name": "x", "mode": "fast", "opts": {"depth": 2}})).text == "ok"
        await client.call_tool("strict", {"bogus": 1}, validate=False)
        await client.ping()
        assert [c["params"]["arguments"] for c in wire.calls()] == [
            {"name": "x", "mode": "fast", "opts": {"depth": 2}}, {"bogus": 1}]


# --- retries and broken connections --------------------------------------------------------------

async def test_http_connect_is_retried_until_the_server_is_up(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="mcpkit.client")
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    servers: list[HttpServer] = []

    def retried() -> bool:
        return any("retrying" in r.getMessage() and str(port) in r.getMessage() for r in caplog.records)

    async def start_server_once_the_client_has_failed() -> None:
        await wait_for(retried, timeout=5)
        servers.append(await trio.to_thread.run_sync(lambda: HttpServer("--port", str(port), "--plugin", "hello")))

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(start_server_once_the_client_has_failed)
            async with mc.connect(url, retries=7, backoff=0.1) as client:
                # the first attempts found nothing there (the server starts only after one failed);
                # the server may be answering before the thread that started it has returned
                assert retried(), "connected at the first attempt, before the server was started"
                assert client.description.transport == "http"
                assert (await client.call_tool("greet", {"name": "Ada"})).text == "Hello, Ada."
    finally:
        for server in servers:
            server.__exit__()


async def test_http_connect_without_retries_fails_at_once() -> None:
    port = free_port()
    start = trio.current_time()
    with pytest.raises(E.ConnectionFailed) as info:
        async with mc.connect(f"http://127.0.0.1:{port}/mcp", retries=0, backoff=5):
            pytest.fail("connected to nothing")
    assert trio.current_time() - start < 2
    assert info.value.code == "E102" and str(port) in info.value.message


@pytest.mark.parametrize("mode", ["auto", "handshake", "stateless"])
async def test_http_connect_attempts_are_retries_plus_one(monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    attempts: list[str] = []
    real_send = HttpClient._send  # the client transport's requests (mcpkit.httpclient), counted on their way

    async def counting_send(self, method, *args, **kwargs):
        attempts.append(method)
        return await real_send(self, method, *args, **kwargs)

    monkeypatch.setattr(HttpClient, "_send", counting_send)
    port = free_port()
    with pytest.raises(E.ConnectionFailed):
        async with mc.connect(f"http://127.0.0.1:{port}/mcp", mode=mode, retries=2, backoff=0.01):
            pytest.fail("connected to nothing")
    assert attempts == ["POST"] * 3


async def test_stdio_call_is_not_repeated_when_the_peer_dies_mid_call(wire: Wire) -> None:
    with pytest.raises(E.ConnectionClosed) as info:
        async with mc.connect(handshake(), mode="handshake", retries=3) as client:
            await client.call_tool("exit")
    assert info.value.code == "E105"
    assert "exited (code 3)" in info.value.message
    assert len(wire.calls("exit")) == 1


async def test_calls_after_the_peer_died_fail_fast(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake") as client:
        with pytest.raises(E.ConnectionClosed):
            await client.call_tool("exit")
        with trio.fail_after(1):
            with pytest.raises(E.ConnectionClosed):
                await client.call_tool("echo", {"text": "anyone?"})
    assert len(wire.calls()) == 1


@pytest.fixture
def http_peer(wire: Wire):
    proc = subprocess.Popen(peer("--http", "0"), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("listening "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.kill()
        proc.wait()


async def test_http_call_is_not_retried_when_the_connection_drops_after_sending(http_peer: str, wire: Wire) -> None:
    async with mc.connect(http_peer, mode="handshake", retries=3, backoff=0.01) as client:
        assert client.description.transport == "http"
        with pytest.raises(E.ConnectionClosed) as info:
            await client.call_tool("exit")
        assert info.value.code == "E105"
        # the server is still there; only the dropped call failed
        assert (await client.call_tool("echo", {"text": "again"})).text == "again"
        assert [c["params"]["name"] for c in wire.calls()] == ["exit", "echo"]
        assert len([e for e in wire.entries() if e["dir"] == "dropped"]) == 1


# --- requests from the server --------------------------------------------------------------------

ROOTS = [{"uri": "file:///work/project", "name": "project"}]


async def test_server_requests_are_answered_by_the_callbacks(wire: Wire) -> None:
    seen: dict[str, Any] = {}

    async def on_elicitation(params: dict[str, Any]) -> dict[str, Any]:
        seen["elicitation"] = params
        await trio.sleep(0.01)
        return {"action": "accept", "content": {"name": "Ada"}}

    def on_sampling(params: dict[str, Any]) -> dict[str, Any]:
        seen["sampling"] = params
        return {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}

    async with mc.connect(handshake(), mode="handshake", on_elicitation=on_elicitation,
                          on_sampling=on_sampling, roots=ROOTS) as client:
        result = await client.call_tool("ask")
    assert result.structured == {
        "ping": {"result": {}},
        "roots/list": {"result": {"roots": ROOTS}},
        "sampling/createMessage": {"result": {"role": "assistant", "content": {"type": "text", "text": "hi"},
                                              "model": "m"}},
        "elicitation/create": {"result": {"action": "accept", "content": {"name": "Ada"}}},
    }
    assert seen["elicitation"]["message"] == "Your name?"
    assert seen["sampling"]["maxTokens"] == 5
    caps = wire.received("initialize")[0]["msg"]["params"]["capabilities"]
    assert caps == {"roots": {"listChanged": False}, "sampling": {}, "elicitation": {"form": {}}}
    # each answer went back with the id of the server's request
    asked = [e["msg"]["id"] for e in wire.outbound() if "method" in e["msg"] and "id" in e["msg"]]
    answered = [e["msg"]["id"] for e in wire.inbound() if "method" not in e["msg"]]
    assert asked == answered and len(asked) == 4


async def test_server_requests_without_callbacks_get_method_not_found(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake") as client:
        result = await client.call_tool("ask")
    answers = result.structured
    assert answers["ping"] == {"result": {}}
    for method in ("roots/list", "sampling/createMessage", "elicitation/create"):
        assert answers[method]["error"]["code"] == -32601, method
        assert method in answers[method]["error"]["message"]
    assert wire.received("initialize")[0]["msg"]["params"]["capabilities"] == {}


@pytest.mark.parametrize("kwargs,caps", [
    ({"roots": []}, {"roots": {"listChanged": False}}),
    ({"on_sampling": lambda p: {}}, {"sampling": {}}),
    ({"on_elicitation": lambda p: {}}, {"elicitation": {"form": {}}}),
    ({"on_elicitation": lambda p: {}, "protocol_version": "2025-06-18"}, {"elicitation": {}}),
])
async def test_declared_capabilities_follow_the_callbacks(wire: Wire, kwargs: dict[str, Any],
                                                          caps: dict[str, Any]) -> None:
    async with mc.connect(handshake(), mode="handshake", **kwargs):
        pass
    assert wire.received("initialize")[0]["msg"]["params"]["capabilities"] == caps


async def test_failing_callback_answers_an_internal_error(wire: Wire) -> None:
    def on_sampling(params: dict[str, Any]) -> dict[str, Any]:
        raise ValueError("no model here")

    async with mc.connect(handshake(), mode="handshake", on_sampling=on_sampling) as client:
        result = await client.call_tool("ask")
        assert (await client.call_tool("echo", {"text": "alive"})).text == "alive"
    error = result.structured["sampling/createMessage"]["error"]
    assert error["code"] == -32603 and "no model here" in error["message"]


async def test_server_cancelling_its_request_stops_the_callback(wire: Wire) -> None:
    state: dict[str, Any] = {}

    async def on_elicitation(params: dict[str, Any]) -> dict[str, Any]:
        state["started"] = True
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            state["cancelled"] = True
            raise

    async with mc.connect(handshake(), mode="handshake", on_elicitation=on_elicitation) as client:
        result = await client.call_tool("ask_cancel")
        assert result.structured == {"answered": False, "answer": None}
        # cancelled by the server's notification, not by the connection closing
        await wait_for(lambda: "cancelled" in state, timeout=1)
        assert state == {"started": True, "cancelled": True}
    assert [m for m in wire.methods() if m.startswith("response:")] == []


# --- progress and log callbacks ------------------------------------------------------------------

async def test_progress_and_log_callbacks(wire: Wire) -> None:
    progress: list[tuple[Any, ...]] = []
    logs: list[dict[str, Any]] = []
    notes: list[str] = []

    async def on_progress(value: Any, total: Any, message: Any) -> None:
        progress.append((value, total, message))

    async with mc.connect(handshake(), mode="handshake", on_log=logs.append,
                          on_notification=lambda method, params: notes.append(method)) as client:
        result = await client.call_tool("progress", progress=on_progress)
        assert result.text == "done"
        await wait_for(lambda: len(progress) == 3 and len(logs) == 1 and len(notes) == 5)
        assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
        assert logs == [{"level": "warning", "logger": "scripted", "data": "half way"}]
        assert notes == ["notifications/progress"] * 4 + ["notifications/message"]
        call = wire.calls("progress")[0]
        assert isinstance(call["params"]["_meta"]["progressToken"], (int, str))
        # a call without a progress callback asks for no progress
        await client.call_tool("progress")
        await client.ping()
        assert "_meta" not in wire.calls("progress")[1]["params"]
        await trio.sleep(0.05)
        assert len(progress) == 3


async def test_a_failing_log_callback_does_not_end_the_session(wire: Wire) -> None:
    def on_log(params: dict[str, Any]) -> None:
        raise RuntimeError("bad callback")

    async with mc.connect(handshake(), mode="handshake", on_log=on_log) as client:
        await client.call_tool("progress")
        await client.call_tool("progress")
        assert (await client.call_tool("echo", {"text": "fine"})).text == "fine"
