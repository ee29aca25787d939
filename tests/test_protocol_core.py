"""The sans-IO core on its own: framing, lifecycle state machine, envelopes, schemas."""

from __future__ import annotations

import json
from typing import Annotated, Any

import msgspec
import pytest

import mcpkit
from mcpkit.protocol import jsonrpc
from mcpkit.protocol.connection import Batch, CancelRequested, Reply, RequestReceived, ResponseReceived, ServerConnection
from mcpkit.protocol.versions import negotiate
from mcpkit.server.mrtr import StateSealer


def conn() -> ServerConnection:
    return ServerConnection(server_info={"name": "t", "version": "1"}, capabilities={"tools": {}, "completions": {}})


def frame(**msg: Any) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **msg}).encode()


def reply_of(events: list[Any]) -> dict[str, Any]:
    assert len(events) == 1 and isinstance(events[0], Reply), events
    return json.loads(events[0].answer.encode())


def init(c: ServerConnection, version: str = "2025-06-18") -> dict[str, Any]:
    return reply_of(c.receive(frame(id=0, method="initialize", params={"protocolVersion": version, "capabilities": {"sampling": {}}, "clientInfo": {"name": "c", "version": "9"}})))


def test_decode_kinds() -> None:
    assert jsonrpc.decode(frame(id=1, method="x")).is_request
    assert jsonrpc.decode(frame(method="x")).is_notification
    assert jsonrpc.decode(frame(id=1, result={})).is_response
    with pytest.raises(jsonrpc.ProtocolError) as err:
        jsonrpc.decode(b"{")
    assert err.value.code == -32700
    assert isinstance(jsonrpc.decode(b'{"id": 4}'), jsonrpc.Invalid)
    assert jsonrpc.decode(b'{"jsonrpc":"2.0","id":{"a":1},"method":"x"}').id is None  # type: ignore[union-attr]
    assert isinstance(jsonrpc.decode(b"[1, 2]"), list)


def test_negotiation() -> None:
    assert negotiate("2024-11-05") == "2024-11-05"
    assert negotiate("2026-07-28") == "2025-11-25"  # not a handshake revision
    assert negotiate("garbage") == "2025-11-25"


def test_lifecycle_state_machine() -> None:
    c = conn()
    early = reply_of(c.receive(frame(id=1, method="tools/list")))
    assert early["error"]["code"] == -32600
    assert reply_of(c.receive(frame(id=2, method="ping")))["result"] == {}
    result = init(c, "2024-11-05")["result"]
    assert result["protocolVersion"] == "2024-11-05" and "completions" not in result["capabilities"]
    assert init(c)["error"]["code"] == -32600  # only once
    assert c.receive(frame(method="notifications/initialized")) == [] and c.initialized
    (req,) = c.receive(frame(id=3, method="tools/list", params={"cursor": None}))
    assert isinstance(req, RequestReceived) and req.features.version == "2024-11-05" and req.envelope is None
    assert req.client_capabilities == {"sampling": {}}
    assert reply_of(c.receive(frame(id=4, method="logging/setLevel", params={"level": "warning"})))["result"] == {}
    assert c.log_level == "warning"
    (cancel,) = c.receive(frame(method="notifications/cancelled", params={"requestId": 3}))
    assert cancel == CancelRequested(3, None)
    (resp,) = c.receive(frame(id=1, result={"ok": True}))
    assert resp == ResponseReceived(1, {"ok": True}, None)


def test_stateless_envelope_checks() -> None:
    c = conn()
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
            "io.modelcontextprotocol/logLevel": "debug"}
    (req,) = c.receive(frame(id=1, method="tools/call", params={"name": "x", "_meta": meta}))
    assert isinstance(req, RequestReceived) and req.features.stateless and req.log_level == "debug"
    assert req.client_capabilities == {"elicitation": {}}
    assert c.version is None  # stateless requests leave the handshake state alone
    missing = reply_of(c.receive(frame(id=2, method="server/discover", params={})))
    assert missing["error"]["code"] == -32602 and missing["id"] == 2
    wrong = dict(meta, **{"io.modelcontextprotocol/protocolVersion": "2030-01-01"})
    err = reply_of(c.receive(frame(id=3, method="tools/list", params={"_meta": wrong})))["error"]
    assert err["code"] == -32022 and err["data"]["requested"] == "2030-01-01"


def test_batches_follow_the_revision() -> None:
    c = conn()
    init(c, "2025-03-26")
    (batch,) = c.receive(json.dumps([json.loads(frame(id=1, method="tools/list")), {"bad": 1}]).encode())
    assert isinstance(batch, Batch) and isinstance(batch.events[0], RequestReceived) and isinstance(batch.events[1], Reply)
    c2 = conn()
    init(c2, "2025-11-25")
    assert reply_of(c2.receive(b"[]"))["error"]["code"] == -32600


class Point(msgspec.Struct):
    x: int
    y: int


def test_tool_schema_and_validation_messages() -> None:
    @mcpkit.tool
    async def place(name: Annotated[str, msgspec.Meta(min_length=2, description="Label")], at: Point, tags: list[str] = [], ctx: mcpkit.Context | None = None) -> Point:
        """Put a label somewhere."""
        return at

    schema = place.input_schema
    assert schema["required"] == ["name", "at"] and "ctx" not in schema["properties"]
    assert schema["properties"]["name"]["description"] == "Label"
    assert schema["properties"]["at"] == {"$ref": "#/$defs/Point"} and "Point" in schema["$defs"]
    assert place.output_schema is not None and place.output_schema["required"] == ["x", "y"]
    assert place.description == "Put a label somewhere."
    assert place.parse_arguments({"name": "ab", "at": {"x": 1, "y": 2}})["at"] == Point(1, 2)
    with pytest.raises(ValueError, match=r"argument `name`: expected `str` of length >= 2"):
        place.parse_arguments({"name": "a", "at": {"x": 1, "y": 2}})
    with pytest.raises(ValueError, match=r"argument `at.y`: expected `int`, got `str`"):
        place.parse_arguments({"name": "ab", "at": {"x": 1, "y": "2"}})
    with pytest.raises(ValueError, match=r"missing required argument `at`"):
        place.parse_arguments({"name": "ab"})


def test_non_object_outputs_are_wrapped() -> None:
    @mcpkit.tool
    def numbers(n: int) -> list[int]:
        return list(range(n))

    assert numbers.output_schema == {"type": "object", "properties": {"result": {"type": "array", "items": {"type": "integer"}}}, "required": ["result"]}
    assert numbers.to_result(numbers(3)).structured == {"result": [0, 1, 2]}


def test_resource_templates_match_segments() -> None:
    @mcpkit.resource("code://{project}/{path}")
    def code(project: str, path: str) -> str:
        return ""

    assert code.match("code://proj/src/a%20b.py") == {"project": "proj", "path": "src/a b.py"}
    assert code.match("code://proj") is None
    assert code.match("other://proj/x") is None


def test_request_state_is_tamper_proof() -> None:
    sealer = StateSealer(b"k" * 32)
    token = sealer.seal("tools/call", "t", {"step": 2})
    assert sealer.open("tools/call", "t", token) == {"step": 2}
    for bad in (token + "-TAMPERED", token.replace(".", ".x"), "nonsense"):
        with pytest.raises(ValueError):
            sealer.open("tools/call", "t", bad)
    with pytest.raises(ValueError):
        sealer.open("tools/call", "other-tool", token)
    with pytest.raises(ValueError):
        StateSealer(b"z" * 32).open("tools/call", "t", token)
