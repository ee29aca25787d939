"""Wire pieces of the HTTP endpoints: error bodies, status mapping, SSE framing."""

from __future__ import annotations

from typing import Any

import msgspec

from ...protocol import jsonrpc
from ...protocol.jsonrpc import ProtocolError
from ...server.auth import FORBIDDEN

Headers = list[tuple[bytes, bytes]]


class BodyTooLarge(Exception):
    pass


class Disconnected(Exception):
    pass


def error_body(code: int, message: str, request_id: Any = None, data: Any = msgspec.UNSET) -> bytes:
    return jsonrpc.encode_error(request_id, ProtocolError(code, message, data))


def rest_error(code: str, message: str) -> bytes:
    """The error body of the plain (non-JSON-RPC) routes: ``{"error": {"code", "message"}}``."""
    return msgspec.json.encode({"error": {"code": code, "message": message}})


def http_status_for(code: int) -> int:
    """The HTTP status a JSON-RPC error travels with on the stateless wire."""
    if code == jsonrpc.METHOD_NOT_FOUND:
        return 404
    if code == FORBIDDEN:
        return 403
    if code in (jsonrpc.SERVER_BUSY, jsonrpc.TOO_MANY_SESSIONS):  # too busy, or shared state unreachable: retry shortly
        return 503
    if code in (jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST, jsonrpc.INVALID_PARAMS, jsonrpc.HEADER_MISMATCH,
                jsonrpc.MISSING_CLIENT_CAPABILITY, jsonrpc.UNSUPPORTED_PROTOCOL_VERSION):
        return 400
    return 200


RETRY_SOON: Headers = [(b"retry-after", b"1")]


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
