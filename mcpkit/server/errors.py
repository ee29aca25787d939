"""Exceptions plugin code raises to shape what the client sees."""

from __future__ import annotations

from typing import Any

from ..protocol.jsonrpc import SERVER_BUSY, ProtocolError


class DefinitionError(TypeError):
    """A tool, resource or prompt definition that can never work (raised where it is declared),
    naming the item and the parameter at fault."""


class PluginError(Exception):
    """A plugin could not be loaded and strict loading was asked for (``--strict``,
    ``mcpkit.testing``), or two plugins offer the same name."""


class ToolError(Exception):
    """Raise from a tool to return an ``isError`` result with this message (no traceback)."""


class ResourceNotFound(Exception):
    """Raise from a resource reader when the URI names nothing. The client gets ``message``
    (default "Resource not found") and the URI in the error's ``data``."""

    def __init__(self, uri: str, message: str | None = None) -> None:
        super().__init__(message or "Resource not found")
        self.uri = uri


class MissingCapability(Exception):
    """The request needs a client capability the client did not declare."""

    def __init__(self, required: dict[str, Any]) -> None:
        names = ", ".join(sorted(required))
        super().__init__(f"The client did not declare the required capabilities: {names}")
        self.required = required


class InputRequired(Exception):
    """Stateless era: the request needs client input first (becomes an InputRequiredResult)."""

    def __init__(self, requests: dict[str, Any], state: str | None = None) -> None:
        super().__init__("input required")
        self.requests = requests
        self.state = state


def busy(limit: int) -> ProtocolError:
    """The answer to a request over the connection's limit of requests in flight."""
    return ProtocolError(SERVER_BUSY, f"Server busy: {limit} requests are already running on this connection "
                         "(max_concurrent_requests); retry when some have answered", {"limit": limit})


def shutting_down() -> ProtocolError:
    """The answer to a request the server stopped before it finished (it is shutting down)."""
    return ProtocolError(SERVER_BUSY, "Server shutting down: the request was stopped before it finished; retry it later "
                         "or on another server")


class StartupError(Exception):
    """The server cannot start: one line that says what is wrong and what to do."""
