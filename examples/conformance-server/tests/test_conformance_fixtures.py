"""The conformance fixtures, driven through a real ``mcpkit serve --plugin conformance`` over stdio.

Skipped unless the plugin is installed (``make install`` does not install it):
    .venv/bin/pip install -e examples/conformance-server --config-settings editable_mode=compat
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, Callable, Iterator

import pytest

conformance = pytest.importorskip("mcpkit_conformance")

from tests.helpers import Server, modern_meta  # noqa: E402  (the repo root is on sys.path)

HANDSHAKE = "2025-11-25"
ERAS = ["handshake", "stateless"]
CLIENT_CAPS = {"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}}

EXPECTED_TOOLS = [
    "test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
    "test_multiple_content_types", "test_tool_with_logging", "test_tool_with_progress", "test_sampling",
    "test_elicitation", "test_elicitation_sep1034_defaults", "test_elicitation_sep1330_enums",
    "test_error_handling", "test_x_mcp_header", "test_missing_capability",
    "test_input_required_result_elicitation", "test_input_required_result_sampling",
    "test_input_required_result_list_roots", "test_input_required_result_request_state",
    "test_input_required_result_multiple_inputs", "test_input_required_result_multi_round",
    "test_input_required_result_tampered_state", "test_input_required_result_capabilities",
    "json_schema_2020_12_tool", "test_reconnection", "test_trigger_tool_change", "test_trigger_prompt_change",
    "test_streaming_elicitation", "test_logging_tool",
    # the tasks scenarios' fixtures (their `greet` only with [plugins.conformance] greet = true)
    "slow_compute", "failing_job", "protocol_error_job", "confirm_delete", "multi_input", "test_tool_with_task",
]

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {"address": {"$anchor": "addressDef", "type": "object",
                          "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

# the harness's mock answers
SAMPLED = {"role": "assistant", "content": {"type": "text", "text": "This is a test response from the client"},
           "model": "test-model", "stopReason": "endTurn"}
ROOTS = {"roots": [{"uri": "file:///test/root", "name": "Test Root"}]}


def accept(**content: Any) -> dict[str, Any]:
    return {"action": "accept", "content": content}


# -- servers ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def handshake() -> Iterator[Server]:
    """One connection initialized at 2025-11-25 with the harness client's capabilities."""
    with Server("--plugin", "conformance") as srv:
        assert srv.initialize(HANDSHAKE, CLIENT_CAPS)["result"]["protocolVersion"] == HANDSHAKE
        yield srv


@pytest.fixture(scope="module")
def stateless() -> Iterator[Server]:
    """Stateless (2026-07-28) requests; no handshake."""
    with Server("--plugin", "conformance") as srv:
        yield srv


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> tuple[str, Server]:
    return request.param, request.getfixturevalue(request.param)


