"""End-to-end over a real `mcpkit serve` subprocess, for every revision."""

from __future__ import annotations

import json
import subprocess
import time

import pytest

from mcpkit.transports.stdio import EOF_GRACE_S

from .helpers import MCPKIT, STATELESS, Server, modern_meta

HANDSHAKE = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]


@pytest.mark.parametrize("version", HANDSHAKE)
def test_handshake_revisions_list_and_call(hello: Server, version: str) -> None:
    init = hello.initialize(version)["result"]
    assert init["protocolVersion"] == version
    assert init["serverInfo"]["name"] == "mcpkit"
    tools = {t["name"]: t for t in hello.request("tools/list")["result"]["tools"]}
    assert {"greet", "count", "forecast", "word_count"} <= set(tools)
    assert tools["greet"]["inputSchema"]["required"] == ["name"]
    # fields a revision does not know are not sent
    assert ("outputSchema" in tools["forecast"]) == (version >= "2025-06-18")
    assert ("annotations" in tools["greet"]) == (version >= "2025-03-26")
    reply = hello.request("tools/call", {"name": "greet", "arguments": {"name": "Ada", "excited": True}})
    assert reply["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    assert "resultType" not in reply["result"]
    structured = hello.request("tools/call", {"name": "forecast", "arguments": {"city": "Oslo"}})["result"]
    assert json.loads(structured["content"][0]["text"])["city"] == "Oslo"
    assert ("structuredContent" in structured) == (version >= "2025-06-18")


def test_unknown_version_gets_newest_handshake(hello: Server) -> None:
    assert hello.initialize("1999-01-01")["result"]["protocolVersion"] == "2025-11-25"


def test_stateless_era_on_the_same_server(hello: Server) -> None:
    disc = hello.request("server/discover", {"_meta": modern_meta()})["result"]
    assert disc["supportedVersions"] == [STATELESS]
    assert disc["resultType"] == "complete"
    assert disc["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "mcpkit"
    assert "tools" in disc["capabilities"]
    listed = hello.request("tools/list", {"_meta": modern_meta()})["result"]
    assert listed["resultType"] == "complete" and listed["ttlMs"] >= 0 and listed["cacheScope"] in ("public", "private")
    call = hello.request("tools/call", {"name": "greet", "arguments": {"name": "Bo"}, "_meta": modern_meta()})["result"]
    assert call["content"][0]["text"] == "Hello, Bo." and call["resultType"] == "complete"
    read = hello.request("resources/read", {"uri": "hello://greeting", "_meta": modern_meta()})["result"]
    assert read["contents"][0]["text"].startswith("Hello") and "ttlMs" in read


def test_stateless_errors(hello: Server) -> None:
    bad = hello.request("tools/list", {"_meta": modern_meta("2099-01-01")})["error"]
    assert bad["code"] == -32022 and bad["data"] == {"supported": [STATELESS], "requested": "2099-01-01"}
    missing = hello.request("server/discover", {"_meta": {"io.modelcontextprotocol/protocolVersion": STATELESS}})["error"]
    assert missing["code"] == -32602
    for removed in ("ping", "logging/setLevel", "initialize", "resources/subscribe"):
        err = hello.request(removed, {"_meta": modern_meta(), "uri": "x", "level": "info"})["error"]
        assert err["code"] == -32601, removed
    notfound = hello.request("resources/read", {"uri": "hello://nope", "_meta": modern_meta()})["error"]
    assert notfound["code"] == -32602 and notfound["data"] == {"uri": "hello://nope"}


def test_stateless_log_level_is_per_request(hello: Server) -> None:
    hello.request("tools/call", {"name": "count", "arguments": {"to": 2, "delay": 0}, "_meta": modern_meta()})
    assert not [m for m in hello.seen if m.get("method") == "notifications/message"]
    meta = modern_meta(**{"io.modelcontextprotocol/logLevel": "info"})
    hello.request("tools/call", {"name": "count", "arguments": {"to": 2, "delay": 0}, "_meta": meta})
    assert [m for m in hello.seen if m.get("method") == "notifications/message"]


def test_requests_before_initialize_are_rejected_but_ping_works(hello: Server) -> None:
    assert hello.request("tools/list")["error"]["code"] == -32600
    assert hello.request("ping")["result"] == {}
    hello.initialize()
    assert "tools" in hello.request("tools/list")["result"]


def test_protocol_errors(hello: Server) -> None:
    hello.initialize()
    hello.send_raw(b"{not json")
    parse = hello.recv()
    assert parse == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": parse["error"]["message"]}}
    hello.send_raw(b'{"jsonrpc":"1.0","id":7,"method":"tools/list"}')
    assert hello.recv()["error"]["code"] == -32600
    assert hello.request("no/such/method")["error"]["code"] == -32601
    unknown_tool = hello.request("tools/call", {"name": "nope", "arguments": {}})["error"]
    assert unknown_tool["code"] == -32602 and "nope" in unknown_tool["message"]
    assert hello.request("tools/call", {"arguments": {}})["error"]["code"] == -32602  # name missing
    assert hello.request("prompts/get", {"name": "introduce", "arguments": {}})["error"]["code"] == -32602
    assert hello.request("logging/setLevel", {"level": "loud"})["error"]["code"] == -32602


@pytest.mark.parametrize(("version", "as_result"), [("2025-06-18", False), ("2025-11-25", True)])
def test_bad_tool_arguments(hello: Server, version: str, as_result: bool) -> None:
    hello.initialize(version)
    reply = hello.request("tools/call", {"name": "count", "arguments": {"to": 0}})
    if as_result:
        assert reply["result"]["isError"] is True
        text = reply["result"]["content"][0]["text"]
    else:
        assert reply["error"]["code"] == -32602
        text = reply["error"]["message"]
    assert "`to`" in text and ">= 1" in text
    assert "Traceback" not in text


def test_raising_tool_and_timeout(hello: Server) -> None:
    hello.initialize()
    failed = hello.request("tools/call", {"name": "fail", "arguments": {"message": "disk on fire"}})["result"]
    assert failed == {"content": [{"type": "text", "text": "disk on fire"}], "isError": True}
    start = time.monotonic()
    slow = hello.request("tools/call", {"name": "sleepy", "arguments": {"seconds": 30}})["result"]
    assert slow["isError"] and "timed out after 0.2 s" in slow["content"][0]["text"]
    assert time.monotonic() - start < 5


def test_progress_and_logging(hello: Server) -> None:
    hello.initialize()
    assert hello.request("logging/setLevel", {"level": "debug"})["result"] == {}
    reply = hello.request("tools/call", {"name": "count", "arguments": {"to": 3, "delay": 0}, "_meta": {"progressToken": 42}})
    progress = [m["params"] for m in hello.seen if m["method"] == "notifications/progress"]
    assert [p["progress"] for p in progress] == [1, 2, 3] and all(p["progressToken"] == 42 and p["total"] == 3 for p in progress)
    assert any(m["method"] == "notifications/message" for m in hello.seen)
    assert reply["result"]["content"][0]["text"] == "Counted to 3."
    hello.request("logging/setLevel", {"level": "error"})
    hello.request("tools/call", {"name": "count", "arguments": {"to": 1, "delay": 0}})
    assert not any(m["method"] == "notifications/message" for m in hello.seen)


def test_cancellation_stops_the_tool_and_sends_no_response(hello: Server) -> None:
    hello.initialize()
    hello.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {"name": "count", "arguments": {"to": 100, "delay": 0.05}}})
    time.sleep(0.2)
    hello.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow", "reason": "user"}})
    # the next answer is for the ping: nothing came back for the cancelled call
    pong = hello.request("ping")
    assert pong["result"] == {}
    time.sleep(0.3)
    assert all(m.get("id") != "slow" for m in hello.seen)
    with pytest.raises(Exception):
        while True:
            assert hello.recv(timeout=0.3).get("id") != "slow"


