"""Raw ASGI helpers: reading bodies, sending responses and SSE frames, without a framework."""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import msgspec

from ...protocol import jsonrpc
from ...protocol.jsonrpc import ProtocolError

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]

SSE_HEADERS: Headers = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache, no-transform"),
    (b"x-accel-buffering", b"no"),
]


class BodyTooLarge(Exception):
    pass


class Disconnected(Exception):
    pass


def header_map(scope: Scope) -> dict[str, str]:
    """Request headers with lower-case names (repeated headers joined with ', ')."""
    out: dict[str, str] = {}
    for name, value in scope["headers"]:
        key = name.decode("latin-1").lower()
        val = value.decode("latin-1")
        out[key] = f"{out[key]}, {val}" if key in out else val
    return out


async def read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Disconnected
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def respond(send: Send, status: int, body: bytes = b"", headers: Headers | None = None, content_type: bytes | None = b"application/json") -> None:
    hdrs = list(headers or [])
    if body and content_type:
        hdrs.append((b"content-type", content_type))
    hdrs.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body})


def error_body(code: int, message: str, request_id: Any = None, data: Any = msgspec.UNSET) -> bytes:
    return jsonrpc.encode_error(request_id, ProtocolError(code, message, data))


def rest_error(code: str, message: str) -> bytes:
    """The error body of the plain (non-JSON-RPC) routes: ``{"error": {"code", "message"}}``."""
    return msgspec.json.encode({"error": {"code": code, "message": message}})


def http_status_for(code: int) -> int:
    """The HTTP status a JSON-RPC error travels with on the stateless wire."""
    if code == jsonrpc.METHOD_NOT_FOUND:
        return 404
    if code in (jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST, jsonrpc.INVALID_PARAMS, jsonrpc.HEADER_MISMATCH,
                jsonrpc.MISSING_CLIENT_CAPABILITY, jsonrpc.UNSUPPORTED_PROTOCOL_VERSION):
        return 400
    return 200


def sse_event(data: bytes, event_id: str | None = None, event: str | None = None, retry_ms: int | None = None) -> bytes:
    parts: list[bytes] = []
    if event_id is not None:
        parts.append(b"id: " + event_id.encode())
    if retry_ms is not None:
        parts.append(b"retry: " + str(retry_ms).encode())
    if event is not None:
        parts.append(b"event: " + event.encode())
    parts.append(b"data: " + data)
    return b"\n".join(parts) + b"\n\n"


async def sse_start(send: Send, headers: Headers) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS + headers})


async def sse_send(send: Send, frame: bytes) -> None:
    await send({"type": "http.response.body", "body": frame, "more_body": True})


async def sse_end(send: Send) -> None:
    await send({"type": "http.response.body", "body": b"", "more_body": False})
