"""The least a trio + httptools + msgspec HTTP server can do per stateless tools/call: the floor
that bench_http.py measures mcpkit against.

    python bench/http_floor_server.py PORT

One task per connection reads with httptools into a header map, checks content type, accept
and protocol version headers, decodes the JSON-RPC envelope and the tool's params with msgspec,
runs an async tool in a cancel scope with a deadline and encodes the result: the work any
trio server answering this call must do. No MCP beyond that: no era rules, no dispatch table,
no limits, no timeouts — what is left of mcpkit's cost above this is its own.
"""

from __future__ import annotations

import sys
from typing import Any

import httptools
import msgspec
import trio


class Message(msgspec.Struct):
    jsonrpc: str
    method: str = ""
    id: int | str | None = None
    params: msgspec.Raw = msgspec.Raw(b"{}")


class CallParams(msgspec.Struct):
    name: str
    arguments: dict[str, Any] = {}
    meta: dict[str, Any] = msgspec.field(default_factory=dict, name="_meta")


class Text(msgspec.Struct):
    text: str
    type: str = "text"


class Result(msgspec.Struct):
    content: list[Text]
    isError: bool = False


class Response(msgspec.Struct):
    id: int | str | None
    result: Result
    jsonrpc: str = "2.0"


_decode = msgspec.json.Decoder(Message).decode
_params = msgspec.json.Decoder(CallParams).decode
_encode = msgspec.json.Encoder().encode
_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
_REFUSED = b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"


async def greet(name: str) -> str:
    return f"Hello, {name}."


class _Request:
    __slots__ = ("headers", "body", "done")

    def __init__(self) -> None:
        self.headers: dict[bytes, bytes] = {}
        self.body: list[bytes] = []
        self.done: list[tuple[dict[bytes, bytes], bytes]] = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers[name.lower()] = value

    def on_body(self, data: bytes) -> None:
        self.body.append(data)

    def on_message_complete(self) -> None:
        self.done.append((self.headers, b"".join(self.body)))
        self.headers, self.body = {}, []


async def answer(headers: dict[bytes, bytes], body: bytes) -> bytes:
    if (not headers.get(b"content-type", b"").startswith(b"application/json")
            or b"application/json" not in headers.get(b"accept", b"") or b"mcp-protocol-version" not in headers):
        return _REFUSED
    msg = _decode(body)
    params = _params(msg.params)
    with trio.CancelScope(deadline=trio.current_time() + 60):
        text = await greet(**params.arguments)
    payload = _encode(Response(msg.id, Result([Text(text)])))
    return _HEAD % len(payload) + payload


async def connection(stream: trio.SocketStream) -> None:
    req = _Request()
    parser = httptools.HttpRequestParser(req)
    try:
        while True:
            data = await stream.receive_some(65536)
            if not data:
                return
            parser.feed_data(data)
            if req.done:
                out = [await answer(headers, body) for headers, body in req.done]
                req.done.clear()
                await stream.send_all(b"".join(out))
    except (trio.BrokenResourceError, httptools.HttpParserError):
        return


async def main(port: int) -> None:
    await trio.serve_tcp(connection, port, host="127.0.0.1")


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]))