def test_slow_tool_does_not_block_fast_one(hello: Server) -> None:
    hello.initialize()
    hello.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {"name": "count", "arguments": {"to": 20, "delay": 0.05}}})
    start = time.monotonic()
    fast = hello.request("tools/call", {"name": "greet", "arguments": {"name": "X"}})
    assert fast["result"]["content"][0]["text"] == "Hello, X." and time.monotonic() - start < 0.5
    assert all(m.get("id") != "slow" for m in hello.seen)  # the slow one is still running


def test_sync_tool_runs(hello: Server) -> None:
    hello.initialize()
    reply = hello.request("tools/call", {"name": "word_count", "arguments": {"text": "one two three"}})["result"]
    assert reply["structuredContent"] == {"result": 3}


def test_batches_only_in_2025_03_26() -> None:
    batch = json.dumps([
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "greet", "arguments": {"name": "A"}}},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}},
    ]).encode()
    with Server("--plugin", "hello") as srv:
        srv.initialize("2025-03-26")
        srv.send_raw(batch)
        answers = srv.lines.get(timeout=10)
        assert answers is not None
        assert sorted(a["id"] for a in json.loads(answers)) == [1, 2]
    with Server("--plugin", "hello") as srv:
        srv.initialize("2025-06-18")
        srv.send_raw(batch)
        assert srv.recv()["error"]["code"] == -32600


