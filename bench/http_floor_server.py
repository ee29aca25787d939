"""The least a trio + httptools + msgspec HTTP server can do per stateless tools/call: the floor
that bench_http.py measures mcpkit against.

    python bench/http_floor_server.py PORT

One task per connection reads with httptools, decodes the JSON-RPC body with msgspec and writes
a fixed tools/call result as a keep-alive JSON response. No MCP beyond that: no header rules, no
dispatch, no limits, no timeouts — what is left of mcpkit's cost above this is its own.
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


_decode = msgspec.json.Decoder(Message).decode
_params = msgspec.json.Decoder(CallParams).decode
_encode = msgspec.json.Encoder().encode


class _Request:
    def __init__(self) -> None:
        self.body: list[bytes] = []
        self.done = False

    def on_body(self, data: bytes) -> None:
        self.body.append(data)

    def on_message_complete(self) -> None:
        self.done = True


def answer(body: bytes) -> bytes:
    msg = _decode(body)
    params = _params(msg.params)
    result = {"content": [{"type": "text", "text": f"Hello, {params.arguments.get('name', 'you')}."}], "isError": False}
    payload = _encode({"jsonrpc": "2.0", "id": msg.id, "result": result})
    return (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
            + str(len(payload)).encode() + b"\r\n\r\n" + payload)


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
                out = answer(b"".join(req.body))
                req.body.clear()
                req.done = False
                await stream.send_all(out)
    except (trio.BrokenResourceError, httptools.HttpParserError):
        return


async def main(port: int) -> None:
    await trio.serve_tcp(connection, port, host="127.0.0.1")


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]))
