"""mcpkit.client checked message by message against a scripted peer (tests/scripted_server.py).

The peer is a standalone stdio (or HTTP) MCP server that does not use mcpkit. It logs every
message it receives, with a monotonic timestamp and what it had written before, to the file named
by SCRIPTED_PEER_LOG, so these tests assert on what went over the wire and in which order.

To read the log while the peer still runs, a test first sends ``ping``: the peer logs each message
as it reads it, in order, before answering anything, so once the ping is answered everything the
client sent before it is in the log. After ``connect`` exits the peer has exited and the log is
complete.
"""

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

import httpx
import pytest
import trio

import mcpkit.client as mc
from mcpkit.client import errors as E
from mcpkit.client.session import Handlers, Session

from .http_helpers import HttpServer


from .client_peer import PEER, Wire, free_port, fresh_era_memory, handshake, peer, wait_for, wire  # noqa: F401


# --- era detection and the handshake ------------------------------------------------------------

async def test_handshake_sends_initialized_only_after_the_initialize_answer(wire: Wire) -> None:
    async with mc.connect(handshake("--init-delay", "0.3"), mode="handshake") as client:
        assert client.description.era == "handshake"
        assert client.description.protocol_version == "2025-11-25"
        assert client.description.server_info == {"name": "scripted", "version": "1.0"}
    inbound = wire.inbound()
    # exactly initialize, then initialized, then the tool list prefetch; nothing else
    assert wire.methods() == ["initialize", "notifications/initialized", "tools/list"]
    init, initialized = inbound[0], inbound[1]
    assert init["msg"]["params"]["protocolVersion"] == "2025-11-25"
    assert init["msg"]["params"]["clientInfo"]["name"] == "mcpkit"
    answer = next(e for e in wire.outbound() if e["msg"].get("id") == init["msg"]["id"])
    assert answer["t"] - init["t"] >= 0.29  # the peer really held its answer back
    assert init["sent_before"] == []
    assert initialized["sent_before"] == [f"result:{init['msg']['id']}"]
    assert initialized["t"] >= answer["t"]
    assert "id" not in initialized["msg"]
    # tools/list only once the handshake is complete
    assert inbound[2]["t"] >= initialized["t"]


