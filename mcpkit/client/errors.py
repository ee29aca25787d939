"""What can go wrong when talking to an MCP server, as typed exceptions.

Every exception carries a stable short ``code`` (``E2xx`` for JSON-RPC errors the server sent,
``E1xx`` for problems found on our side) and a ``user_message`` fit to show in a UI. JSON-RPC
errors keep the server's numeric ``rpc_code``, ``message`` and ``data``.
"""

from __future__ import annotations

from typing import Any


class McpError(Exception):
    """Base of every error raised by :mod:`mcpkit.client`."""

    code = "E199"
    user_message = "Something went wrong while talking to the MCP server."
    #: The HTTP status the error came with, when it came over HTTP with one.
    http_status: int | None = None
    #: The ``WWW-Authenticate`` header of that answer, when it had one (a 401 or 403).
    www_authenticate: str | None = None

    def __init__(self, message: str | None = None) -> None:
        super().__init__(message or self.user_message)
        self.message = message or self.user_message

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


# --- problems on our side or on the wire (E1xx) ----------------------------------------------

class NotInitialized(McpError):
    code = "E100"
    user_message = "The connection is not initialized yet: connect before sending requests."


class RequestTimeout(McpError):
    code = "E101"
    user_message = "The MCP server did not answer in time."


class ConnectionFailed(McpError):
    code = "E102"
    user_message = "Could not reach the MCP server."


class InvalidArguments(McpError):
    """Tool arguments that do not fit the tool's input schema; ``field`` names the culprit."""

    code = "E103"
    user_message = "The tool arguments do not match the tool's input schema."

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class BadResponse(McpError):
    """The server answered something that is not MCP (not JSON-RPC, wrong content type, ...)."""

    code = "E104"
    user_message = "The MCP server sent a response that could not be understood."


class ConnectionClosed(McpError):
    code = "E105"
    user_message = "The connection to the MCP server was closed."


class SessionExpired(McpError):
    code = "E106"
    user_message = "The MCP server no longer knows this session."


class HttpError(McpError):
    """An HTTP status that carried no JSON-RPC error body."""

    code = "E107"
    user_message = "The MCP server answered with an HTTP error."

    def __init__(self, status: int, message: str | None = None) -> None:
        super().__init__(message or f"HTTP {status} from the MCP server")
        self.status = self.http_status = status


class AuthorizationFailed(McpError):
    """The OAuth flow could not get a token: discovery, registration, the user's consent, the
    token endpoint, or a check on what the authorization server answered failed."""

    code = "E108"
    user_message = "Could not get authorization to use the MCP server."


# --- JSON-RPC errors the server sent (E2xx) --------------------------------------------------

class RpcError(McpError):
    """A JSON-RPC error response. ``rpc_code``, ``message`` and ``data`` are the server's."""

    code = "E299"
    rpc_code: int | None = None
    user_message = "The MCP server reported an error."

    def __init__(self, message: str, rpc_code: int | None = None, data: Any = None) -> None:
        super().__init__(message)
        if rpc_code is not None:
            self.rpc_code = rpc_code
        self.data = data


class ParseError(RpcError):
    code, rpc_code = "E200", -32700
    user_message = "The MCP server could not parse the request."


class InvalidRequest(RpcError):
    code, rpc_code = "E201", -32600
    user_message = "The MCP server rejected the request as malformed."


class MethodNotFound(RpcError):
    code, rpc_code = "E202", -32601
    user_message = "The MCP server does not offer this method."


class InvalidParams(RpcError):
    code, rpc_code = "E203", -32602
    user_message = "The MCP server rejected the request's parameters."


class InternalError(RpcError):
    code, rpc_code = "E204", -32603
    user_message = "The MCP server failed with an internal error."


class HeaderMismatch(RpcError):
    code, rpc_code = "E205", -32020
    user_message = "The MCP server found the HTTP headers and the request body disagree."


class MissingCapability(RpcError):
    code, rpc_code = "E206", -32021
    user_message = "The MCP server needs a client capability this client did not declare."


class UnsupportedVersion(RpcError):
    """The server speaks none of the versions asked for; ``supported`` lists the ones it does."""

    code, rpc_code = "E207", -32022
    user_message = "The MCP server does not support this protocol version."

    @property
    def supported(self) -> list[str]:
        return _strings(self.data, "supported")


def _strings(data: Any, key: str) -> list[str]:
    """The strings of the list ``data[key]`` (none when data is not shaped so)."""
    got = data.get(key) if isinstance(data, dict) else None
    return [v for v in got if isinstance(v, str)] if isinstance(got, list) else []


class Forbidden(RpcError):
    """The token lacks a scope the request needs (mcpkit servers send -32003 with HTTP 403);
    ``required_scopes`` lists what the operation needs."""

    code, rpc_code = "E208", -32003
    user_message = "The MCP server refused: the authorization lacks a needed scope."

    @property
    def required_scopes(self) -> list[str]:
        return _strings(self.data, "requiredScopes")


_BY_CODE: dict[int, type[RpcError]] = {
    cls.rpc_code: cls  # type: ignore[misc]
    for cls in (ParseError, InvalidRequest, MethodNotFound, InvalidParams, InternalError,
                HeaderMismatch, MissingCapability, UnsupportedVersion, Forbidden)
}
#: JSON-RPC codes that only a stateless-era (2026-07-28+) server sends.
MODERN_CODES = frozenset({-32020, -32021, -32022})


def from_rpc(code: Any, message: Any, data: Any = None) -> RpcError:
    """The typed exception for a JSON-RPC error object."""
    text = message if isinstance(message, str) and message else "error without a message"
    if isinstance(code, int) and not isinstance(code, bool):
        return _BY_CODE.get(code, RpcError)(text, code, data)
    return RpcError(text, None, data)


__all__ = [
    "McpError", "NotInitialized", "RequestTimeout", "ConnectionFailed", "InvalidArguments",
    "BadResponse", "ConnectionClosed", "SessionExpired", "HttpError", "RpcError", "ParseError",
    "InvalidRequest", "MethodNotFound", "InvalidParams", "InternalError", "HeaderMismatch",
    "MissingCapability", "UnsupportedVersion", "from_rpc", "MODERN_CODES", "AuthorizationFailed", "Forbidden",
]
