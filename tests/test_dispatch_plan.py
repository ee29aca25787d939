"""The dispatcher's planning (``Dispatcher._plan``) and the outcomes of ``Dispatcher.answer``,
driven directly with a real app (mcpkit.testing.build_app) and real tools: which deadline a
request gets, which requests are refused before anything runs, what middleware see and may
change, scope and ``Mcp-Param-*`` header checks, and how a timeout, a cancellation and a
shutdown are answered.

The clock is trio's MockClock: ``mock_clock`` stands still (a deadline is an exact number),
``autojump_clock`` jumps to the next deadline when everything waits.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
import trio
import trio.testing

import mcpkit
from mcpkit.protocol import jsonrpc
from mcpkit.protocol.connection import RequestReceived
from mcpkit.protocol.jsonrpc import Answer, ProtocolError
from mcpkit.server.app import App
from mcpkit.server.auth import FORBIDDEN, Principal
from mcpkit.server.context import PeerError
from mcpkit.server.dispatch import Dispatcher
from mcpkit.testing import build_app

STATELESS = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": STATELESS, "io.modelcontextprotocol/clientCapabilities": {}}
TOOL_TIMEOUT = 0.2
DEFAULT_TIMEOUT = 0.5


ECHOED: list[str] = []


@mcpkit.tool
async def echo(text: str) -> str:
    """Say it back."""
    ECHOED.append(text)
    return text


@mcpkit.tool(timeout=TOOL_TIMEOUT)
async def sleepy(seconds: float) -> str:
    """Sleep; it has a timeout of its own."""
    await trio.sleep(seconds)
    return "awake"


@mcpkit.tool
async def dawdle(seconds: float) -> str:
    """Sleep, under the server's default timeout."""
    await trio.sleep(seconds)
    return "done"


@mcpkit.tool(scopes=["admin"])
async def guarded() -> str:
    """Only for admins."""
    return "secret"


@mcpkit.tool(input_schema={"type": "object", "properties": {
    "region": {"type": "string", "x-mcp-header": "Region"}, "note": {"type": "string"}}})
async def regional(region: str, note: str = "") -> str:
    """An argument mirrored into the Mcp-Param-Region header."""
    return f"{region} {note}".strip()


@mcpkit.resource("slow://thing")
async def slow_thing() -> str:
    await trio.sleep(DEFAULT_TIMEOUT * 10)
    return "late"


class Tools:
    @mcpkit.hookimpl
    def mcpkit_tools(self) -> list[Any]:
        return [echo, sleepy, dawdle, guarded, regional]

    @mcpkit.hookimpl
    def mcpkit_resources(self) -> list[Any]:
        return [slow_thing]


class Wrapping:
    """Middleware for tools/call only: records what it saw, may rewrite the arguments."""

    def __init__(self, rewrite: dict[str, Any] | None = None) -> None:
        self.seen: list[tuple[str | None, dict[str, Any] | None, str | None]] = []
        self.outcomes: list[str] = []
        rewrite_to = rewrite

        @mcpkit.middleware(methods={"tools/call"})
        async def watch(call: mcpkit.Call, call_next: Any) -> dict[str, Any]:
            self.seen.append((call.tool, call.arguments, call.plugin))
            if rewrite_to is not None:
                call.arguments = dict(rewrite_to)
            try:
                result = await call_next()
            except ProtocolError as exc:
                self.outcomes.append(f"error {exc.code}")
                raise
            self.outcomes.append("result")
            return result

        self.watch = watch

    @mcpkit.hookimpl
    def mcpkit_middleware(self) -> list[Any]:
        return [self.watch]


class Peer:
    """The transport side of a request: notifications recorded, no questions possible."""

    def __init__(self) -> None:
        self.notes: list[Any] = []

    async def notify(self, data: bytes) -> None:
        self.notes.append(json.loads(data))

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        raise PeerError("this test peer cannot be asked")


def make_app(*plugins: Any) -> App:
    named = {"tools": Tools(), **{f"mw{i}": p for i, p in enumerate(plugins)}}
    app, _, _ = build_app(named, {"server": {"default_timeout": DEFAULT_TIMEOUT}})
    return app


def stateless(app: App, method: str, params: dict[str, Any] | None = None, *, headers: dict[str, str] | None = None,
              principal: Principal | None = None, rid: int = 1) -> RequestReceived:
    """A stateless-era request as the connection decodes it (HTTP ``headers`` where given)."""
    body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**(params or {}), "_meta": META}}
    (req,) = app.new_connection(allow_handshake=False).receive(json.dumps(body).encode(), stateless=True, headers=headers)
    assert isinstance(req, RequestReceived), req
    req.principal = principal
    return req


def handshake(app: App, method: str, params: dict[str, Any] | None = None, *, rid: int = 1) -> RequestReceived:
    """A request on an initialized handshake-era connection (as an HTTP session passes it)."""
    conn = app.new_connection()
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    conn.receive(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}).encode())
    conn.receive(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}')
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
    if params is not None:
        body["params"] = params
    (req,) = conn.receive(json.dumps(body).encode(), stateless=False)
    assert isinstance(req, RequestReceived), req
    return req


