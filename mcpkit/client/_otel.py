"""CLIENT spans for the requests the client library sends, and the trace context in their
``params._meta`` (the OpenTelemetry conventions for MCP), so the server's span continues the
caller's trace — a call a gateway forwards to an upstream server stays in one trace.

Nothing happens unless OpenTelemetry is already imported in the process (a server with
``traces = true``, or an application that uses it): the check is one dictionary lookup, and
this module never imports OpenTelemetry itself. With the API but no SDK configured, spans do
not record and nothing is injected.
"""

from __future__ import annotations

import sys
from typing import Any
from urllib.parse import urlsplit

import msgspec
import trio

from .errors import RequestTimeout, RpcError


class _Outcome(msgspec.Struct):
    """A result's isError alone, read from its bytes (other members are skipped)."""

    isError: Any = False


_outcome = msgspec.json.Decoder(_Outcome).decode

#: methods whose params.name goes into the span name, and the attribute that holds it
_NAMED = {"tools/call": "gen_ai.tool.name", "prompts/get": "gen_ai.prompt.name"}
_TRANSPORTS = {"stdio": "pipe", "http": "tcp", "sse": "tcp"}
_tracer: tuple[Any, Any] | None = None  # (provider, tracer) of the last call


def client_span(session: Any, method: str, params: dict[str, Any], request_id: Any) -> "ClientSpan | None":
    """A started CLIENT span for one request, its context written into ``params["_meta"]``
    (a new dict: the caller's is left alone); None when nothing traces."""
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None:
        return None
    global _tracer
    provider = trace.get_tracer_provider()
    if _tracer is None or _tracer[0] is not provider:
        from .._version import __version__

        _tracer = (provider, provider.get_tracer("mcpkit.client", __version__))
    attrs: dict[str, Any] = {"mcp.method.name": method, "jsonrpc.request.id": str(request_id)}
    name = method
    key = _NAMED.get(method)
    target = params.get("name") if key is not None else None
    if isinstance(target, str):
        name = f"{method} {target}"
        attrs[key] = target  # type: ignore[index]
        if method == "tools/call":
            attrs["gen_ai.operation.name"] = "execute_tool"
    elif method.startswith("resources/") and isinstance(params.get("uri"), str):
        attrs["mcp.resource.uri"] = params["uri"]
    transport = session.transport
    attrs["network.transport"] = _TRANSPORTS.get(transport.kind, transport.kind)
    if session.version:
        attrs["mcp.protocol.version"] = session.version
    sid = getattr(transport, "session_id", None)
    if sid:
        attrs["mcp.session.id"] = sid
    url = getattr(transport, "url", None)
    if isinstance(url, str):
        parts = urlsplit(url)
        if parts.hostname:
            attrs["server.address"] = parts.hostname
            attrs["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    span = _tracer[1].start_span(name, kind=trace.SpanKind.CLIENT, attributes=attrs)
    if not span.get_span_context().is_valid:  # the API without an SDK: nothing to continue
        return None
    from opentelemetry import propagate

    meta = dict(params.get("_meta") or {})
    propagate.inject(meta, context=trace.set_span_in_context(span))
    params["_meta"] = meta
    return ClientSpan(span, trace)


class ClientSpan:
    """Ends the span with the request's outcome (error.type as the conventions name it)."""

    __slots__ = ("span", "trace")

    def __init__(self, span: Any, trace: Any) -> None:
        self.span = span
        self.trace = trace

    def __enter__(self) -> "ClientSpan":
        return self

    def result(self, result: Any) -> None:
        if isinstance(result, msgspec.Raw):  # kept as the server's bytes (a gateway's call)
            try:
                result = {"isError": _outcome(result).isError}
            except (msgspec.DecodeError, msgspec.ValidationError):
                return
        if isinstance(result, dict) and result.get("isError"):
            self._error("tool_error", None, None)

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if exc is not None:
            if isinstance(exc, RpcError):
                self._error(str(exc.rpc_code) if exc.rpc_code is not None else type(exc).__name__, exc.rpc_code, exc.message)
            elif isinstance(exc, RequestTimeout):
                self._error("timeout", None, exc.message)
            elif isinstance(exc, trio.Cancelled):
                self._error("cancelled", None, None)
            else:
                self._error(type(exc).__qualname__, None, str(exc))
        self.span.end()

    def _error(self, error_type: str, code: int | None, message: str | None) -> None:
        self.span.set_attribute("error.type", error_type)
        if code is not None:
            self.span.set_attribute("rpc.response.status_code", str(code))
        self.span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, message))
