"""mcpkit.client: a trio-native MCP client for every era and transport.

    import mcpkit.client as mc

    async with mc.connect(["mcpkit", "serve"]) as client:          # a stdio subprocess
        print(await client.list_tools())
    async with mc.connect("http://127.0.0.1:8000/mcp") as client:  # Streamable HTTP / legacy SSE
        result = await client.call_tool("greet", {"name": "Ada"})

Names load on first use, so ``mcpkit serve`` (whose CLI also offers the client commands) pays
nothing for the client at start-up.
"""

from __future__ import annotations

import importlib
from typing import Any

_ERRORS = [
    "McpError", "NotInitialized", "RequestTimeout", "ConnectionFailed", "InvalidArguments",
    "BadResponse", "ConnectionClosed", "SessionExpired", "HttpError", "RpcError", "ParseError",
    "InvalidRequest", "MethodNotFound", "InvalidParams", "InternalError", "HeaderMismatch",
    "MissingCapability", "UnsupportedVersion", "from_rpc", "MODERN_CODES", "AuthorizationFailed", "Forbidden",
]
_WHERE = {
    **{name: "errors" for name in _ERRORS},
    "Client": "client", "connect": "client", "forget_eras": "client", "is_url": "client",
    "CallResult": "results", "ServerDescription": "results",
    "Handlers": "session", "Notification": "session", "ClientSettings": "options",
    "TaskHandle": "task_handles", "TaskCancelled": "task_handles",
}
__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'mcpkit.client' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
