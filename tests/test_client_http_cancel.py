"""Stateless-era HTTP: a timed-out or cancelled request is cancelled by closing its stream.

The peer is a small HTTP/1.1 server written here on raw trio sockets (no mcpkit): it answers
discovery and tools/list as JSON and answers tools/call with SSE headers and then nothing, and it
records when the client closes that connection — the spec's cancellation signal on this transport.
"""

from __future__ import annotations

import json
import time
from typing import Any

import trio

import mcpkit.client as mc

TOOLS = {"tools": [{"name": "hang", "inputSchema": {"type": "object"}}], "resultType": "complete"}
DISCOVER = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}, "resultType": "complete",
            "ttlMs": 0, "cacheScope": "private", "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "peer", "version": "1"}}}


class Peer:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.closed_at: list[float] = []
        self.notifications: list[str] = []
        self.port = 0

    async def serve(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self.connection, listeners)

    async def connection(self, stream: trio.SocketStream) -> None:
        buf = b""
        while True:
            while b"\r\n\r\n" not in buf:
                chunk = await stream.receive_some(65536)
                if not chunk:
                    return
                buf += chunk
            head, _, buf = buf.partition(b"\r\n\r\n")
            length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            while len(buf) < length:
                buf += await stream.receive_some(65536)
            body, buf = json.loads(buf[:length]), buf[length:]
            if "id" not in body:
                self.notifications.append(body["method"])
                await stream.send_all(b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n")
                continue
            if body["method"] == "tools/call":
                self.calls.append(body)
                await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                                      b"transfer-encoding: chunked\r\n\r\n")
                while await stream.receive_some(65536):
                    pass  # the request's stream stays open until the client closes it
                self.closed_at.append(time.monotonic())
                return
            result = DISCOVER if body["method"] == "server/discover" else TOOLS
            data = json.dumps({"jsonrpc": "2.0", "id": body["id"], "result": result}).encode()
            await stream.send_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                  b"content-length: %d\r\n\r\n%s" % (len(data), data))


async def test_timeout_closes_the_request_stream_and_sends_no_notification() -> None:
    peer = Peer()
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.serve)
        async with mc.connect(f"http://127.0.0.1:{peer.port}/mcp", mode="stateless") as client:
            started = time.monotonic()
            try:
                await client.call_tool("hang", {}, timeout=0.3)
                raise AssertionError("the call should have timed out")
            except mc.RequestTimeout as exc:
                assert exc.code == "E101"
            with trio.fail_after(5):
                while not peer.closed_at:
                    await trio.sleep(0.01)
            assert 0.25 <= peer.closed_at[0] - started < 2.0
        assert len(peer.calls) == 1  # not retried
        assert "notifications/cancelled" not in peer.notifications  # stdio's signal, not HTTP's
        nursery.cancel_scope.cancel()


async def test_cancelling_the_caller_closes_the_request_stream() -> None:
    peer = Peer()
    async with trio.open_nursery() as nursery:
        await nursery.start(peer.serve)
        async with mc.connect(f"http://127.0.0.1:{peer.port}/mcp", mode="stateless") as client:
            with trio.move_on_after(0.3):
                await client.call_tool("hang", {}, timeout=None)
            with trio.fail_after(5):
                while not peer.closed_at:
                    await trio.sleep(0.01)
        assert len(peer.calls) == 1 and not peer.notifications
        nursery.cancel_scope.cancel()
