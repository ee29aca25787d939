"""Property tests of the sans-IO core (Hypothesis): whatever bytes arrive, decoding gives a
message or a ProtocolError, the connection state machine never raises, and every request
gets exactly one well-formed answer from the real dispatcher."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import trio
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import mcpkit
from mcpkit.protocol import jsonrpc
from mcpkit.protocol.connection import Batch, Reply, RequestReceived, ServerConnection
from mcpkit.protocol.framing import LineSplitter, Oversized
from mcpkit.server.app import App
from mcpkit.protocol.session import ServerSession
from mcpkit.server.dispatch import Dispatcher
from mcpkit.server.registry import Registry
from mcpkit.server.session_runner import SessionRunner
from mcpkit.server.settings import Settings

FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
ids = st.integers(-(2**53), 2**53) | st.text(max_size=10)
methods = st.sampled_from([
    "initialize", "ping", "tools/list", "tools/call", "resources/list", "resources/read", "resources/templates/list",
    "prompts/list", "prompts/get", "completion/complete", "logging/setLevel", "resources/subscribe",
    "server/discover", "no/such/method", "notifications/initialized", "notifications/cancelled",
])
versions = st.sampled_from(["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28", "1999-01-01"])


@st.composite
def params(draw: Any) -> Any:
    base: dict[str, Any] = draw(st.dictionaries(st.sampled_from(["name", "arguments", "uri", "cursor", "level", "ref", "argument", "protocolVersion", "capabilities", "clientInfo"]), json_values, max_size=4))
    if draw(st.booleans()):
        base["name"] = draw(st.sampled_from(["echo", "add", "boom", "missing"]))
        base["arguments"] = draw(st.dictionaries(st.sampled_from(["value", "a", "b"]), json_values, max_size=3) | json_values)
    if draw(st.booleans()):
        base["_meta"] = draw(st.fixed_dictionaries({
            "io.modelcontextprotocol/protocolVersion": versions,
            "io.modelcontextprotocol/clientCapabilities": st.just({}) | json_values,
        }) | json_values)
    return draw(st.just(base) | json_values)


@st.composite
def messages(draw: Any) -> dict[str, Any]:
    msg: dict[str, Any] = {"jsonrpc": draw(st.just("2.0") | st.text(max_size=3))}
    if draw(st.booleans()):
        msg["id"] = draw(ids | st.none() | st.booleans())
    msg["method"] = draw(methods | st.text(max_size=12))
    if draw(st.booleans()):
        msg["params"] = draw(params())
    return msg


def _mutate(data: bytes, cuts: list[int], junk: bytes) -> bytes:
    for cut in cuts:
        if data:
            at = cut % len(data)
            data = data[:at] + junk + data[at + 1:]
    return data


hostile_frames = (
    st.binary(max_size=200)
    | st.builds(lambda m: json.dumps(m).encode(), messages())
    | st.builds(lambda m, cuts, junk: _mutate(json.dumps(m).encode(), cuts, junk),
                messages(), st.lists(st.integers(0, 10_000), max_size=3), st.sampled_from([b"\xff", b"\xc3", b"[", b"}", b'"', b"\\", b"\x00"]))
    | st.builds(lambda n, o: (b"[" if o else b'{"a":') * n, st.integers(100, 2000), st.booleans())
)


@FAST
@given(hostile_frames)
@example(b'{"jsonrpc":"2.0","id":1,"method":"\xff"}')
@example(b"[" * 1500)
def test_decode_gives_a_message_or_a_protocol_error(data: bytes) -> None:
    try:
        out = jsonrpc.decode(data)
    except jsonrpc.ProtocolError as exc:
        assert exc.code == jsonrpc.PARSE_ERROR
        return
    assert isinstance(out, (jsonrpc.Message, jsonrpc.Invalid, list))


@FAST
@given(st.lists(hostile_frames, min_size=1, max_size=4))
def test_the_connection_never_raises_and_replies_are_well_formed(frames: list[bytes]) -> None:
    conn = ServerConnection(server_info={"name": "t", "version": "1"}, capabilities={"tools": {}})
    for data in frames:
        for ev in conn.receive(data):
            for inner in (ev.events if isinstance(ev, Batch) else [ev]):
                if isinstance(inner, Reply):
                    _well_formed(json.loads(inner.answer.encode()))


def _well_formed(reply: dict[str, Any], rid: Any = ...) -> None:
    assert reply["jsonrpc"] == "2.0" and ("result" in reply) != ("error" in reply), reply
    if rid is not ...:
        assert reply["id"] == rid
    if "error" in reply:
        assert isinstance(reply["error"]["code"], int) and isinstance(reply["error"]["message"], str)
        assert "Traceback" not in reply["error"]["message"]


@mcpkit.tool
async def echo(value: Any = None) -> str:
    return json.dumps(value)


@mcpkit.tool
def add(a: int, b: int) -> int:
    return a + b


@mcpkit.tool
async def boom() -> str:
    raise RuntimeError("boom")


def _app() -> App:
    registry = Registry()
    for item in (echo, add, boom):
        registry.add(item, "props")
    return App(registry=registry, settings=Settings())


class _Recorder:
    """An outlet that keeps what the session sends (every request's messages are checked to be
    JSON; server-to-client requests are refused, as no client is there)."""

    can_ask = False

    def __init__(self) -> None:
        self.answers: list[bytes] = []

    def channel(self, run: Any) -> "_Recorder":
        return self

    async def message(self, data: bytes) -> None:
        json.loads(data)

    async def answer(self, answer: jsonrpc.Answer) -> None:
        self.answers.append(answer.encode())

    async def reply(self, answer: jsonrpc.Answer, origin: Any) -> None:
        self.answers.append(answer.encode())

    async def send_batch(self, answers: list[jsonrpc.Answer], origin: Any) -> None:
        self.answers.append(jsonrpc.encode_batch([a.encode() for a in answers]))

    def done(self) -> None:
        return None

    async def elsewhere(self, action: Any) -> None:
        return None


APP = _app()


@FAST
@given(messages(), st.booleans())
def test_every_request_gets_exactly_one_well_formed_answer(msg: dict[str, Any], handshake_first: bool) -> None:
    """Through the session core and its runner, as every transport serves requests."""
    core = ServerSession(APP.new_connection())
    out = _Recorder()
    if handshake_first:
        core.receive(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                                 "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {}}}).encode())

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            runner = SessionRunner(core, Dispatcher(APP), out, nursery)
            await runner.feed(json.dumps(msg).encode())

    trio.run(serve)
    assert core.load == 0 and not core.running
    answers = out.answers
    is_request = msg.get("jsonrpc") == "2.0" and "id" in msg and isinstance(msg["id"], (int, str)) and not isinstance(msg["id"], bool)
    if is_request and isinstance(msg.get("method"), str) and not msg["method"].startswith("notifications/"):
        assert len(answers) == 1, (msg, answers)
        reply = msgspec.json.decode(answers[0])
        _well_formed(reply, msg["id"])
    else:
        for data in answers:  # notifications and invalid frames: an error at most
            _well_formed(json.loads(data))


@FAST
@given(st.lists(st.binary(max_size=60).filter(lambda b: b"\n" not in b), max_size=12),
       st.lists(st.integers(1, 50), min_size=1, max_size=10), st.integers(5, 80))
def test_line_splitting_matches_a_plain_split_at_any_chunking(lines: list[bytes], sizes: list[int], limit: int) -> None:
    stream = b"".join(line + b"\n" for line in lines)
    splitter = LineSplitter(limit)
    got: list[Any] = []
    at, i = 0, 0
    while at < len(stream):
        n = sizes[i % len(sizes)]
        got.extend(splitter.feed(stream[at:at + n]))
        at, i = at + n, i + 1
    got.extend(splitter.rest())
    want = [Oversized if len(line) > limit else line for line in lines if len(line) > limit or line.strip()]
    assert [type(g) if isinstance(g, Oversized) else g for g in got] == want