def call(tool: str, **arguments: Any) -> dict[str, Any]:
    return {"name": tool, "arguments": arguments}


def http_headers(method: str, name: str, **extra: str) -> dict[str, str]:
    return {"mcp-protocol-version": STATELESS, "mcp-method": method, "mcp-name": name, **extra}


def refusal(dispatcher: Dispatcher, req: RequestReceived) -> ProtocolError:
    with pytest.raises(ProtocolError) as caught:
        dispatcher._plan(req, Peer())
    return caught.value


def body(answer: Answer | None) -> dict[str, Any]:
    assert answer is not None
    return json.loads(answer.encode())


# -- deadlines --------------------------------------------------------------------------------------

async def test_deadlines_come_from_the_tool_else_the_default_and_listen_has_none(mock_clock: Any) -> None:
    app = make_app()
    d = Dispatcher(app)
    mock_clock.jump(100)
    plans = {
        "own timeout": stateless(app, "tools/call", call("sleepy", seconds=1)),
        "tool, default": stateless(app, "tools/call", call("dawdle", seconds=1)),
        "other method": stateless(app, "tools/list"),
        "handshake era": handshake(app, "tools/call", call("sleepy", seconds=1)),
        "listen": stateless(app, "subscriptions/listen", {"notifications": {"toolsListChanged": True}}),
    }
    deadlines = {what: d._plan(req, Peer())[1] for what, req in plans.items()}
    assert deadlines == {"own timeout": 100 + TOOL_TIMEOUT, "tool, default": 100 + DEFAULT_TIMEOUT,
                         "other method": 100 + DEFAULT_TIMEOUT, "handshake era": 100 + TOOL_TIMEOUT, "listen": math.inf}


async def test_a_plan_runs_nothing_until_its_work_is_awaited() -> None:
    app = make_app()
    ECHOED.clear()
    work, _ = Dispatcher(app)._plan(stateless(app, "tools/call", call("echo", text="later")), Peer())
    assert ECHOED == []
    assert (await work())["isError"] is False and ECHOED == ["later"]


# -- refused before anything runs --------------------------------------------------------------------

async def test_unknown_tools_and_methods_are_refused_while_planning() -> None:
    app = make_app()
    d = Dispatcher(app)
    err = refusal(d, stateless(app, "tools/call", call("no_such_tool")))
    assert err.code == jsonrpc.INVALID_PARAMS and err.message == "Unknown tool: no_such_tool"
    err = refusal(d, handshake(app, "tools/frobnicate"))
    assert err.code == jsonrpc.METHOD_NOT_FOUND and "tools/frobnicate" in err.message
    err = refusal(d, handshake(app, "tools/call", {"arguments": {}}))  # no name at all
    assert err.code == jsonrpc.INVALID_PARAMS and "name" in err.message


@pytest.mark.parametrize("method, params", [
    ("server/discover", {}), ("subscriptions/listen", {"notifications": {}}), ("tasks/get", {"taskId": "t"}),
    ("tasks/update", {"taskId": "t", "inputResponses": {}}), ("tasks/cancel", {"taskId": "t"}),
])
async def test_stateless_only_methods_do_not_exist_in_the_handshake_era(method: str, params: dict[str, Any]) -> None:
    app = make_app()
    d = Dispatcher(app)
    err = refusal(d, handshake(app, method, params))
    assert err.code == jsonrpc.METHOD_NOT_FOUND and method in err.message
    d._plan(stateless(app, method, params), Peer())  # the stateless era has them


async def test_a_tool_needing_a_scope_is_refused_to_a_principal_without_it() -> None:
    app = make_app()
    d = Dispatcher(app)
    reader = Principal(subject="ada", scopes=frozenset({"read"}))
    err = refusal(d, stateless(app, "tools/call", call("guarded"), principal=reader))
    assert err.code == FORBIDDEN and err.data == {"requiredScopes": ["admin"]}
    admin = Principal(subject="bob", scopes=frozenset({"admin"}))
    work, _ = d._plan(stateless(app, "tools/call", call("guarded"), principal=admin), Peer())
    assert (await work())["isError"] is False
    d._plan(stateless(app, "tools/call", call("guarded")), Peer())  # nobody identified (stdio, open HTTP): allowed


async def test_mcp_param_headers_are_checked_against_the_tools_mirrored_arguments() -> None:
    app = make_app()
    d = Dispatcher(app)
    args = call("regional", region="eu-west", note="hi")
    good = http_headers("tools/call", "regional", **{"mcp-param-region": "eu-west"})
    d._plan(stateless(app, "tools/call", args, headers=good), Peer())
    for headers, why in [
        (http_headers("tools/call", "regional"), "the Mcp-Param-Region header is required"),
        (http_headers("tools/call", "regional", **{"mcp-param-region": "us-east"}), "does not match argument 'region'"),
    ]:
        err = refusal(d, stateless(app, "tools/call", args, headers=headers))
        assert err.code == jsonrpc.HEADER_MISMATCH and why in err.message
    # only the arguments the tool marks are mirrored; without HTTP headers nothing is checked
    d._plan(stateless(app, "tools/call", call("echo", text="x"), headers=http_headers("tools/call", "echo")), Peer())
    d._plan(stateless(app, "tools/call", args), Peer())
    d._plan(stateless(app, "tools/call", call("regional"), headers=http_headers("tools/call", "regional")), Peer())


