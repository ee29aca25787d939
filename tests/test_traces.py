"""Traces end to end: real `mcpkit serve --traces` processes (stdio, Streamable HTTP, a gateway
and its upstream) export with their own OpenTelemetry SDK over OTLP/HTTP to a real endpoint in
the test (tests/otlp_receiver.py decodes the protobuf). The spans are checked as the
OpenTelemetry conventions for MCP name them: names, kinds, attributes, errors, the parent a
`traceparent` gives (in params._meta and as an HTTP header), middleware and tool spans as
children, and one trace across a gateway hop."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .gateway_helpers import write_config
from .helpers import MCPKIT, Server, modern_meta
from .http_helpers import HttpServer, modern_headers, sse_events
from .otlp_receiver import OtlpReceiver, Span

pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra (make install adds it)")

PLUGIN = str(Path(__file__).resolve().parent / "traced_plugin.py")
SERVE_PLUGIN = (PLUGIN, "--plugin", "traced_plugin")
#: a caller's trace context (W3C): trace id, span id
CALLER_TRACE, CALLER_SPAN = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"
#: another one, sent as the HTTP header where _meta carries the first
HEADER_TRACE, HEADER_SPAN = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
HEADER_TRACEPARENT = f"00-{HEADER_TRACE}-{HEADER_SPAN}-01"


def one(spans: list[Span]) -> Span:
    assert len(spans) == 1, spans
    return spans[0]


def children(otlp: OtlpReceiver, parent: Span) -> list[Span]:
    with otlp.lock:
        return [s for s in otlp.spans if s.parent_id == parent.span_id and s.trace_id == parent.trace_id]


def tool_call(name: str, arguments: dict | None = None, meta: dict | None = None) -> dict:
    params: dict = {"name": name, "arguments": arguments or {}}
    if meta:
        params["_meta"] = meta
    return params


def check_tool_spans(otlp: OtlpReceiver, service: str, transport: str, version: str, session: str | None) -> None:
    """What every transport must show for work / broken / an unknown tool."""
    base = {"mcp.method.name": "tools/call", "network.transport": transport, "mcp.protocol.version": version}
    if session:
        base["mcp.session.id"] = session
    if transport == "tcp":
        base["network.protocol.name"] = "http"
    work = [s for s in otlp.named("tools/call work", service) if s.trace_id not in (CALLER_TRACE, HEADER_TRACE)]
    server = one(work)
    assert server.kind == "SERVER" and server.parent_id == "" and server.status == "UNSET"
    assert server.attributes == {**base, "gen_ai.tool.name": "work", "gen_ai.operation.name": "execute_tool",
                                 "jsonrpc.request.id": server.attributes["jsonrpc.request.id"]}
    mw = one(children(otlp, server))  # the middleware, then the tool's own span inside it
    assert (mw.name, mw.kind) == ("middleware audit", "INTERNAL")
    assert mw.attributes == {"mcpkit.middleware.name": "audit", "mcpkit.plugin.name": "traced_plugin", "mcp.method.name": "tools/call"}
    inner = one(children(otlp, mw))
    assert (inner.name, inner.attributes) == ("inner work", {"work.n": 2})

    broken = one(otlp.named("tools/call broken", service))
    assert broken.status == "ERROR" and broken.attributes["error.type"] == "tool_error"
    assert "rpc.response.status_code" not in broken.attributes and broken.attributes["gen_ai.tool.name"] == "broken"

    unknown = one(otlp.named("tools/call no_such_tool", service))
    assert unknown.status == "ERROR" and unknown.status_message == "Unknown tool: no_such_tool"
    assert unknown.attributes["error.type"] == "-32602" and unknown.attributes["rpc.response.status_code"] == "-32602"


def test_stdio_spans_and_a_traceparent_in_meta() -> None:
    with OtlpReceiver() as otlp:
        with Server(*SERVE_PLUGIN, "--traces", env=otlp.env("on-stdio")) as srv:
            srv.initialize()
            assert srv.request("tools/call", tool_call("work", {"n": 2}))["result"]["content"][0]["text"] == "worked 2"
            assert srv.request("tools/call", tool_call("broken"))["result"]["isError"] is True
            assert srv.request("tools/call", tool_call("no_such_tool"))["error"]["code"] == -32602
            meta = {"traceparent": TRACEPARENT, "tracestate": "rojo=00f067aa0ba902b7"}
            reply = srv.request("tools/call", tool_call("work_in_thread", {"n": 3}, meta))
            assert reply["result"]["content"][0]["text"] == "worked 3 in a thread"  # stdout held only protocol
            assert "a note called x" in json.dumps(srv.request("resources/read", {"uri": "traced://notes/x"}))
            assert "Summarize trains" in json.dumps(srv.request("prompts/get", {"name": "summarize", "arguments": {"topic": "trains"}}))
            assert srv.request("tools/list")["result"]["tools"]
            srv.send({"jsonrpc": "2.0", "method": "notifications/roots/list_changed", "params": {"_meta": {"traceparent": TRACEPARENT}}})
            assert srv.request("ping") is not None
            assert srv.request("logging/setLevel", {"level": "loud"})["error"]["code"] == -32602  # refused by the core
            assert srv.close() == 0  # stdin closed: the server ends and flushes its spans
        otlp.wait_for(lambda: otlp.named("notifications/roots/list_changed"))
        check_tool_spans(otlp, "on-stdio", "pipe", "2025-11-25", None)
        continued = one(otlp.named("tools/call work_in_thread"))
        assert (continued.trace_id, continued.parent_id, continued.trace_state) == (CALLER_TRACE, CALLER_SPAN, "rojo=00f067aa0ba902b7")
        assert continued.attributes["jsonrpc.request.id"] == str(reply["id"])
        thread_span = one(children(otlp, one(children(otlp, continued))))  # from the worker thread, under the middleware
        assert thread_span.name == "inner thread work"
        read = one(otlp.named("resources/read"))  # the URI is an attribute, never in the name
        assert read.attributes["mcp.resource.uri"] == "traced://notes/x" and "gen_ai.tool.name" not in read.attributes
        prompt = one(otlp.named("prompts/get summarize"))
        assert prompt.attributes["gen_ai.prompt.name"] == "summarize" and "gen_ai.operation.name" not in prompt.attributes
        listed = one(otlp.named("tools/list"))
        assert (listed.kind, listed.status) == ("SERVER", "UNSET") and "gen_ai.tool.name" not in listed.attributes
        # answered by the protocol core itself, recorded like any other request
        init = one(otlp.named("initialize"))
        assert (init.kind, init.status, init.parent_id) == ("SERVER", "UNSET", "")
        assert init.attributes == {"mcp.method.name": "initialize", "network.transport": "pipe",
                                   "mcp.protocol.version": "2025-11-25", "jsonrpc.request.id": "1001"}
        assert one(otlp.named("ping")).attributes["mcp.method.name"] == "ping"
        refused = one(otlp.named("logging/setLevel"))
        assert refused.status == "ERROR" and refused.attributes["error.type"] == "-32602"
        assert not otlp.named("notifications/initialized")
        note = one(otlp.named("notifications/roots/list_changed"))
        assert (note.kind, note.trace_id, note.parent_id) == ("SERVER", CALLER_TRACE, CALLER_SPAN)
        assert note.attributes == {"mcp.method.name": "notifications/roots/list_changed", "network.transport": "pipe"}
        assert {p for p in otlp.posts} == {"/v1/traces"}


def test_http_spans_and_traceparent_from_meta_and_header() -> None:
    with OtlpReceiver() as otlp:
        with HttpServer(*SERVE_PLUGIN, "--traces", env=otlp.env("on-http")) as srv:
            sid = srv.initialize()
            # initialize, answered by the protocol core: a span too, continuing the POST's header
            opened = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "tr", "version": "0"}}
            status, init_headers, _ = srv.rpc("initialize", opened, headers={"traceparent": HEADER_TRACEPARENT}, rid=99)
            assert status == 200
            assert srv.rpc("tools/call", tool_call("work", {"n": 2}), session=sid)[0] == 200
            assert srv.rpc("tools/call", tool_call("broken"), session=sid)[2]["result"]["isError"] is True
            assert srv.rpc("tools/call", tool_call("no_such_tool"), session=sid)[2]["error"]["code"] == -32602
            # a session's request: the HTTP header is the parent when _meta has none
            srv.rpc("tools/call", tool_call("work", {"n": 4}), session=sid, headers={"traceparent": HEADER_TRACEPARENT}, rid=7)
            # both: _meta wins, the HTTP request's context becomes a link
            srv.rpc("tools/call", tool_call("work", {"n": 5}, {"traceparent": TRACEPARENT}), session=sid,
                    headers={"traceparent": HEADER_TRACEPARENT}, rid=8)
            # the stateless era: the header, then _meta
            stateless = {**modern_headers("tools/call", "work_in_thread"), "traceparent": HEADER_TRACEPARENT}
            status, _, reply = srv.rpc("tools/call", tool_call("work_in_thread", {"n": 1}, modern_meta()), headers=stateless, rid="s1")
            assert status == 200 and reply["result"]["content"][0]["text"] == "worked 1 in a thread"
            srv.rpc("tools/call", tool_call("work_in_thread", {"n": 2}, modern_meta(traceparent=TRACEPARENT)),
                    headers=modern_headers("tools/call", "work_in_thread"), rid="s2")
            # refused by the protocol core before any handler (its Mcp-Name header names another tool)
            refused = {**modern_headers("tools/call", "other"), "traceparent": HEADER_TRACEPARENT}
            status, _, reply = srv.rpc("tools/call", tool_call("work", {}, modern_meta()), headers=refused, rid="bad")
            assert status == 400 and reply["error"]["code"] < 0
            assert srv.stop() == 0  # SIGTERM: the spans still waiting are exported before it exits
        check_tool_spans(otlp, "on-http", "tcp", "2025-11-25", sid)
        bad = one([s for s in otlp.named("tools/call work") if s.attributes["jsonrpc.request.id"] == "bad"])
        assert (bad.status, bad.trace_id, bad.parent_id) == ("ERROR", HEADER_TRACE, HEADER_SPAN)
        assert bad.attributes["error.type"] == str(reply["error"]["code"]) and bad.attributes["gen_ai.tool.name"] == "work"
        init = one([s for s in otlp.named("initialize") if s.attributes["jsonrpc.request.id"] == "99"])
        assert (init.kind, init.trace_id, init.parent_id) == ("SERVER", HEADER_TRACE, HEADER_SPAN)
        assert init.attributes["mcp.session.id"] == init_headers["mcp-session-id"]
        by_header = one([s for s in otlp.named("tools/call work") if s.attributes["jsonrpc.request.id"] == "7"])
        assert (by_header.trace_id, by_header.parent_id, by_header.links) == (HEADER_TRACE, HEADER_SPAN, [])
        assert by_header.attributes["mcp.session.id"] == sid
        both = one([s for s in otlp.named("tools/call work") if s.attributes["jsonrpc.request.id"] == "8"])
        assert (both.trace_id, both.parent_id, both.links) == (CALLER_TRACE, CALLER_SPAN, [(HEADER_TRACE, HEADER_SPAN)])
        s1, s2 = sorted(otlp.named("tools/call work_in_thread"), key=lambda s: s.attributes["jsonrpc.request.id"])
        assert (s1.trace_id, s1.parent_id, s2.trace_id, s2.parent_id) == (HEADER_TRACE, HEADER_SPAN, CALLER_TRACE, CALLER_SPAN)
        assert s1.attributes == {"mcp.method.name": "tools/call", "network.transport": "tcp", "network.protocol.name": "http",
                                 "mcp.protocol.version": "2026-07-28", "jsonrpc.request.id": "s1",
                                 "gen_ai.tool.name": "work_in_thread", "gen_ai.operation.name": "execute_tool"}


def test_a_server_request_is_a_client_span_with_its_context_in_meta() -> None:
    """An elicitation the tool sends (handshake era, stdio): a CLIENT span, child of the
    request's SERVER span, its traceparent in the sent request's params._meta; a client that
    answers with an error marks it."""
    with OtlpReceiver() as otlp:
        with Server(*SERVE_PLUGIN, "--traces", env=otlp.env("asks")) as srv:
            srv.initialize(capabilities={"elicitation": {}})
            srv.send({"jsonrpc": "2.0", "id": "a1", "method": "tools/call", "params": tool_call("ask_name", {}, {"traceparent": TRACEPARENT})})
            ask = srv.recv()
            assert ask["method"] == "elicitation/create"
            sent = ask["params"]["_meta"]["traceparent"]
            srv.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Lin"}}})
            assert srv.recv()["result"]["content"][0]["text"] == "Hello, Lin!"
            srv.send({"jsonrpc": "2.0", "id": "a2", "method": "tools/call", "params": tool_call("ask_name", {})})
            ask = srv.recv()
            srv.send({"jsonrpc": "2.0", "id": ask["id"], "error": {"code": -32603, "message": "no user here"}})
            assert srv.recv()["result"]["isError"] is True
            assert srv.close() == 0
        tool = one([s for s in otlp.named("tools/call ask_name") if s.attributes["jsonrpc.request.id"] == "a1"])
        asked = [s for s in otlp.named("elicitation/create") if s.trace_id == CALLER_TRACE]
        (client,) = asked
        mw = one(children(otlp, tool))  # the tool runs under the plugin's middleware span
        assert (client.kind, client.parent_id, client.status) == ("CLIENT", mw.span_id, "UNSET")
        assert client.attributes["mcp.method.name"] == "elicitation/create" and client.attributes["network.transport"] == "pipe"
        assert sent == f"00-{client.trace_id}-{client.span_id}-01"  # the client gets the CLIENT span as its parent
        failed = one([s for s in otlp.named("elicitation/create") if s.trace_id != CALLER_TRACE])
        assert failed.status == "ERROR" and failed.attributes["error.type"] == "PeerError"


def test_legacy_sse_spans_take_the_post_header() -> None:
    """The legacy HTTP+SSE transport: answers travel on the GET stream, the trace context on the
    POST /messages that carried the request (its traceparent header, then _meta)."""
    with OtlpReceiver() as otlp:
        with HttpServer(*SERVE_PLUGIN, "--traces", env=otlp.env("on-sse")) as srv:
            c = srv.conn()
            c.request("GET", "/sse", headers={"Accept": "text/event-stream"})
            resp = c.getresponse()
            events = sse_events(resp)
            endpoint = next(events)["data"]
            sid = endpoint.split("session_id=")[1]

            def post(msg: dict[str, Any], headers: dict[str, str] | None = None) -> dict[str, Any]:
                status = srv.call("POST", endpoint, msg, headers or {})[0]
                assert status == 202
                return json.loads(next(e for e in events if e.get("event") == "message")["data"])

            opened = {"protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "sse", "version": "0"}}
            assert post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": opened})["result"]
            c2 = {"jsonrpc": "2.0", "method": "notifications/initialized"}
            assert srv.call("POST", endpoint, c2, {})[0] == 202
            reply = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": tool_call("work", {"n": 3})},
                         {"traceparent": HEADER_TRACEPARENT})
            assert reply["result"]["content"][0]["text"] == "worked 3"
            c.close()
            assert srv.stop() == 0
        work = one(otlp.named("tools/call work", "on-sse"))
        assert (work.trace_id, work.parent_id) == (HEADER_TRACE, HEADER_SPAN)
        assert work.attributes["mcp.session.id"] == sid and work.attributes["network.transport"] == "tcp"
        init = one(otlp.named("initialize", "on-sse"))
        assert init.attributes["mcp.protocol.version"] == "2024-11-05" and init.parent_id == ""


def test_every_worker_exports_its_spans() -> None:
    """--workers 2: each forked worker has its own provider and exporter, and flushes what it
    holds when it is stopped (a worker leaves with os._exit: no atexit would do it)."""
    with OtlpReceiver() as otlp:
        env = {**otlp.env("workers"), "OTEL_BSP_SCHEDULE_DELAY": "60000"}  # nothing leaves before the stop
        with HttpServer(*SERVE_PLUGIN, "--traces", "--workers", "2", env=env) as srv:
            for i in range(40):
                status, _, _ = srv.rpc("tools/call", tool_call("work", {"n": 2}, modern_meta()),
                                       headers=modern_headers("tools/call", "work"), rid=i)
                assert status == 200
            assert otlp.posts == []
            assert srv.stop() == 0
        spans = otlp.wait_for(lambda: len(otlp.named("tools/call work")) == 40 and otlp.named("tools/call work"))
        assert sorted(int(s.attributes["jsonrpc.request.id"]) for s in spans) == list(range(40))
        assert all(s.instance for s in spans)


@pytest.mark.parametrize("upstream_transport", ["http", "stdio"])
def test_one_trace_across_a_gateway_hop(tmp_path: Path, upstream_transport: str) -> None:
    """The caller's span -> the gateway's SERVER span -> its CLIENT span to the upstream -> the
    upstream's SERVER span -> the middleware and tool spans there: one trace, each the parent of
    the next, exported by two processes to the same endpoint."""
    with OtlpReceiver() as otlp, contextlib.ExitStack() as stack:
        if upstream_transport == "http":
            upstream = stack.enter_context(HttpServer(*SERVE_PLUGIN, "--traces", env=otlp.env("upstream")))
            table: dict = {"url": f"http://127.0.0.1:{upstream.port}/mcp"}
        else:  # the gateway starts it, with its own environment plus env
            table = {"command": [MCPKIT, "serve", *SERVE_PLUGIN, "--traces"], "env": {"OTEL_SERVICE_NAME": "upstream"}}
        config = write_config(tmp_path / "gw.toml", {"up": table})
        with HttpServer("--config", str(config), "--plugin", "up", "--traces", env=otlp.env("gateway")) as gw:
            status, _, reply = gw.rpc("tools/call", tool_call("up_work", {"n": 2}, modern_meta(traceparent=TRACEPARENT)),
                                      headers=modern_headers("tools/call", "up_work"), rid=41)
            assert status == 200 and reply["result"]["content"][0]["text"] == "worked 2", reply
            assert gw.stop() == 0
        if upstream_transport == "http":
            assert upstream.stop() == 0
        entry = otlp.wait_for(lambda: otlp.named("tools/call up_work", "gateway"))[0]
        assert (entry.kind, entry.trace_id, entry.parent_id) == ("SERVER", CALLER_TRACE, CALLER_SPAN)
        client = one(otlp.wait_for(lambda: [s for s in children(otlp, entry) if s.kind == "CLIENT"]))
        assert (client.name, client.service) == ("tools/call work", "gateway")
        assert client.attributes["gen_ai.tool.name"] == "work" and client.attributes["mcp.method.name"] == "tools/call"
        assert client.attributes["network.transport"] == ("tcp" if upstream_transport == "http" else "pipe")
        served = one(otlp.wait_for(lambda: children(otlp, client)))
        assert (served.name, served.kind, served.service) == ("tools/call work", "SERVER", "upstream")
        assert served.attributes["network.transport"] == ("tcp" if upstream_transport == "http" else "pipe")
        mw = one(children(otlp, served))
        assert mw.name == "middleware audit" and one(children(otlp, mw)).name == "inner work"


def test_traces_off_exports_nothing_and_loads_no_opentelemetry() -> None:
    with OtlpReceiver() as otlp:
        env = otlp.env("off")
        with Server(*SERVE_PLUGIN, env=env) as srv:  # the OTEL_* variables alone do not turn traces on
            srv.initialize()
            reply = srv.request("tools/call", tool_call("otel_modules"))
            assert json.loads(reply["result"]["content"][0]["text"]) == {"result": []}
            assert srv.close() == 0
        with HttpServer(*SERVE_PLUGIN, env=env) as srv:
            status, _, reply = srv.rpc("tools/call", tool_call("otel_modules", meta=modern_meta(traceparent=TRACEPARENT)),
                                       headers={**modern_headers("tools/call", "otel_modules"), "traceparent": HEADER_TRACEPARENT})
            assert status == 200 and json.loads(reply["result"]["content"][0]["text"]) == {"result": []}
            assert srv.stop() == 0
        assert otlp.posts == []


def test_settings_and_variables() -> None:
    """MCPKIT_TRACES (the setting ``traces``) turns it on too; an exporter mcpkit
    cannot use stops the start in one line (stdout stays empty)."""
    with OtlpReceiver() as otlp:
        with Server(*SERVE_PLUGIN, env={**otlp.env("by-env"), "MCPKIT_TRACES": "true"}) as srv:
            srv.initialize()
            srv.request("tools/call", tool_call("work", {"n": 2}))
            assert srv.close() == 0
        assert otlp.named("tools/call work", "by-env")
    for variable, value in (("OTEL_TRACES_EXPORTER", "zipkin"), ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")):
        proc = subprocess.run([MCPKIT, "serve", *SERVE_PLUGIN, "--traces"], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, env={**os.environ, variable: value})
        assert proc.returncode == 1 and proc.stdout == "", proc.stderr
        assert proc.stderr.splitlines()[-1].startswith(f"Error: {variable}={value}: traces are exported"), proc.stderr
