"""The session runner (mcpkit/server/session_runner.py) with the real dispatcher and a real app,
driven directly through an outlet that records what a transport would send.

Every transport serves requests through this one runner, so cancellation, server-to-client
requests, batches and the end of a session are checked here once, without sockets or pipes.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Any

import trio

import mcpkit
from mcpkit.protocol import jsonrpc
from mcpkit.protocol.session import Cancel, Resolve, ServerSession
from mcpkit.server.dispatch import Dispatcher
from mcpkit.server.observe import Observer, RequestRecord
from mcpkit.server.session_runner import SessionRunner
from mcpkit.testing import build_app



@mcpkit.tool
async def wait_a_while(seconds: float) -> str:
    """Sleep, then answer."""
    await trio.sleep(seconds)
    return f"slept {seconds}"


@mcpkit.tool
async def ask_roots(ctx: mcpkit.Context) -> str:
    """Ask the client for its roots (a server-to-client request)."""
    roots = await ctx.list_roots()
    return ",".join(r["uri"] for r in roots)


@mcpkit.tool
async def report(ctx: mcpkit.Context) -> str:
    """Send progress, then answer."""
    await ctx.report_progress(1, 2)
    return "done"


class RunnerPlugin:
    @mcpkit.hookimpl
    def mcpkit_tools(self) -> list[Any]:
        return [wait_a_while, ask_roots, report]


class Recorder:
    """An outlet: what would go to the client, in order, and what it hands elsewhere."""

    def __init__(self, can_ask: bool = True) -> None:
        self.can_ask = can_ask
        self.sent: list[Any] = []
        self.elsewhere_got: list[Any] = []
        self.arrived = trio.Event()

    def channel(self, run: Any) -> "Recorder":
        return self

    async def message(self, data: bytes) -> None:
        self.sent.append(json.loads(data))
        self.arrived.set()

    async def answer(self, answer: jsonrpc.Answer) -> None:
        self.sent.append(json.loads(answer.encode()))
        self.arrived.set()

    async def reply(self, answer: jsonrpc.Answer, origin: Any) -> None:
        self.sent.append(json.loads(answer.encode()))

    async def send_batch(self, answers: list[jsonrpc.Answer], origin: Any) -> None:
        self.sent.append([json.loads(a.encode()) for a in answers])

    def done(self) -> None:
        return None

    async def elsewhere(self, action: Any) -> None:
        self.elsewhere_got.append(action)


def frame(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def call(rid: Any, tool: str, arguments: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    return {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}


async def started(version: str = "2025-03-26", *, can_ask: bool = True, capabilities: dict[str, Any] | None = None):
    app, _, _ = build_app({"runner": RunnerPlugin()})
    core = ServerSession(app.new_connection(), max_running=8)
    core.receive(frame({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                        "params": {"protocolVersion": version, "capabilities": capabilities or {}, "clientInfo": {}}}))
    return core, Dispatcher(app), Recorder(can_ask)


async def settle() -> None:
    for _ in range(50):
        await trio.sleep(0)


async def test_a_cancelled_request_sends_nothing_and_frees_its_slot() -> None:
    core, dispatcher, out = await started()
    async with trio.open_nursery() as nursery:
        runner = SessionRunner(core, dispatcher, out, nursery)
        await runner.feed(frame(call(1, "wait_a_while", {"seconds": 30})))
        await settle()
        assert 1 in runner.scopes and core.load == 1
        await runner.feed(frame({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}))
        await settle()
    assert out.sent == [] and core.load == 0 and runner.scopes == {}


async def test_a_cancel_for_a_request_not_running_here_is_handed_elsewhere() -> None:
    core, dispatcher, out = await started()
    async with trio.open_nursery() as nursery:
        runner = SessionRunner(core, dispatcher, out, nursery)
        await runner.feed(frame({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}))
    assert out.elsewhere_got == [Cancel(99, None, False)]


async def test_server_to_client_requests_are_correlated_with_the_clients_answer() -> None:
    core, dispatcher, out = await started("2025-06-18", capabilities={"roots": {}})
    async with trio.open_nursery() as nursery:
        runner = SessionRunner(core, dispatcher, out, nursery)
        await runner.feed(frame(call(1, "ask_roots")))
        await out.arrived.wait()
        (question,) = out.sent
        assert question["method"] == "roots/list" and question["id"] in core.asked
        out.arrived = trio.Event()
        await runner.feed(frame({"jsonrpc": "2.0", "id": question["id"], "result": {"roots": [{"uri": "file:///a"}]}}))
        await out.arrived.wait()
    answer = out.sent[-1]
    assert answer["id"] == 1 and answer["result"]["content"][0]["text"] == "file:///a"
    assert core.asked == set()


async def test_a_question_where_none_can_travel_fails_the_call_not_the_session() -> None:
    core, dispatcher, out = await started("2025-06-18", can_ask=False, capabilities={"roots": {}})
    async with trio.open_nursery() as nursery:
        runner = SessionRunner(core, dispatcher, out, nursery)
        await runner.feed(frame(call(1, "ask_roots")))
    (answer,) = out.sent
    assert answer["result"]["isError"] is True and "cannot be sent here" in answer["result"]["content"][0]["text"]


async def test_a_batch_answers_once_with_every_member_after_the_slowest() -> None:
    core, dispatcher, out = await started()
    async with trio.open_nursery() as nursery:
        runner = SessionRunner(core, dispatcher, out, nursery)
        batch = [call(1, "wait_a_while", {"seconds": 0.2}), call(2, "wait_a_while", {"seconds": 0}),
                 {"jsonrpc": "2.0", "id": 3, "method": "ping"}]
        await runner.feed(frame(batch))
        await trio.sleep(0.05)
        assert out.sent == []  # the fast members wait for the slow one
    (array,) = out.sent
    assert sorted(a["id"] for a in array) == [1, 2, 3]


async def test_progress_travels_on_the_requests_channel_before_its_answer() -> None:
    core, dispatcher, out = await started()
    async with trio.open_nursery() as nursery:
        runner = SessionRunner(core, dispatcher, out, nursery)
        await runner.feed(frame(call(5, "report", meta={"progressToken": "t"})))
    progress, answer = out.sent
    assert progress["method"] == "notifications/progress" and progress["params"]["progressToken"] == "t"
    assert answer["id"] == 5


async def test_closing_cancels_what_runs_and_fails_what_waits_for_the_client() -> None:
    core, dispatcher, out = await started("2025-06-18", capabilities={"roots": {}})
    async with trio.open_nursery() as nursery:
        runner = SessionRunner(core, dispatcher, out, nursery)
        await runner.feed(frame(call(1, "ask_roots")))
        await runner.feed(frame(call(2, "wait_a_while", {"seconds": 30})))
        await out.arrived.wait()
        (question,) = out.sent
        runner.close()
    assert core.load == 0 and runner.scopes == {} and core.asked == set()
    assert len(out.sent) == 1  # cancelled requests send nothing
    # an answer arriving after the end is not taken for anyone's
    assert core.receive(frame({"jsonrpc": "2.0", "id": question["id"], "result": {}})) == [
        Resolve(question["id"], {}, None, False)]


class Watching(Observer):
    """An observer that writes down what the runner tells it, and whether a request's
    handler ran inside its ``request`` context."""

    def __init__(self) -> None:
        self.inside: list[str] = []
        self.ended_records: list[RequestRecord] = []
        self.notes: list[tuple[str, str, Any]] = []

    @contextmanager
    def request(self, rec: RequestRecord):  # type: ignore[override]
        self.inside.append(f"enter {rec.name}")
        yield
        self.inside.append(f"exit {rec.name} {rec.error_type}")

    def ended(self, rec: RequestRecord) -> None:
        self.ended_records.append(rec)

    def notification(self, method: str, transport: str, session_id: str | None, meta: Any) -> None:
        self.notes.append((method, transport, meta))


async def test_observers_see_each_request_with_its_target_outcome_and_meta() -> None:
    core, dispatcher, out = await started()
    watching = Watching()
    dispatcher.app.observers.add(watching)
    async with trio.open_nursery() as nursery:
        runner = SessionRunner(core, dispatcher, out, nursery, transport="http", session_id="s1")
        await runner.feed(frame(call(1, "report", meta={"traceparent": "00-" + "a" * 32 + "-" + "b" * 16 + "-01"})))
        await runner.feed(frame(call(2, "no_such_tool")))
        await runner.feed(frame(call(3, "wait_a_while", {"seconds": 30})))
        await settle()
        await runner.feed(frame({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 3, "_meta": {"k": 1}}}))
        await runner.feed(frame({"jsonrpc": "2.0", "method": "notifications/roots/list_changed", "params": {"_meta": {"k": 2}}}))
    by_id = {r.request_id: r for r in watching.ended_records}
    assert by_id[1].name == "tools/call report" and by_id[1].error_type is None and by_id[1].transport == "http"
    assert by_id[1].session_id == "s1" and by_id[1].meta["traceparent"].startswith("00-aaaa")
    assert by_id[2].error_type == str(jsonrpc.INVALID_PARAMS) and by_id[2].status_code == jsonrpc.INVALID_PARAMS
    assert by_id[3].error_type == "cancelled" and by_id[3].duration > 0
    assert "enter tools/call report" in watching.inside and "exit tools/call report None" in watching.inside
    assert ("notifications/roots/list_changed", "http", {"k": 2}) in watching.notes


async def test_idle_returns_at_once_with_nothing_running_and_waits_for_every_answer() -> None:
    """``idle()`` (what stdio waits on before it ends) returns at once when nothing is served,
    and otherwise only when the last running request has answered, however many ran."""
    core, dispatcher, out = await started()
    async with trio.open_nursery() as nursery:
        runner = SessionRunner(core, dispatcher, out, nursery)
        with trio.fail_after(5):
            await runner.idle()  # nothing running
        await runner.feed(frame(call(1, "wait_a_while", {"seconds": 0.05})))
        await runner.feed(frame(call(2, "wait_a_while", {"seconds": 0.2})))
        with trio.fail_after(5):
            await runner.idle()
        assert runner.serving == 0 and sorted(m["id"] for m in out.sent) == [1, 2]
        await runner.feed(frame(call(3, "wait_a_while", {"seconds": 0.05})))  # idle again after busy again
        with trio.fail_after(5):
            await runner.idle()
        assert [m["id"] for m in out.sent][-1] == 3