# -- middleware ---------------------------------------------------------------------------------------

async def test_middleware_see_refused_calls_and_their_error() -> None:
    mw = Wrapping()
    app = make_app(mw)
    d = Dispatcher(app)
    req = stateless(app, "tools/call", call("no_such_tool", x=1))
    work, deadline = d._plan(req, Peer())  # wrapped: planning does not raise, running does
    assert deadline == math.inf
    answer = await d.answer(req, Peer())
    assert answer is not None and answer.code == jsonrpc.INVALID_PARAMS
    assert mw.seen == [("no_such_tool", {"x": 1}, None)] and mw.outcomes == [f"error {jsonrpc.INVALID_PARAMS}"]
    forbidden = stateless(app, "tools/call", call("guarded"), principal=Principal(subject="ada"))
    assert (await d.answer(forbidden, Peer())).code == FORBIDDEN  # type: ignore[union-attr]
    assert mw.seen[-1] == ("guarded", {}, "tools")


async def test_arguments_a_middleware_replaces_are_the_ones_the_tool_gets() -> None:
    mw = Wrapping(rewrite={"text": "rewritten"})
    app = make_app(mw)
    answer = body(await Dispatcher(app).answer(stateless(app, "tools/call", call("echo", text="original")), Peer()))
    assert answer["result"]["content"][0]["text"] == "rewritten"
    assert mw.seen == [("echo", {"text": "original"}, "tools")] and mw.outcomes == ["result"]


async def test_a_wrapped_tool_keeps_its_deadline_and_other_methods_are_not_wrapped(mock_clock: Any) -> None:
    mw = Wrapping()
    app = make_app(mw)
    d = Dispatcher(app)
    assert d._plan(stateless(app, "tools/call", call("sleepy", seconds=1)), Peer())[1] == TOOL_TIMEOUT
    work, _ = d._plan(stateless(app, "tools/list"), Peer())
    await work()
    assert mw.seen == []


# -- what answer() makes of the outcome ------------------------------------------------------------------

async def test_a_tool_that_runs_out_of_time_answers_an_error_result(autojump_clock: Any) -> None:
    app = make_app()
    answer = body(await Dispatcher(app).answer(stateless(app, "tools/call", call("sleepy", seconds=10)), Peer()))
    assert answer["result"]["isError"] is True
    assert answer["result"]["content"][0]["text"] == f"Tool sleepy timed out after {TOOL_TIMEOUT:g} s"
    assert trio.current_time() == pytest.approx(TOOL_TIMEOUT)
    default = body(await Dispatcher(app).answer(handshake(app, "tools/call", call("dawdle", seconds=10)), Peer()))
    assert default["result"]["content"][0]["text"] == f"Tool dawdle timed out after {DEFAULT_TIMEOUT:g} s"


async def test_anything_else_that_runs_out_of_time_answers_minus_32001(autojump_clock: Any) -> None:
    app = make_app()
    answer = await Dispatcher(app).answer(stateless(app, "resources/read", {"uri": "slow://thing"}), Peer())
    assert answer is not None and answer.code == jsonrpc.REQUEST_TIMEOUT
    assert answer.error.message == f"Request timed out after {DEFAULT_TIMEOUT:g} s"  # type: ignore[union-attr]
    assert trio.current_time() == pytest.approx(DEFAULT_TIMEOUT)


async def test_a_request_the_client_cancels_answers_nothing_and_is_forgotten(autojump_clock: Any) -> None:
    app = make_app()
    d = Dispatcher(app)
    scopes: dict[Any, trio.CancelScope] = {}
    answers: list[Answer | None] = []

    async def run() -> None:
        answers.append(await d.answer(stateless(app, "tools/call", call("dawdle", seconds=10), rid=7), Peer(), scopes))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        assert set(scopes) == {7} and len(app.requests.scopes) == 1
        scopes[7].cancel()
    assert answers == [None] and scopes == {} and app.requests.scopes == set()
    assert trio.current_time() < DEFAULT_TIMEOUT


async def test_a_server_that_stops_answers_its_running_and_later_requests_minus_32000(autojump_clock: Any) -> None:
    app = make_app()
    d = Dispatcher(app)
    answers: list[Answer | None] = []

    async def run() -> None:
        answers.append(await d.answer(stateless(app, "tools/call", call("dawdle", seconds=10)), Peer()))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await trio.testing.wait_all_tasks_blocked()
        app.requests.stop()
    answers.append(await d.answer(stateless(app, "tools/list"), Peer()))  # work that never yields: still refused
    for answer in answers:
        assert answer is not None and answer.code == jsonrpc.SERVER_BUSY
        assert answer.error.message.startswith("Server shutting down")  # type: ignore[union-attr]
    assert trio.current_time() < DEFAULT_TIMEOUT