def test_resources_prompts_completion(hello: Server) -> None:
    hello.initialize()
    res = hello.request("resources/list")["result"]["resources"]
    assert res[0]["uri"] == "hello://greeting"
    templates = hello.request("resources/templates/list")["result"]["resourceTemplates"]
    assert templates[0]["uriTemplate"] == "hello://people/{name}"
    read = hello.request("resources/read", {"uri": "hello://people/Grace%20H"})["result"]["contents"][0]
    assert read["text"] == "Grace H is a friend of the hello plugin."
    assert hello.request("resources/read", {"uri": "hello://missing"})["error"]["code"] == -32002
    assert hello.request("resources/subscribe", {"uri": "hello://greeting"})["result"] == {}
    prompt = hello.request("prompts/get", {"name": "introduce", "arguments": {"name": "Ann", "style": "funny"}})["result"]
    assert prompt["messages"][0]["content"]["text"] == "Please introduce Ann in a funny style."
    listed = hello.request("prompts/list")["result"]["prompts"][0]
    assert listed["arguments"][0] == {"name": "name", "description": "Who to introduce", "required": True}
    comp = hello.request("completion/complete", {"ref": {"type": "ref/prompt", "name": "introduce"}, "argument": {"name": "style", "value": "fr"}})
    assert comp["result"]["completion"]["values"] == ["friendly"]


def test_immediate_eof_exits_at_once() -> None:
    """Input that is empty from the start (stdin from /dev/null) ends the server without waiting
    out the grace period given to in-flight requests (there are none)."""
    t0 = time.monotonic()
    done = subprocess.run([MCPKIT, "serve", "--plugin", "hello"], stdin=subprocess.DEVNULL,
                          capture_output=True, timeout=30)
    assert done.returncode == 0 and done.stdout == b""
    assert time.monotonic() - t0 < EOF_GRACE_S, done.stderr


def test_exit_0_on_eof_and_sigterm() -> None:
    with Server("--plugin", "hello") as srv:
        srv.initialize()
        assert srv.close() == 0
    with Server("--plugin", "hello") as srv:
        srv.initialize()
        srv.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "count", "arguments": {"to": 1000, "delay": 0.05}}})
        time.sleep(0.2)
        assert srv.terminate() == 0
        assert b"Traceback" not in srv.stderr


def test_elicitation_handshake_era_is_a_server_request(hello: Server) -> None:
    hello.initialize(capabilities={"elicitation": {}})
    hello.send({"jsonrpc": "2.0", "id": "ask", "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}})
    ask = hello.recv()
    assert ask["method"] == "elicitation/create" and ask["params"]["requestedSchema"]["required"] == ["name"]
    hello.send({"jsonrpc": "2.0", "id": ask["id"], "result": {"action": "accept", "content": {"name": "Lin"}}})
    assert hello.recv()["result"]["content"][0]["text"] == "Hello, Lin!"


def test_elicitation_without_capability_is_a_tool_error(hello: Server) -> None:
    hello.initialize()
    reply = hello.request("tools/call", {"name": "ask_name", "arguments": {}})["result"]
    assert reply["isError"] is True


def test_elicitation_stateless_is_a_multi_round_trip(hello: Server) -> None:
    meta = modern_meta()
    meta["io.modelcontextprotocol/clientCapabilities"] = {"elicitation": {}}
    first = hello.request("tools/call", {"name": "ask_name", "arguments": {}, "_meta": meta})["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"]["name"]["method"] == "elicitation/create"
    retry = {"name": "ask_name", "arguments": {}, "_meta": meta, "inputResponses": {"name": {"action": "accept", "content": {"name": "Mo"}}}}
    done = hello.request("tools/call", retry)["result"]
    assert done["resultType"] == "complete" and done["content"][0]["text"] == "Hello, Mo!"
    retry["inputResponses"] = {"name": 12345}
    assert hello.request("tools/call", retry)["error"]["code"] == -32602


def test_subscriptions_listen_on_stdio(hello: Server) -> None:
    hello.send({"jsonrpc": "2.0", "id": 77, "method": "subscriptions/listen", "params": {"_meta": modern_meta(), "notifications": {"toolsListChanged": True}}})
    ack = hello.recv()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == 77
    assert ack["params"]["notifications"] == {"toolsListChanged": True}
    hello.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 77}})
    assert hello.request("tools/list", {"_meta": modern_meta()})["result"]["tools"]


def test_line_framing_over_the_pipe() -> None:
    """Messages split across writes, several in one write, blank lines, and a last message
    without a newline before EOF are all read as whole lines."""
    with Server("--plugin", "hello") as srv:
        srv.initialize()
        stdin = srv.proc.stdin
        assert stdin is not None
        call = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "greet", "arguments": {"name": "Split"}}}).encode()
        stdin.write(call[:17]); stdin.flush()
        time.sleep(0.2)  # the server has read half a line by now
        stdin.write(call[17:] + b"\n\n   \n"); stdin.flush()
        assert srv.recv()["result"]["content"][0]["text"] == "Hello, Split."
        many = b"".join(json.dumps({"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call",
                                    "params": {"name": "greet", "arguments": {"name": f"n{i}"}}}).encode() + b"\n"
                        for i in range(300))
        stdin.write(many); stdin.flush()
        got = {srv.recv()["id"] for _ in range(300)}
        assert got == set(range(100, 400))
        stdin.write(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                "params": {"name": "greet", "arguments": {"name": "Last"}}}).encode())
        stdin.close()  # no newline: end of input ends the line
        assert srv.recv()["result"]["content"][0]["text"] == "Hello, Last."
        assert srv.proc.wait(10) == 0
