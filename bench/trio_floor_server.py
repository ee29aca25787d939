"""The least a trio + msgspec stdio server can do per tools/call: the benchmark's floor.

It reads lines, decodes them with msgspec and writes a fixed greet answer; no MCP beyond
that. Modes: ``inline`` answers in the reader task; ``task`` spawns one task per request;
``scoped`` also runs each request in a cancel scope with a deadline that is registered for
cancellation by id, which is what structured concurrency per request costs before any MCP work.
"""

from __future__ import annotations

import os
import sys

import msgspec
import trio


class Message(msgspec.Struct):
    jsonrpc: str
    method: str = ""
    id: int | str | None = None
    params: msgspec.Raw = msgspec.Raw(b"{}")


INIT = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "floor", "version": "0"}}
GREET = {"content": [{"type": "text", "text": "Hello, bench."}], "isError": False}
TOOLS = {"tools": [{"name": "greet", "inputSchema": {"type": "object"}}]}


async def main(mode: str) -> None:
    encode, decode = msgspec.json.Encoder().encode, msgspec.json.Decoder(Message).decode
    os.set_blocking(0, False)
    os.set_blocking(1, False)
    scopes: dict[object, trio.CancelScope] = {}

    def answer(msg: Message) -> None:
        result = INIT if msg.method == "initialize" else TOOLS if msg.method == "tools/list" else GREET
        os.write(1, encode({"jsonrpc": "2.0", "id": msg.id, "result": result}) + b"\n")

    async def serve(msg: Message) -> None:
        if mode == "scoped":
            with trio.CancelScope(deadline=trio.current_time() + 60) as scope:
                scopes[msg.id] = scope
                answer(msg)
                del scopes[msg.id]
        else:
            answer(msg)

    buf = b""
    async with trio.open_nursery() as nursery:
        while True:
            try:
                chunk = os.read(0, 65536)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(0)
                continue
            if not chunk:
                return
            *lines, buf = (buf + chunk).split(b"\n")
            for line in lines:
                msg = decode(line)
                if msg.id is None:
                    continue  # a notification
                if mode == "inline":
                    answer(msg)
                else:
                    nursery.start_soon(serve, msg)


if __name__ == "__main__":
    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else "scoped")