def meta(caps: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return modern_meta(**{"io.modelcontextprotocol/clientCapabilities": CLIENT_CAPS if caps is None else caps}, **extra)


def params_for(era_name: str, params: dict[str, Any], **meta_extra: Any) -> dict[str, Any]:
    """Add the stateless era's ``_meta`` (or just the extras, e.g. a progressToken, in the handshake era)."""
    if era_name == "stateless":
        return {**params, "_meta": meta(**meta_extra)}
    return {**params, "_meta": meta_extra} if meta_extra else params


def call(srv: Server, method: str, params: dict[str, Any], answer: Callable[[dict[str, Any]], Any] | None = None,
         timeout: float = 10.0) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Send one request; answer server->client requests with ``answer(request)``. Returns the
    response and the other messages seen meanwhile (notifications and server requests)."""
    srv._next_id += 1
    rid = srv._next_id
    srv.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while True:
        msg = srv.recv(max(0.01, deadline - time.monotonic()))
        if "method" in msg and "id" in msg:  # a server->client request
            seen.append(msg)
            assert answer is not None, f"unexpected server request {msg}"
            srv.send({"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)})
        elif msg.get("id") == rid and "method" not in msg:
            return msg, seen
        else:
            seen.append(msg)


def tool(srv: Server, era_name: str, name: str, arguments: dict[str, Any] | None = None, **kw: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    reply, _ = call(srv, "tools/call", params_for(era_name, params), **kw)
    return reply


def mrtr(srv: Server, name: str, *, caps: dict[str, Any] | None = None, method: str = "tools/call", **extra: Any) -> dict[str, Any]:
    """One stateless round of a multi round-trip request (``extra``: inputResponses, requestState)."""
    params: dict[str, Any] = {"name": name, **extra, "_meta": meta(caps)}
    if method == "tools/call":
        params["arguments"] = {}
    reply, seen = call(srv, method, params)
    assert not [m for m in seen if "id" in m], "stateless era: no server->client requests"
    return reply


# -- tools/list -------------------------------------------------------------------------------
def test_tools_list_order_names_and_schemas(era: tuple[str, Server]) -> None:
    era_name, srv = era
    listings = [call(srv, "tools/list", params_for(era_name, {}))[0]["result"] for _ in range(3)]
    tools = listings[0]["tools"]
    assert [t["name"] for t in tools] == EXPECTED_TOOLS
    assert all([t["name"] for t in listing["tools"]] == EXPECTED_TOOLS for listing in listings)  # deterministic
    for t in tools:
        assert re.fullmatch(r"[A-Za-z0-9_.-]{1,128}", t["name"])
        assert t["description"] and t["inputSchema"]["type"] == "object"
        assert "outputSchema" not in t
    by_name = {t["name"]: t for t in tools}
    assert by_name["json_schema_2020_12_tool"]["inputSchema"] == JSON_SCHEMA_2020_12
    region = by_name["test_x_mcp_header"]["inputSchema"]["properties"]["region"]
    assert region["type"] == "string" and region["x-mcp-header"] == "Region"
    assert "required" not in by_name["test_x_mcp_header"]["inputSchema"]
    assert by_name["test_simple_text"]["inputSchema"] == {"type": "object", "properties": {}}
    assert by_name["test_sampling"]["inputSchema"]["required"] == ["prompt"]
    assert by_name["test_elicitation"]["inputSchema"]["required"] == ["message"]
    if era_name == "stateless":
        assert listings[0]["resultType"] == "complete" and "ttlMs" in listings[0] and "cacheScope" in listings[0]


# -- content tools ----------------------------------------------------------------------------
def test_simple_text_with_and_without_arguments(era: tuple[str, Server]) -> None:
    era_name, srv = era
    for args in (None, {}):
        result = tool(srv, era_name, "test_simple_text", args)["result"]
        assert result["content"] == [{"type": "text", "text": "This is a simple text response for testing."}]
        assert result["isError"] is False


def test_image_audio_embedded_and_mixed_content(era: tuple[str, Server]) -> None:
    era_name, srv = era
    image = tool(srv, era_name, "test_image_content", {})["result"]["content"]
    assert image == [{"type": "image", "data": conformance.PNG_B64, "mimeType": "image/png"}]
    audio = tool(srv, era_name, "test_audio_content", {})["result"]["content"]
    assert audio == [{"type": "audio", "data": conformance.WAV_B64, "mimeType": "audio/wav"}]
    embedded = tool(srv, era_name, "test_embedded_resource", {})["result"]["content"]
    assert embedded == [{"type": "resource", "resource": {
        "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}]
    mixed = tool(srv, era_name, "test_multiple_content_types", {})["result"]["content"]
    assert [c["type"] for c in mixed] == ["text", "image", "resource"]
    assert mixed[0]["text"] == "Multiple content types test:"
    assert mixed[2]["resource"] == {"uri": "test://mixed-content-resource", "mimeType": "application/json",
                                    "text": '{"test":"data","value":123}'}


def test_error_tool_is_an_error_result(era: tuple[str, Server]) -> None:
    era_name, srv = era
    reply = tool(srv, era_name, "test_error_handling", {})
    assert "error" not in reply
    assert reply["result"]["isError"] is True and reply["result"]["content"][0]["text"]


def test_x_mcp_header_tool(era: tuple[str, Server]) -> None:
    era_name, srv = era
    assert tool(srv, era_name, "test_x_mcp_header", {"region": "Hello"})["result"]["content"][0]["text"] == "Region: Hello"


def test_progress(era: tuple[str, Server]) -> None:
    era_name, srv = era
    params = params_for(era_name, {"name": "test_tool_with_progress", "arguments": {}}, progressToken="progress-test-1")
    reply, seen = call(srv, "tools/call", params)
    assert reply["result"]["isError"] is False
    progress = [m["params"] for m in seen if m.get("method") == "notifications/progress"]
    assert len(progress) >= 3
    assert all(p["progressToken"] == "progress-test-1" for p in progress)
    values = [p["progress"] for p in progress]
    assert values == sorted(values) and values[0] == 0 and values[-1] == 100
    assert all(p["total"] == 100 for p in progress)


# -- logging ----------------------------------------------------------------------------------
def test_logging_in_the_handshake_era(handshake: Server) -> None:
    assert call(handshake, "logging/setLevel", {"level": "debug"})[0]["result"] == {}
    reply, seen = call(handshake, "tools/call", {"name": "test_tool_with_logging", "arguments": {}})
    assert reply["result"]["isError"] is False
    logs = [m["params"] for m in seen if m.get("method") == "notifications/message"]
    assert [m["data"] for m in logs] == ["Tool execution started", "Tool processing data", "Tool execution completed"]
    assert all(m["level"] == "info" for m in logs)


def test_stateless_logs_only_when_asked(stateless: Server) -> None:
    reply, seen = call(stateless, "tools/call", {"name": "test_logging_tool", "arguments": {}, "_meta": meta({})})
    assert reply["result"]["isError"] is False
    assert not [m for m in seen if m.get("method") == "notifications/message"]
    asked = meta({}, **{"io.modelcontextprotocol/logLevel": "info"})
    _, seen = call(stateless, "tools/call", {"name": "test_tool_with_logging", "arguments": {}, "_meta": asked})
    assert len([m for m in seen if m.get("method") == "notifications/message"]) == 3


# -- handshake era: server->client requests -----------------------------------------------------
def test_handshake_sampling(handshake: Server) -> None:
    reply, seen = call(handshake, "tools/call", {"name": "test_sampling", "arguments": {"prompt": "Test prompt"}},
                       answer=lambda req: SAMPLED)
    (request,) = [m for m in seen if "id" in m]
    assert request["method"] == "sampling/createMessage"
    assert request["params"] == {"messages": [{"role": "user", "content": {"type": "text", "text": "Test prompt"}}], "maxTokens": 100}
    assert reply["result"]["content"][0]["text"] == "LLM response: This is a test response from the client"


def test_handshake_elicitation_round_trip(handshake: Server) -> None:
    reply, seen = call(handshake, "tools/call", {"name": "test_elicitation", "arguments": {"message": "Please provide your info"}},
                       answer=lambda req: accept(username="testuser", email="test@example.com"))
    (request,) = [m for m in seen if "id" in m]
    assert request["method"] == "elicitation/create"
    p = request["params"]
    assert p["message"] == "Please provide your info" and p["mode"] == "form"
    assert p["requestedSchema"]["required"] == ["username", "email"]
    assert set(p["requestedSchema"]["properties"]) == {"username", "email"}
    text = reply["result"]["content"][0]["text"]
    assert text.startswith("User response: action=accept") and "testuser" in text


def test_handshake_sep1034_defaults(handshake: Server) -> None:
    reply, seen = call(handshake, "tools/call", {"name": "test_elicitation_sep1034_defaults", "arguments": {}},
                       answer=lambda req: accept(name="Jane Smith", age=25, score=88.0, status="inactive", verified=False))
    props = seen[0]["params"]["requestedSchema"]["properties"]
    assert props["name"] == {"type": "string", "description": "User name", "default": "John Doe"}
    assert props["age"]["type"] == "integer" and props["age"]["default"] == 30
    assert props["score"]["type"] == "number" and props["score"]["default"] == 95.5
    assert props["status"]["enum"] == ["active", "inactive", "pending"] and props["status"]["default"] == "active"
    assert props["verified"]["type"] == "boolean" and props["verified"]["default"] is True
    assert reply["result"]["content"][0]["text"].startswith("Elicitation completed: action=accept, content=")


def test_handshake_sep1330_enums(handshake: Server) -> None:
    reply, seen = call(handshake, "tools/call", {"name": "test_elicitation_sep1330_enums", "arguments": {}},
                       answer=lambda req: accept(untitledSingle="option1", titledSingle="value1", legacyEnum="opt1",
                                                 untitledMulti=["option1", "option2"], titledMulti=["value1", "value2"]))
    props = seen[0]["params"]["requestedSchema"]["properties"]
    assert "enum" in props["untitledSingle"] and "oneOf" not in props["untitledSingle"] and "enumNames" not in props["untitledSingle"]
    assert "oneOf" in props["titledSingle"] and "enum" not in props["titledSingle"]
    assert len(props["legacyEnum"]["enum"]) == len(props["legacyEnum"]["enumNames"])
    assert props["untitledMulti"]["type"] == "array" and "enum" in props["untitledMulti"]["items"]
    assert "anyOf" not in props["untitledMulti"]["items"]
    assert "anyOf" in props["titledMulti"]["items"] and "enum" not in props["titledMulti"]["items"]
    assert "action=accept" in reply["result"]["content"][0]["text"]


def test_handshake_input_required_tools_send_requests(handshake: Server) -> None:
    """In the handshake era the MRTR tools ask the client directly, one request per input."""
    answers = {"elicitation/create": accept(name="Alice", color="blue"), "sampling/createMessage": SAMPLED, "roots/list": ROOTS}
    reply, seen = call(handshake, "tools/call", {"name": "test_input_required_result_multi_round", "arguments": {}},
                       answer=lambda req: answers[req["method"]])
    assert [m["method"] for m in seen if "id" in m] == ["elicitation/create", "elicitation/create"]
    assert reply["result"]["content"][0]["text"] == "Hello, Alice! Your favorite color is blue."
    reply, seen = call(handshake, "tools/call", {"name": "test_input_required_result_multiple_inputs", "arguments": {}},
                       answer=lambda req: answers[req["method"]])
    assert sorted(m["method"] for m in seen if "id" in m) == ["elicitation/create", "roots/list", "sampling/createMessage"]
    assert reply["result"]["isError"] is False


def test_handshake_reconnection_tool_completes(handshake: Server) -> None:
    reply, _ = call(handshake, "tools/call", {"name": "test_reconnection", "arguments": {}})
    assert reply["result"]["isError"] is False  # close_stream is a no-op over stdio


# -- stateless era: multi round-trip requests (SEP-2322) --------------------------------------------
def test_mrtr_basic_elicitation(stateless: Server) -> None:
    r1 = mrtr(stateless, "test_input_required_result_elicitation")["result"]
    assert r1["resultType"] == "input_required"
    req = r1["inputRequests"]["user_name"]
    assert req["method"] == "elicitation/create"
    assert req["params"]["message"] == "What is your name?"
    assert req["params"]["requestedSchema"] == {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    retry = {"inputResponses": {"user_name": accept(name="Alice")}}
    if "requestState" in r1:
        retry["requestState"] = r1["requestState"]
    r2 = mrtr(stateless, "test_input_required_result_elicitation", **retry)["result"]
    assert r2["resultType"] == "complete" and r2["content"][0]["text"] == "Hello, Alice!"


def test_mrtr_missing_extra_and_invalid_responses(stateless: Server) -> None:
    name = "test_input_required_result_elicitation"
    wrong = mrtr(stateless, name, inputResponses={"wrong_key": accept(data="wrong")})["result"]
    assert wrong["resultType"] == "input_required" and "user_name" in wrong["inputRequests"]
    extra = mrtr(stateless, name, inputResponses={"user_name": accept(name="Alice"), "unknown_extra_key": accept(foo="bar"),
                                                  "another_unexpected": accept(baz=123)})["result"]
    assert extra["resultType"] == "complete"
    invalid = mrtr(stateless, name, inputResponses={"user_name": 12345})
    assert invalid["error"]["code"] == -32602
    null = mrtr(stateless, name, inputResponses=None)
    assert "error" in null or null["result"]["resultType"] == "input_required"


def test_mrtr_sampling_and_roots(stateless: Server) -> None:
    r1 = mrtr(stateless, "test_input_required_result_sampling")["result"]
    req = r1["inputRequests"]["capital_question"]
    assert req["method"] == "sampling/createMessage" and req["params"]["maxTokens"] == 100
    assert req["params"]["messages"][0]["content"]["text"] == "What is the capital of France?"
    r2 = mrtr(stateless, "test_input_required_result_sampling", inputResponses={"capital_question": SAMPLED})["result"]
    assert r2["resultType"] == "complete" and "test response" in r2["content"][0]["text"]
    r1 = mrtr(stateless, "test_input_required_result_list_roots")["result"]
    assert r1["inputRequests"]["client_roots"] == {"method": "roots/list", "params": {}}
    r2 = mrtr(stateless, "test_input_required_result_list_roots", inputResponses={"client_roots": ROOTS})["result"]
    assert r2["resultType"] == "complete" and "file:///test/root" in r2["content"][0]["text"]


def test_mrtr_request_state(stateless: Server) -> None:
    r1 = mrtr(stateless, "test_input_required_result_request_state")["result"]
    assert r1["resultType"] == "input_required" and isinstance(r1["requestState"], str)
    assert r1["inputRequests"]["confirm"]["params"]["requestedSchema"]["properties"] == {"ok": {"type": "boolean"}}
    r2 = mrtr(stateless, "test_input_required_result_request_state",
              inputResponses={"confirm": accept(ok=True)}, requestState=r1["requestState"])["result"]
    assert r2["resultType"] == "complete" and "state-ok" in r2["content"][0]["text"]


def test_mrtr_multiple_inputs(stateless: Server) -> None:
    r1 = mrtr(stateless, "test_input_required_result_multiple_inputs")["result"]
    assert r1["resultType"] == "input_required" and r1["requestState"]
    methods = {k: v["method"] for k, v in r1["inputRequests"].items()}
    assert sorted(methods.values()) == ["elicitation/create", "roots/list", "sampling/createMessage"]
    mock = {"elicitation/create": accept(name="Alice"), "sampling/createMessage": SAMPLED, "roots/list": ROOTS}
    r2 = mrtr(stateless, "test_input_required_result_multiple_inputs",
              inputResponses={k: mock[m] for k, m in methods.items()}, requestState=r1["requestState"])["result"]
    assert r2["resultType"] == "complete" and "Alice" in r2["content"][0]["text"]


def test_mrtr_multi_round(stateless: Server) -> None:
    name = "test_input_required_result_multi_round"
    r1 = mrtr(stateless, name)["result"]
    assert r1["resultType"] == "input_required" and r1["requestState"]
    (k1,) = r1["inputRequests"]
    r2 = mrtr(stateless, name, inputResponses={k1: accept(name="Alice")}, requestState=r1["requestState"])["result"]
    assert r2["resultType"] == "input_required" and r2["inputRequests"]
    assert r2["requestState"] and r2["requestState"] != r1["requestState"]
    (k2,) = r2["inputRequests"]
    assert k2 != k1
    r3 = mrtr(stateless, name, inputResponses={k2: accept(color="blue")}, requestState=r2["requestState"])["result"]
    assert r3["resultType"] == "complete"
    assert r3["content"][0]["text"] == "Hello, Alice! Your favorite color is blue."


def test_mrtr_tampered_state_is_rejected(stateless: Server) -> None:
    name = "test_input_required_result_tampered_state"
    r1 = mrtr(stateless, name)["result"]
    assert r1["resultType"] == "input_required" and r1["requestState"]
    (key,) = r1["inputRequests"]
    bad = mrtr(stateless, name, inputResponses={key: accept(ok=True)}, requestState=r1["requestState"] + "-TAMPERED")
    assert bad["error"]["code"] == -32602
    good = mrtr(stateless, name, inputResponses={key: accept(ok=True)}, requestState=r1["requestState"])
    assert good["result"]["resultType"] == "complete"


def test_mrtr_respects_client_capabilities(stateless: Server) -> None:
    name = "test_input_required_result_capabilities"
    r1 = mrtr(stateless, name, caps={"sampling": {}})["result"]
    assert r1["resultType"] == "input_required"
    methods = [v["method"] for v in r1["inputRequests"].values()]
    assert methods == ["sampling/createMessage"]
    none = mrtr(stateless, name, caps={})["result"]
    assert none["resultType"] == "complete"


def test_mrtr_prompt(stateless: Server) -> None:
    name = "test_input_required_result_prompt"
    r1 = mrtr(stateless, name, method="prompts/get")["result"]
    assert r1["resultType"] == "input_required"
    req = r1["inputRequests"]["user_context"]
    assert req["method"] == "elicitation/create"
    assert req["params"]["requestedSchema"]["properties"] == {"context": {"type": "string"}}
    r2 = mrtr(stateless, name, method="prompts/get", inputResponses={"user_context": accept(context="test context")})["result"]
    assert r2["resultType"] == "complete" and "test context" in json.dumps(r2["messages"])


def test_list_methods_never_ask_for_input(stateless: Server) -> None:
    for method in ("tools/list", "prompts/list"):
        assert call(stateless, method, {"_meta": meta()})[0]["result"]["resultType"] == "complete"


def test_streaming_elicitation_returns_input_required(stateless: Server) -> None:
    reply = mrtr(stateless, "test_streaming_elicitation", caps={"elicitation": {}})
    assert reply["result"]["resultType"] == "input_required"


# -- stateless era: capabilities and change notifications -------------------------------------------
def test_missing_capability(stateless: Server) -> None:
    reply, _ = call(stateless, "tools/call", {"name": "test_missing_capability", "arguments": {}, "_meta": meta({})})
    assert reply["error"]["code"] == -32021
    assert reply["error"]["data"] == {"requiredCapabilities": {"sampling": {}}}
    ok, _ = call(stateless, "tools/call", {"name": "test_missing_capability", "arguments": {}, "_meta": meta({"sampling": {}})})
    assert ok["result"]["isError"] is False


def test_mrtr_tools_refuse_undeclared_capabilities(stateless: Server) -> None:
    reply = mrtr(stateless, "test_input_required_result_elicitation", caps={"sampling": {}})
    assert reply["error"]["code"] == -32021 and reply["error"]["data"]["requiredCapabilities"] == {"elicitation": {}}


def test_trigger_list_changes_reach_listeners() -> None:
    with Server("--plugin", "conformance") as srv:
        srv.send({"jsonrpc": "2.0", "id": "tools-sub", "method": "subscriptions/listen",
                  "params": {"_meta": meta({}), "notifications": {"toolsListChanged": True}}})
        srv.send({"jsonrpc": "2.0", "id": "prompts-sub", "method": "subscriptions/listen",
                  "params": {"_meta": meta({}), "notifications": {"promptsListChanged": True}}})
        acks = [srv.recv(), srv.recv()]
        assert {a["method"] for a in acks} == {"notifications/subscriptions/acknowledged"}
        for trigger in ("test_trigger_tool_change", "test_trigger_prompt_change"):
            reply, seen = call(srv, "tools/call", {"name": trigger, "arguments": {}, "_meta": meta({})})
            assert reply["result"]["isError"] is False
            # the change may be forwarded just before or just after the call's answer
            while len([m for m in seen if m.get("method", "").endswith("/list_changed")]) < 1:
                seen.append(srv.recv())
            changed = [m for m in seen if m.get("method", "").endswith("/list_changed")]
            expected = ("notifications/tools/list_changed", "tools-sub") if trigger.endswith("tool_change") \
                else ("notifications/prompts/list_changed", "prompts-sub")
            assert [(m["method"], m["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]) for m in changed] == [expected]


# -- resources, prompts, completion ---------------------------------------------------------------
def test_resources(era: tuple[str, Server]) -> None:
    era_name, srv = era
    listed = call(srv, "resources/list", params_for(era_name, {}))[0]["result"]["resources"]
    assert [r["uri"] for r in listed] == ["test://static-text", "test://static-binary", "test://watched-resource"]
    assert all(r["name"] and r["description"] for r in listed)
    templates = call(srv, "resources/templates/list", params_for(era_name, {}))[0]["result"]["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["test://template/{id}/data"]

    def read(uri: str) -> dict[str, Any]:
        return call(srv, "resources/read", params_for(era_name, {"uri": uri}))[0]

    assert read("test://static-text")["result"]["contents"] == [
        {"uri": "test://static-text", "mimeType": "text/plain", "text": "This is the content of the static text resource."}]
    assert read("test://static-binary")["result"]["contents"] == [
        {"uri": "test://static-binary", "mimeType": "image/png", "blob": conformance.PNG_B64}]
    assert read("test://watched-resource")["result"]["contents"][0]["text"] == "Watched resource content"
    assert read("test://template/123/data")["result"]["contents"] == [
        {"uri": "test://template/123/data", "mimeType": "application/json",
         "text": '{"id":"123","templateTest":true,"data":"Data for ID: 123"}'}]
    missing = read("test://nonexistent-resource-for-conformance-testing")["error"]
    assert missing["data"] == {"uri": "test://nonexistent-resource-for-conformance-testing"}
    if era_name == "stateless":
        assert missing["code"] == -32602


def test_resource_subscribe_in_the_handshake_era(handshake: Server) -> None:
    assert call(handshake, "resources/subscribe", {"uri": "test://watched-resource"})[0]["result"] == {}
    assert call(handshake, "resources/unsubscribe", {"uri": "test://watched-resource"})[0]["result"] == {}


def test_prompts(era: tuple[str, Server]) -> None:
    era_name, srv = era
    listed = call(srv, "prompts/list", params_for(era_name, {}))[0]["result"]["prompts"]
    assert [p["name"] for p in listed] == ["test_simple_prompt", "test_prompt_with_arguments", "test_prompt_with_embedded_resource",
                                           "test_prompt_with_image", "test_input_required_result_prompt"]
    assert all(p["description"] for p in listed)
    by_name = {p["name"]: p for p in listed}
    assert [(a["name"], a["required"]) for a in by_name["test_prompt_with_arguments"]["arguments"]] == [("arg1", True), ("arg2", True)]

    def get(name: str, arguments: dict[str, str] | None = None) -> list[dict[str, Any]]:
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return call(srv, "prompts/get", params_for(era_name, params))[0]["result"]["messages"]

    assert get("test_simple_prompt") == [{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}]
    with_args = json.dumps(get("test_prompt_with_arguments", {"arg1": "testValue1", "arg2": "testValue2"}))
    assert "testValue1" in with_args and "testValue2" in with_args
    embedded = get("test_prompt_with_embedded_resource", {"resourceUri": "test://example-resource"})
    assert embedded[0]["content"] == {"type": "resource", "resource": {
        "uri": "test://example-resource", "mimeType": "text/plain", "text": "Embedded resource content for testing."}}
    assert embedded[1]["content"]["text"] == "Please process the embedded resource above."
    image = get("test_prompt_with_image")
    assert image[0]["content"] == {"type": "image", "data": conformance.PNG_B64, "mimeType": "image/png"}


def test_completion(era: tuple[str, Server]) -> None:
    era_name, srv = era
    params = {"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "test"}}
    completion = call(srv, "completion/complete", params_for(era_name, params))[0]["result"]["completion"]
    assert isinstance(completion["values"], list) and all(v.startswith("test") for v in completion["values"])
    assert completion["values"]