async def test_handshake_with_log_level_sets_it_right_after_initialized(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake", log_level="debug"):
        pass
    assert wire.methods() == ["initialize", "notifications/initialized", "logging/setLevel", "tools/list"]
    assert wire.received("logging/setLevel")[0]["msg"]["params"] == {"level": "debug"}


async def test_handshake_without_logging_capability_does_not_set_a_level(wire: Wire) -> None:
    async with mc.connect(handshake("--no-logging"), mode="handshake", log_level="debug"):
        pass
    assert wire.methods() == ["initialize", "notifications/initialized", "tools/list"]


async def test_pinned_handshake_version_is_asked_for(wire: Wire) -> None:
    async with mc.connect(handshake(), protocol_version="2025-03-26") as client:
        assert client.description.protocol_version == "2025-03-26"
    assert wire.methods()[0] == "initialize"  # a pinned handshake version needs no probe
    assert wire.received("initialize")[0]["msg"]["params"]["protocolVersion"] == "2025-03-26"


async def test_server_answering_an_unknown_version_is_refused(wire: Wire) -> None:
    with pytest.raises(E.UnsupportedVersion) as info:
        async with mc.connect(handshake("--init-version", "1999-01-01"), mode="handshake"):
            pytest.fail("connected to a server speaking an unknown version")
    assert info.value.code == "E207"
    assert "1999-01-01" in info.value.message
    assert "notifications/initialized" not in wire.methods()


@pytest.mark.parametrize("code", ["-32601", "-32602", "-32603", "-32000"])
async def test_auto_probes_then_falls_back_to_initialize_on_a_legacy_peer(wire: Wire, code: str) -> None:
    async with mc.connect(handshake("--discover", f"error:{code}")) as client:
        assert client.description.era == "handshake"
        assert client.description.protocol_version == "2025-11-25"
    assert wire.methods() == ["server/discover", "initialize", "notifications/initialized", "tools/list"]
    probe, init = wire.inbound()[0], wire.inbound()[1]
    assert probe["msg"]["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
    # initialize only after the probe's error came back
    assert init["sent_before"] == [f"error:{probe['msg']['id']}"]
    assert init["msg"]["id"] != probe["msg"]["id"]
    assert "notifications/cancelled" not in wire.methods()


async def test_auto_falls_back_after_probe_timeout_on_a_silent_peer(wire: Wire) -> None:
    start = time.monotonic()  # the peer's clock: CLOCK_MONOTONIC, shared by all processes
    async with mc.connect(handshake("--discover", "silent"), probe_timeout=0.3) as client:
        elapsed = time.monotonic() - start
        assert client.description.era == "handshake"
    assert 0.3 <= elapsed < 2.5
    assert wire.methods() == ["server/discover", "initialize", "notifications/initialized", "tools/list"]
    probe, init = wire.inbound()[0], wire.inbound()[1]
    assert init["t"] >= start + 0.3 and init["t"] > probe["t"]
    # the unanswered probe is not cancelled: a legacy server expects nothing before initialize
    assert init["sent_before"] == []


async def test_auto_uses_the_handshake_version_a_modern_error_names(wire: Wire) -> None:
    """-32022 naming only 2025-11-25 is not a failure: that version is spoken via initialize.

    The spec says a recognized modern error means "use one of the versions in its supported
    list"; the only one offered is a handshake version, so the client initializes with it.
    """
    async with mc.connect(handshake("--discover", "unsupported:2025-11-25")) as client:
        assert client.description.era == "handshake"
        assert client.description.protocol_version == "2025-11-25"
    assert wire.methods() == ["server/discover", "initialize", "notifications/initialized", "tools/list"]
    assert wire.received("initialize")[0]["msg"]["params"]["protocolVersion"] == "2025-11-25"
    assert wire.outbound()[0]["msg"]["error"]["code"] == -32022


@pytest.mark.parametrize("discover", ["unsupported:2099-01-01", "error:-32020", "error:-32021"])
async def test_auto_does_not_fall_back_on_other_modern_errors(wire: Wire, discover: str) -> None:
    """A recognized modern error that offers nothing usable is final: no initialize fallback."""
    with pytest.raises(E.RpcError) as info:
        async with mc.connect(handshake("--discover", discover)):
            pytest.fail("connected anyway")
    expected = int(discover.split(":")[1]) if discover.startswith("error") else -32022
    assert info.value.rpc_code == expected
    if discover.startswith("unsupported"):
        assert isinstance(info.value, E.UnsupportedVersion)
        assert info.value.supported == ["2099-01-01"]
    assert wire.methods() == ["server/discover"]


async def test_stateless_mode_does_not_fall_back(wire: Wire) -> None:
    with pytest.raises(E.MethodNotFound):
        async with mc.connect(handshake(), mode="stateless"):
            pytest.fail("connected anyway")
    assert wire.methods() == ["server/discover"]


async def test_stateless_mode_reports_the_supported_versions(wire: Wire) -> None:
    with pytest.raises(E.UnsupportedVersion) as info:
        async with mc.connect(handshake("--discover", "unsupported:2025-11-25"), mode="stateless"):
            pytest.fail("connected anyway")
    assert info.value.supported == ["2025-11-25"]
    assert wire.methods() == ["server/discover"]


async def test_auto_on_a_modern_peer_needs_no_handshake(wire: Wire) -> None:
    async with mc.connect(peer("--era", "modern")) as client:
        assert client.description.era == "stateless"
        assert client.description.protocol_version == "2026-07-28"
        assert client.description.server_info == {"name": "scripted", "version": "1.0"}
        assert (await client.call_tool("echo", {"text": "hi"})).text == "hi"
    assert wire.methods() == ["server/discover", "tools/list", "tools/call"]
    for entry in wire.inbound():  # every stateless request carries its version and who we are
        meta = entry["msg"]["params"]["_meta"]
        assert meta["io.modelcontextprotocol/protocolVersion"] == "2026-07-28"
        assert meta["io.modelcontextprotocol/clientInfo"]["name"] == "mcpkit"
        assert meta["io.modelcontextprotocol/clientCapabilities"] == {}


async def test_the_era_is_remembered_for_the_same_server(wire: Wire) -> None:
    target = handshake()
    async with mc.connect(target):
        pass
    async with mc.connect(target):
        pass
    first, second = wire.pids()
    by_pid = [[e["msg"].get("method") for e in wire.inbound() if e["pid"] == pid] for pid in (first, second)]
    assert by_pid[0][:2] == ["server/discover", "initialize"]
    assert by_pid[1][:2] == ["initialize", "notifications/initialized"]  # no second probe


# --- not initialized ----------------------------------------------------------------------------

class RecordingTransport:
    kind = "stdio"
    protocol_version = None

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    async def start(self, nursery, deliver) -> None:
        pass

    async def send(self, frame: bytes, **kwargs: Any) -> None:
        self.frames.append(frame)

    def abort(self, request_id) -> bool:
        return False

    async def aclose(self) -> None:
        pass


async def test_session_before_any_handshake_raises_not_initialized() -> None:
    transport = RecordingTransport()
    session = Session(transport, Handlers(), client_info={"name": "t", "version": "0"})
    with pytest.raises(E.NotInitialized) as info:
        await session.request("tools/list")
    assert info.value.code == "E100"
    assert "tools/list" in info.value.message and "not initialized" in info.value.message
    assert str(info.value).startswith("E100: ")
    assert transport.frames == []


async def test_session_during_the_handshake_allows_only_ping() -> None:
    transport = RecordingTransport()
    session = Session(transport, Handlers(), client_info={"name": "t", "version": "0"})
    session.era, session.ready = "handshake", False
    for method in ("tools/call", "tools/list", "resources/read"):
        with pytest.raises(E.NotInitialized):
            await session.request(method, {"name": "x"})
    assert transport.frames == []
    with pytest.raises(E.RequestTimeout):  # ping goes out (nobody answers this transport)
        await session.request("ping", timeout=0.05)
    assert json.loads(transport.frames[0])["method"] == "ping"


async def test_client_before_connect_raises_not_initialized() -> None:
    client = mc.Client(peer(), mc.ClientSettings(), Handlers())
    for attempt in (client.list_tools(), client.call_tool("echo", {"text": "x"}),
                    client.request("tools/list"), client.ping(), client.discover()):
        with pytest.raises(E.NotInitialized) as info:
            await attempt
        assert info.value.code == "E100"
        assert "connect" in info.value.message


# --- timeouts and cancellation -------------------------------------------------------------------

async def test_timeout_raises_quickly_and_cancels_on_the_wire(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake") as client:
        start = trio.current_time()
        with pytest.raises(E.RequestTimeout) as info:
            await client.call_tool("slow", {"seconds": 10}, timeout=0.3)
        elapsed = trio.current_time() - start
        assert info.value.code == "E101"
        assert 0.3 <= elapsed < 1.0
        await client.ping()
        call = wire.calls("slow")[0]
        cancels = wire.received("notifications/cancelled")
        assert [c["msg"]["params"]["requestId"] for c in cancels] == [call["id"]]
        assert "timed out" in cancels[0]["msg"]["params"]["reason"]
        # the connection is still fine
        assert (await client.call_tool("echo", {"text": "still here"})).text == "still here"


async def test_default_request_timeout_and_per_call_override(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake", request_timeout=0.3) as client:
        start = trio.current_time()
        with pytest.raises(E.RequestTimeout):
            await client.call_tool("slow", {"seconds": 10})
        assert trio.current_time() - start < 1.0
        assert (await client.call_tool("slow", {"seconds": 0.6}, timeout=3)).text == "slept"
        assert (await client.call_tool("slow", {"seconds": 0.6}, timeout=None)).text == "slept"
        await client.ping()
        calls = wire.calls("slow")
        assert [c["msg"]["params"]["requestId"] for c in wire.received("notifications/cancelled")] == [calls[0]["id"]]
    async with mc.connect(handshake(), mode="handshake", request_timeout=10) as client:
        with pytest.raises(E.RequestTimeout):
            await client.call_tool("slow", {"seconds": 10}, timeout=0.2)


async def test_a_late_answer_after_a_timeout_is_dropped(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake") as client:
        with pytest.raises(E.RequestTimeout):
            await client.call_tool("slow", {"seconds": 0.4, "ignore_cancel": True}, timeout=0.15)
        await trio.sleep(0.4)
        assert (await client.call_tool("echo", {"text": "next"})).text == "next"
    late = [e for e in wire.outbound() if e["msg"].get("result", {}).get("content", [{}])[0].get("text") == "slept anyway"]
    assert len(late) == 1  # the peer did answer late, and the client shrugged it off


async def test_cancelling_the_calling_task_cancels_on_the_wire(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake") as client:
        with trio.move_on_after(0.3) as scope:
            await client.call_tool("slow", {"seconds": 10})
        assert scope.cancelled_caught
        await client.ping()
        call = wire.calls("slow")[0]
        cancels = wire.received("notifications/cancelled")
        assert [c["msg"]["params"]["requestId"] for c in cancels] == [call["id"]]
        assert cancels[0]["t"] - wire.received("tools/call")[0]["t"] >= 0.25
        assert (await client.call_tool("echo", {"text": "ok"})).text == "ok"


async def test_cancelling_one_of_several_calls_cancels_only_that_one(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake") as client:
        results: list[str] = []

        async def call(seconds: float) -> None:
            results.append((await client.call_tool("slow", {"seconds": seconds})).text)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, 0.5)
            with trio.move_on_after(0.2):
                await client.call_tool("slow", {"seconds": 10})
        assert results == ["slept"]
        await client.ping()
        by_seconds = {c["params"]["arguments"]["seconds"]: c["id"] for c in wire.calls("slow")}
        assert [c["msg"]["params"]["requestId"] for c in wire.received("notifications/cancelled")] == [by_seconds[10]]


async def test_stateless_stdio_timeout_also_cancels_on_the_wire(wire: Wire) -> None:
    async with mc.connect(peer("--era", "modern")) as client:
        with pytest.raises(E.RequestTimeout):
            await client.call_tool("slow", {"seconds": 10}, timeout=0.2)
        await client.ping()
        call = wire.calls("slow")[0]
        assert [c["msg"]["params"]["requestId"] for c in wire.received("notifications/cancelled")] == [call["id"]]


# --- request ids and concurrency -----------------------------------------------------------------

async def test_fifty_concurrent_calls_get_their_own_answers(wire: Wire) -> None:
    results: dict[int, Any] = {}
    async with mc.connect(handshake(), mode="handshake") as client:
        async def call(i: int) -> None:
            results[i] = await client.call_tool("add", {"a": i, "b": 1000})

        async with trio.open_nursery() as nursery:
            for i in range(50):
                nursery.start_soon(call, i)
    assert {i: (r.text, r.structured) for i, r in results.items()} == {
        i: (str(i + 1000), {"sum": i + 1000}) for i in range(50)}
    ids = [e["msg"]["id"] for e in wire.inbound() if "id" in e["msg"]]
    assert len(ids) == len(set(ids)) == 52  # initialize, tools/list and the 50 calls
    assert all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
    # the peer answered out of order, so the answers really had to be matched by id
    call_ids = [c["id"] for c in wire.calls("add")]
    answer_ids = [e["msg"]["id"] for e in wire.outbound() if e["msg"].get("id") in set(call_ids)]
    assert sorted(answer_ids) == sorted(call_ids) and answer_ids != call_ids


async def test_uuid_ids(wire: Wire) -> None:
    async with mc.connect(handshake(), mode="handshake", uuid_ids=True) as client:
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(client.call_tool, "add", {"a": i, "b": 1})
        with pytest.raises(E.RequestTimeout):
            await client.call_tool("slow", {"seconds": 10}, timeout=0.1)
    ids = [e["msg"]["id"] for e in wire.inbound() if "id" in e["msg"]]
    assert len(ids) == len(set(ids)) == 23
    for rid in ids:
        assert isinstance(rid, str) and uuid.UUID(rid).version == 4 and str(uuid.UUID(rid)) == rid
    slow_id = wire.calls("slow")[0]["id"]
    assert wire.received("notifications/cancelled")[0]["msg"]["params"]["requestId"] == slow_id


# --- error mapping -------------------------------------------------------------------------------

ERROR_CASES = [
    (-32700, E.ParseError, "E200"),
    (-32600, E.InvalidRequest, "E201"),
    (-32601, E.MethodNotFound, "E202"),
    (-32602, E.InvalidParams, "E203"),
    (-32603, E.InternalError, "E204"),
    (-32020, E.HeaderMismatch, "E205"),
    (-32021, E.MissingCapability, "E206"),
    (-32022, E.UnsupportedVersion, "E207"),
    (-32001, E.RpcError, "E299"),
    (-32002, E.RpcError, "E299"),
    (12345, E.RpcError, "E299"),
]


@pytest.fixture
async def legacy_client(wire: Wire):
    async with mc.connect(handshake(), mode="handshake") as client:
        yield client


@pytest.mark.parametrize("rpc_code,cls,code", ERROR_CASES, ids=[str(c[0]) for c in ERROR_CASES])
async def test_error_codes_map_to_typed_errors(legacy_client: mc.Client, wire: Wire, rpc_code: int,
                                                cls: type, code: str) -> None:
    data = {"supported": ["2025-06-18", "2026-07-28"], "requested": "x", "detail": [1, 2]}
    with pytest.raises(E.RpcError) as info:
        await legacy_client.call_tool("fail", {"code": rpc_code, "message": f"failure {rpc_code}", "data": data})
    exc = info.value
    assert type(exc) is cls
    assert isinstance(exc, E.McpError)
    assert exc.code == code
    assert exc.rpc_code == rpc_code
    assert exc.message == f"failure {rpc_code}"
    assert exc.data == data
    assert str(exc) == f"{code}: failure {rpc_code}"
    if cls is E.UnsupportedVersion:
        assert exc.supported == ["2025-06-18", "2026-07-28"]
    # a JSON-RPC error is an answer: nothing is retried or cancelled
    await legacy_client.ping()
    assert len(wire.calls("fail")) == 1
    assert wire.received("notifications/cancelled") == []


async def test_error_without_data(legacy_client: mc.Client) -> None:
    with pytest.raises(E.InvalidParams) as info:
        await legacy_client.call_tool("fail", {"code": -32602, "message": "nope"})
    assert info.value.data is None and info.value.message == "nope"
    with pytest.raises(E.UnsupportedVersion) as info2:
        await legacy_client.call_tool("fail", {"code": -32022})
    assert info2.value.supported == []


async def test_unknown_method_from_request(legacy_client: mc.Client) -> None:
    with pytest.raises(E.MethodNotFound) as info:
        await legacy_client.request("no/such/method")
    assert info.value.rpc_code == -32601 and "no/such/method" in info.value.message


async def test_is_error_results_stay_results(legacy_client: mc.Client) -> None:
    result = await legacy_client.call_tool("tool_error")
    assert isinstance(result, mc.CallResult)
    assert result.is_error is True
    assert result.text == "it broke"
    ok = await legacy_client.call_tool("echo", {"text": "fine"})
    assert ok.is_error is False


def test_every_client_error_has_a_code_of_its_own() -> None:
    """Scripts and UIs tell errors apart by ``code``: no two exception classes may share one."""
    import mcpkit.client.errors as errors_mod
    import mcpkit.client.task_handles as tasks_mod

    classes = {cls for mod in (errors_mod, tasks_mod) for cls in vars(mod).values()
               if isinstance(cls, type) and issubclass(cls, errors_mod.McpError) and "code" in vars(cls)}
    codes = [cls.code for cls in classes]
    assert len(classes) > 15 and len(codes) == len(set(codes)), sorted(codes)
