"""mcpkit.client against real servers: the official `mcp` SDK's server (nobody here wrote it) and
our own `mcpkit serve`, over stdio, Streamable HTTP (both eras) and legacy HTTP+SSE."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import mcpkit.client as mc

from .helpers import MCPKIT, ROOT, STATELESS
from .http_helpers import HttpServer

HANDSHAKE = "2025-11-25"
PY = sys.executable
SDK_SCRIPT = str(Path(__file__).with_name("sdk_fixture_server.py"))
SDK_STDIO = [PY, SDK_SCRIPT, "stdio"]
OWN_STDIO = [MCPKIT, "serve", "--plugin", "hello"]
#: The conformance fixture plugin (not installed: found through its egg-info on PYTHONPATH) has
#: tools that publish list-changed events, which the hello plugin lacks.
CONFORMANCE = str(ROOT / "examples" / "conformance-server")


@pytest.fixture(autouse=True)
def _fresh_era_memory():
    """Every test finds eras out for itself: the client remembers them per target otherwise."""
    mc.forget_eras()
    yield
    mc.forget_eras()


# --- servers -----------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SdkHttpServer:
    """tests/sdk_fixture_server.py on a free loopback port, ready once it accepts connections."""

    def __init__(self, *args: str) -> None:
        self.log = tempfile.TemporaryFile()
        for _attempt in range(3):  # a port picked this way can be taken before the server binds it
            self.port = _free_port()
            self.proc = subprocess.Popen([PY, SDK_SCRIPT, args[0], str(self.port), *args[1:]],
                                         stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
            if self._wait_ready(30):
                return
            self.close()
        self.log.seek(0)
        raise RuntimeError(f"the SDK server did not start: {self.log.read().decode(errors='replace')}")

    def _wait_ready(self, timeout: float) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                time.sleep(0.05)
        return False

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # uvicorn may wait for open SSE streams: do not wait long
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture(scope="module", params=["stateful", "stateless"])
def sdk_http(request):
    """The SDK's Streamable HTTP server: its default (sessions) and its stateless_http mode."""
    srv = SdkHttpServer("http", *(["stateless"] if request.param == "stateless" else []))
    srv.mode = request.param
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def sdk_sse():
    """The SDK's legacy HTTP+SSE server (GET /sse, POST /messages/)."""
    srv = SdkHttpServer("sse")
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def own_http(http_server_kind):
    """`mcpkit serve --transport http --port 0` with the hello and conformance plugins."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [CONFORMANCE, os.environ.get("PYTHONPATH")]))}
    with HttpServer("--plugin", "hello", "--plugin", "conformance", env=env) as srv:
        yield srv


def _own_url(srv: HttpServer, path: str = "/mcp") -> str:
    return f"http://127.0.0.1:{srv.port}{path}"


# --- what every SDK server should do for us --------------------------------------------------

SDK_TOOLS = {"greet", "count", "explode", "weather", "ask_name", "change_tools"}


async def _exercise_sdk(client: mc.Client, *, progress_expected: bool = True) -> None:
    """List tools, call one, get a tool error as a result, structured output, progress."""
    tools = await client.list_tools()
    assert SDK_TOOLS <= {t["name"] for t in tools}
    greet = next(t for t in tools if t["name"] == "greet")
    assert greet["inputSchema"]["required"] == ["name"]

    hello = await client.call_tool("greet", {"name": "Ada", "excited": True})
    assert (hello.text, hello.is_error) == ("Hello, Ada!", False)

    failed = await client.call_tool("explode", {"message": "kaboom"})
    assert failed.is_error is True
    assert "kaboom" in failed.text

    weather = await client.call_tool("weather", {"city": "Paris"})
    assert weather.is_error is False
    assert weather.structured == {"city": "Paris", "temperature_c": 21.5}

    seen: list[tuple[Any, Any, Any]] = []
    counted = await client.call_tool("count", {"to": 3}, progress=lambda *a: seen.append(a))
    assert counted.text == "Counted to 3."
    await trio.testing.wait_all_tasks_blocked()  # progress callbacks run on their own task
    if progress_expected:
        assert seen == [(1, 3, "counted 1"), (2, 3, "counted 2"), (3, 3, "counted 3")]


def _assert_sdk_identity(d: mc.ServerDescription) -> None:
    assert d.server_info == {"name": "sdk-fixture", "version": "9.9.9"}
    assert d.instructions == "An SDK server for mcpkit's client tests."
    assert "tools" in d.capabilities


# --- the SDK's server over stdio ---------------------------------------------------------------

@pytest.mark.parametrize("mode, era, version", [
    ("stateless", "stateless", STATELESS),
    ("handshake", "handshake", HANDSHAKE),
    ("auto", "stateless", STATELESS),  # SDK 2.x answers server/discover, so auto picks the new era
])
async def test_sdk_stdio(mode: str, era: str, version: str) -> None:
    async with mc.connect(SDK_STDIO, mode=mode) as client:
        d = await client.discover()
        assert (d.era, d.protocol_version, d.transport) == (era, version, "stdio")
        _assert_sdk_identity(d)
        if era == "stateless":
            assert STATELESS in d.supported_versions
        await _exercise_sdk(client)
        await client.ping()


async def test_sdk_stdio_pinned_old_handshake_version() -> None:
    async with mc.connect(SDK_STDIO, protocol_version="2025-03-26") as client:
        d = await client.discover()
        assert (d.era, d.protocol_version) == ("handshake", "2025-03-26")
        assert (await client.call_tool("greet", {"name": "Old"})).text == "Hello, Old."


@pytest.mark.parametrize("mode", ["stateless", "handshake"])
async def test_sdk_stdio_elicitation(mode: str) -> None:
    asked: list[dict[str, Any]] = []

    async def on_elicitation(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        return {"action": "accept", "content": {"name": "Grace"}}

    async with mc.connect(SDK_STDIO, mode=mode, on_elicitation=on_elicitation) as client:
        result = await client.call_tool("ask_name", {})
        assert (result.text, result.is_error) == ("Hello, Grace!", False)
    assert len(asked) == 1
    assert asked[0]["message"] == "What is your name?"
    assert asked[0]["requestedSchema"]["properties"]["name"]["type"] == "string"


async def test_sdk_stdio_listen_sees_tools_list_changed() -> None:
    async with mc.connect(SDK_STDIO, mode="stateless") as client:
        await client.list_tools()
        async with client.listen(tools=True) as notes:
            with trio.fail_after(10):
                ack = await notes.receive()
            assert ack.method == "notifications/subscriptions/acknowledged"
            assert ack.params["notifications"] == {"toolsListChanged": True}
            assert (await client.call_tool("change_tools", {})).text == "changed"
            with trio.fail_after(10):
                changed = await notes.receive()
            assert changed.method == "notifications/tools/list_changed"
            assert changed.params["_meta"] == ack.params["_meta"]  # the same subscription id
        assert client._tools_expire == 0.0  # the cached tool list was dropped


# --- the SDK's server over Streamable HTTP -----------------------------------------------------

@pytest.mark.parametrize("mode, era, version", [
    ("stateless", "stateless", STATELESS),
    ("handshake", "handshake", HANDSHAKE),
    ("auto", "stateless", STATELESS),
])
async def test_sdk_streamable_http(sdk_http: SdkHttpServer, mode: str, era: str, version: str) -> None:
    # Both SDK modes serve both eras on /mcp: 2026-07-28 requests go to its single-exchange
    # handler whatever `stateless_http` says; the handshake era gets sessions only when stateful.
    async with mc.connect(sdk_http.url("/mcp"), mode=mode) as client:
        d = await client.discover()
        assert (d.era, d.protocol_version, d.transport) == (era, version, "http")
        _assert_sdk_identity(d)
        session_id = client.session.transport.session_id
        if era == "handshake" and sdk_http.mode == "stateful":
            assert session_id
        else:
            assert session_id is None
        await _exercise_sdk(client)


@pytest.mark.parametrize("mode", ["stateless", "handshake"])
async def test_sdk_streamable_http_elicitation(sdk_http: SdkHttpServer, mode: str) -> None:
    async def on_elicitation(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Lin"}}

    async with mc.connect(sdk_http.url("/mcp"), mode=mode, on_elicitation=on_elicitation) as client:
        if mode == "handshake" and sdk_http.mode == "stateless":
            # The SDK's stateless_http mode has no channel for a server request in that era,
            # and says so with a JSON-RPC error, which arrives typed.
            with pytest.raises(mc.InvalidRequest, match="back-channel"):
                await client.call_tool("ask_name", {})
            return
        result = await client.call_tool("ask_name", {})
        assert (result.text, result.is_error) == ("Hello, Lin!", False)


async def test_sdk_streamable_http_listen(sdk_http: SdkHttpServer) -> None:
    async with mc.connect(sdk_http.url("/mcp"), mode="stateless") as client:
        async with client.listen(tools=True) as notes:
            with trio.fail_after(10):
                ack = await notes.receive()
            assert ack.method == "notifications/subscriptions/acknowledged"
            await client.call_tool("change_tools", {})
            with trio.fail_after(10):
                assert (await notes.receive()).method == "notifications/tools/list_changed"


# --- the SDK's legacy HTTP+SSE server ----------------------------------------------------------

async def test_sdk_legacy_sse_auto_falls_back(sdk_sse: SdkHttpServer) -> None:
    async with mc.connect(sdk_sse.url("/sse")) as client:
        d = await client.discover()
        assert (d.era, d.transport) == ("handshake", "sse")
        assert d.protocol_version == HANDSHAKE
        _assert_sdk_identity(d)
        assert client.session.transport.post_url.startswith(sdk_sse.url("/messages/?session_id="))
        await _exercise_sdk(client)

    # The second connection remembers the transport and says the same.
    async with mc.connect(sdk_sse.url("/sse")) as client:
        assert (await client.discover()).transport == "sse"
        assert (await client.call_tool("greet", {"name": "again"})).text == "Hello, again."


async def test_sdk_legacy_sse_elicitation(sdk_sse: SdkHttpServer) -> None:
    async def on_elicitation(params: dict[str, Any]) -> dict[str, Any]:
        return {"action": "accept", "content": {"name": "Sse"}}

    async with mc.connect(sdk_sse.url("/sse"), on_elicitation=on_elicitation) as client:
        assert (await client.call_tool("ask_name", {})).text == "Hello, Sse!"


# --- our own server over stdio -----------------------------------------------------------------

HELLO_TOOLS = {"greet", "count", "forecast", "word_count", "fail", "sleepy", "ask_name"}


async def _exercise_hello(client: mc.Client) -> None:
    assert HELLO_TOOLS <= {t["name"] for t in await client.list_tools()}
    assert (await client.call_tool("greet", {"name": "Ada"})).text == "Hello, Ada."
    failed = await client.call_tool("fail", {"message": "nope"})
    assert (failed.is_error, failed.text) == (True, "nope")
    fc = await client.call_tool("forecast", {"city": "Paris"})
    assert fc.structured["city"] == "Paris" and fc.structured["conditions"] in ("sunny", "cloudy", "rainy")
    seen: list[Any] = []
    counted = await client.call_tool("count", {"to": 3, "delay": 0}, progress=lambda *a: seen.append(a[:2]))
    assert counted.text == "Counted to 3."
    await trio.testing.wait_all_tasks_blocked()
    assert seen == [(1, 3), (2, 3), (3, 3)]
    # A schema violation is caught before anything is sent.
    with pytest.raises(mc.InvalidArguments) as exc:
        await client.call_tool("count", {"to": 0})
    assert exc.value.field == "to"


@pytest.mark.parametrize("mode, era", [("stateless", "stateless"), ("handshake", "handshake"),
                                       ("auto", "stateless")])
async def test_own_stdio(mode: str, era: str) -> None:
    async with mc.connect(OWN_STDIO, mode=mode) as client:
        d = await client.discover()
        assert (d.era, d.transport) == (era, "stdio")
        assert d.server_info["name"] == "mcpkit"
        assert d.protocol_version == (STATELESS if era == "stateless" else HANDSHAKE)
        await _exercise_hello(client)
        await client.ping()  # `ping` in the handshake era; the stateless era has none


async def _ask_name(client: mc.Client, asked: list[dict[str, Any]]) -> None:
    """ask_name in whichever era: the raw first answer shows how the question travelled."""
    raw = await client.session.request("tools/call", {"name": "ask_name", "arguments": {}})
    if client.description.era == "stateless":
        # MRTR: the server answers with an InputRequiredResult; nothing was asked yet.
        assert raw["resultType"] == "input_required"
        (request,) = raw["inputRequests"].values()
        assert request["method"] == "elicitation/create"
        assert asked == []
    else:
        # Handshake era: the server sent elicitation/create mid-call and got our answer.
        assert raw["content"][0]["text"] == "Hello, Ada!"
        assert len(asked) == 1
        asked.clear()
    result = await client.call_tool("ask_name", {})  # the full round trip, retried if need be
    assert (result.text, result.is_error) == ("Hello, Ada!", False)
    assert len(asked) == 1 and asked[0]["message"] == "What is your name?"


def _elicitation_answer(asked: list[dict[str, Any]], name: str = "Ada"):
    async def on_elicitation(params: dict[str, Any]) -> dict[str, Any]:
        asked.append(params)
        await trio.sleep(0)
        return {"action": "accept", "content": {"name": name}}
    return on_elicitation


@pytest.mark.parametrize("mode", ["stateless", "handshake"])
async def test_own_stdio_elicitation(mode: str) -> None:
    asked: list[dict[str, Any]] = []
    async with mc.connect(OWN_STDIO, mode=mode, on_elicitation=_elicitation_answer(asked)) as client:
        await _ask_name(client, asked)


async def test_own_stdio_elicitation_declined() -> None:
    async with mc.connect(OWN_STDIO, mode="stateless", on_elicitation=lambda p: {"action": "decline"}) as client:
        assert (await client.call_tool("ask_name", {})).text == "No name given."


@pytest.mark.parametrize("mode", ["stateless", "handshake"])
async def test_own_stdio_elicitation_without_a_handler(mode: str) -> None:
    """No handler, so no elicitation capability declared: a clean failure in either era."""
    async with mc.connect(OWN_STDIO, mode=mode) as client:
        if mode == "stateless":
            # The server may not send input requests the client did not declare: -32021.
            with pytest.raises(mc.MissingCapability, match="elicitation") as caught:
                await client.call_tool("ask_name", {})
            assert caught.value.code == "E206" and caught.value.rpc_code == -32021
        else:
            result = await client.call_tool("ask_name", {})
            assert result.is_error and "capability" in result.text
        assert (await client.call_tool("greet", {"name": "still here"})).text == "Hello, still here."


@pytest.mark.parametrize("mode", ["stateless", "handshake"])
async def test_own_stdio_listen(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", CONFORMANCE)
    async with mc.connect([MCPKIT, "serve", "--plugin", "conformance"], mode=mode) as client:
        await client.list_tools()
        assert client._tools_expire > 0
        async with client.listen(tools=True) as notes:
            if mode == "stateless":
                # subscriptions/listen: the server acknowledges the filter it honours first.
                with trio.fail_after(10):
                    ack = await notes.receive()
                assert ack.method == "notifications/subscriptions/acknowledged"
                assert ack.params["notifications"] == {"toolsListChanged": True}
                sub = ack.params["_meta"]["io.modelcontextprotocol/subscriptionId"]
            await client.call_tool("test_trigger_tool_change", {})
            with trio.fail_after(10):
                changed = await notes.receive()
            assert changed.method == "notifications/tools/list_changed"
            if mode == "stateless":
                assert changed.params["_meta"]["io.modelcontextprotocol/subscriptionId"] == sub
        assert client._tools_expire == 0.0  # list_changed dropped the cached tool list
        # Outside the block nothing listens any more, and the connection still works.
        assert (await client.call_tool("test_simple_text", {})).is_error is False


# --- our own server over HTTP ------------------------------------------------------------------

@pytest.mark.parametrize("mode, era", [("stateless", "stateless"), ("handshake", "handshake"),
                                       ("auto", "stateless")])
async def test_own_streamable_http(own_http: HttpServer, mode: str, era: str) -> None:
    async with mc.connect(_own_url(own_http), mode=mode) as client:
        d = await client.discover()
        assert (d.era, d.transport) == (era, "http")
        assert d.protocol_version == (STATELESS if era == "stateless" else HANDSHAKE)
        if era == "handshake":
            assert client.session.transport.session_id
        else:
            assert client.session.transport.session_id is None
        await _exercise_hello(client)
        await client.ping()


async def test_own_legacy_sse_auto_falls_back(own_http: HttpServer) -> None:
    async with mc.connect(_own_url(own_http, "/sse")) as client:
        d = await client.discover()
        assert (d.era, d.transport) == ("handshake", "sse")
        assert d.server_info["name"] == "mcpkit"
        await _exercise_hello(client)


@pytest.mark.parametrize("mode", ["stateless", "handshake"])
async def test_own_http_elicitation(own_http: HttpServer, mode: str) -> None:
    asked: list[dict[str, Any]] = []
    async with mc.connect(_own_url(own_http), mode=mode, on_elicitation=_elicitation_answer(asked)) as client:
        await _ask_name(client, asked)


async def test_own_legacy_sse_elicitation(own_http: HttpServer) -> None:
    asked: list[dict[str, Any]] = []
    async with mc.connect(_own_url(own_http, "/sse"), on_elicitation=_elicitation_answer(asked)) as client:
        assert client.description.transport == "sse"
        await _ask_name(client, asked)


@pytest.mark.parametrize("path, mode, era, transport", [
    ("/mcp", "stateless", "stateless", "http"), ("/mcp", "handshake", "handshake", "http"), ("/sse", "auto", "handshake", "sse"),
])
async def test_own_http_listen(own_http: HttpServer, path: str, mode: str, era: str, transport: str) -> None:
    async with mc.connect(_own_url(own_http, path), mode=mode) as client:
        assert client.description is not None
        assert (client.description.era, client.description.transport) == (era, transport)
        await client.list_tools()
        assert client._tools_expire > 0  # cached: the notification below must drop it
        async with client.listen(tools=True) as notes:
            sub = None
            if era == "stateless":
                with trio.fail_after(10):
                    ack = await notes.receive()
                assert ack.method == "notifications/subscriptions/acknowledged"
                assert ack.params["notifications"] == {"toolsListChanged": True}
                sub = ack.params["_meta"]["io.modelcontextprotocol/subscriptionId"]
            # Handshake era: connect() returned only once the standalone GET stream (or the
            # legacy SSE stream) was open, so the notification cannot slip by.
            await client.call_tool("test_trigger_tool_change", {})
            with trio.fail_after(10):
                changed = await notes.receive()
            assert changed.method == "notifications/tools/list_changed"
            if sub is not None:
                assert changed.params["_meta"]["io.modelcontextprotocol/subscriptionId"] == sub
        assert client._tools_expire == 0.0  # list_changed dropped the cached tool list
        assert (await client.call_tool("greet", {"name": "after"})).text == "Hello, after."


async def test_own_http_cancelled_listen_leaves_connection_usable(own_http: HttpServer) -> None:
    """Leaving a listen block closes the subscriptions/listen stream; the client goes on working."""
    async with mc.connect(_own_url(own_http), mode="stateless") as client:
        for _ in range(3):
            async with client.listen(tools=True) as notes:
                with trio.fail_after(10):
                    assert (await notes.receive()).method == "notifications/subscriptions/acknowledged"
        assert (await client.call_tool("greet", {"name": "after"})).text == "Hello, after."
