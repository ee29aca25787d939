"""What a running server tells about itself: one small interface that metrics, traces and the
console implement, fed from the session core and the transports.

An app holds an :class:`Observers` (empty unless telemetry or the console is enabled). Every
place that reports checks ``if observers:`` first, so a server with nothing watching pays one
truth test per request and nothing else.

- :meth:`Observer.request` wraps the serving of one request (a context manager: a tracer makes
  its span current there, so spans the handler starts are its children); :meth:`Observer.ended`
  then sees the finished :class:`RequestRecord` (duration, error type).
- :meth:`Observer.middleware` wraps each middleware a request passes through (a tracer's child
  span); called only when the app has middleware for the method.
- :meth:`Observer.notification` — a notification from the client.
- :meth:`Observer.session_opened` / :meth:`Observer.session_closed` — a session (stdio process,
  legacy SSE stream, HTTP session) begins or ends.
- :meth:`Observer.stream_opened` / :meth:`Observer.stream_closed` — an SSE stream toward a client.
- :meth:`Observer.rejected` — a request refused before it reached a handler (``reason``: a
  short word: ``sessions``, ``auth``, ``body``, ``slow``, ``deadline``, ``origin`` …).
"""

from __future__ import annotations

import time
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import Any, Iterator, Union

import msgspec

from ..protocol.connection import RequestReceived
from ..protocol import jsonrpc
from ..protocol.jsonrpc import Answer
from ..protocol.types import CallToolParams

#: ``network.transport`` of each transport, as the OpenTelemetry MCP conventions name them
NETWORK_TRANSPORT = {"stdio": "pipe", "http": "tcp", "sse": "tcp"}


class _Envelope(msgspec.Struct):
    """The parts of any request's params an observer reads (decoded only when one watches)."""

    name: Union[str, None] = None
    uri: Union[str, None] = None
    meta: Union[dict[str, Any], None] = msgspec.field(default=None, name="_meta")


@dataclass(slots=True)
class RequestRecord:
    """One request as observers see it."""

    method: str
    request_id: Any
    #: ``stdio``, ``http`` (Streamable HTTP) or ``sse`` (the legacy HTTP+SSE transport)
    transport: str
    session_id: str | None
    protocol_version: str
    #: the tool or prompt name, or the resource URI (None for other methods)
    target: str | None = None
    #: ``params._meta`` as the client sent it (trace context lives there), or None
    meta: dict[str, Any] | None = None
    #: the HTTP request's headers (lower-case), where the transport has them
    headers: dict[str, str] | None = None
    client_name: str | None = None
    started: float = field(default_factory=time.perf_counter)
    #: seconds from start to answer (set when it ends)
    duration: float = 0.0
    #: None for success; the JSON-RPC error code as text, ``tool_error`` for a tool's isError
    #: result, ``cancelled`` when the client cancelled it (no answer)
    error_type: str | None = None
    #: the JSON-RPC error code of an error answer
    status_code: int | None = None
    #: the JSON-RPC error message of an error answer (a span's status description)
    error_message: str | None = None

    @classmethod
    def of(cls, req: RequestReceived, transport: str, session_id: str | None,
           headers: dict[str, str] | None = None) -> "RequestRecord":
        method = req.method
        try:
            if method == "tools/call":  # decoded once: the handler reuses it (the hot path: no envelope)
                typed: Any = req.params_as(CallToolParams)
                target, meta = typed.name, typed.meta
            else:
                typed = req.typed
                if typed is None:
                    typed = jsonrpc.decode_params(req.params, _Envelope)
                target = (getattr(typed, "name", None) if method == "prompts/get"
                          else getattr(typed, "uri", None) if method == "resources/read" else None)
                meta = getattr(typed, "meta", None)
        except Exception:  # bad params: the handler answers them; observers see no target
            target = meta = None
        info = req.client_info
        return cls(method, req.id, transport, session_id, req.features.version, target,
                   meta if isinstance(meta, dict) else None, headers if headers is not None else req.headers,
                   info.get("name") if info else None)

    @classmethod
    def answered(cls, msg: Any, answer: Answer, transport: str, session_id: str | None, version: str | None,
                 client_info: dict[str, Any] | None, headers: dict[str, str] | None = None) -> "RequestRecord":
        """A request the protocol core answered itself (a lifecycle request, a refusal): ``msg``
        the request's decoded message. An ``initialize`` carries the version it agreed on."""
        method = msg.method if isinstance(msg.method, str) else ""
        meta = target = None
        if isinstance(msg.params, msgspec.Raw):
            try:
                typed = jsonrpc.decode_params(msg.params, _Envelope)
                meta = typed.meta if isinstance(typed.meta, dict) else None
                target = (typed.name if method in ("tools/call", "prompts/get")
                          else typed.uri if method.startswith("resources/") else None)
            except Exception:  # bad params: the answer says so; observers see no meta
                pass
        if method == "initialize" and isinstance(answer.result, dict):
            version = answer.result.get("protocolVersion", version)
        return cls(method, answer.id, transport, session_id, version or "", target, meta, headers,
                   client_info.get("name") if client_info else None)

    def finish(self, answer: Answer | None) -> None:
        self.duration = time.perf_counter() - self.started
        if answer is None:
            self.error_type = "cancelled"
        elif answer.error is not None:
            self.status_code = answer.error.code
            self.error_type = str(answer.error.code)
            self.error_message = answer.error.message
        elif isinstance(answer.result, dict) and answer.result.get("isError"):
            self.error_type = "tool_error"

    @property
    def name(self) -> str:
        """The span name the conventions give: ``{method} {target}`` or the method alone."""
        return f"{self.method} {self.target}" if self.target else self.method


class Observer:
    """Watches a running server; every method is optional (the defaults do nothing)."""

    def request(self, rec: RequestRecord) -> AbstractContextManager[Any]:
        return nullcontext()

    def ended(self, rec: RequestRecord) -> None:
        pass

    def middleware(self, mw: Any, call: Any) -> AbstractContextManager[Any]:
        """Around one middleware (a :class:`~mcpkit.server.middleware.MiddlewareDef`) wrapping
        ``call`` (its :class:`~mcpkit.server.middleware.Call`), inside :meth:`request`."""
        return nullcontext()

    def notification(self, method: str, transport: str, session_id: str | None, meta: dict[str, Any] | None) -> None:
        pass

    def asking(self, method: str, params: dict[str, Any], transport: str,
               session_id: str | None) -> AbstractContextManager[dict[str, Any]]:
        """Around a request the server sends the client (sampling, elicitation, roots) until
        its answer: gives the params to send (a tracer adds its context to ``_meta``)."""
        return nullcontext(params)

    def session_opened(self, transport: str, session_id: str | None) -> None:
        pass

    def session_closed(self, transport: str, session_id: str | None, seconds: float) -> None:
        pass

    def stream_opened(self, transport: str) -> None:
        pass

    def stream_closed(self, transport: str) -> None:
        pass

    def rejected(self, reason: str, transport: str) -> None:
        pass


class Observers(Observer):
    """Every observer of one app, called in the order they were added; false when empty."""

    def __init__(self) -> None:
        self.members: list[Observer] = []

    def add(self, observer: Observer) -> None:
        self.members.append(observer)
        hooks = ("request", "ended")
        if len(self.members) == 1:  # the usual case: one observer's own methods, no fan-out call between
            for hook in hooks:
                setattr(self, hook, getattr(observer, hook))
        else:
            for hook in hooks:
                self.__dict__.pop(hook, None)

    def __bool__(self) -> bool:
        return bool(self.members)

    def __iter__(self) -> Iterator[Observer]:
        return iter(self.members)

    def request(self, rec: RequestRecord) -> AbstractContextManager[Any]:
        if len(self.members) == 1:
            return self.members[0].request(rec)
        stack = ExitStack()
        for m in self.members:
            stack.enter_context(m.request(rec))
        return stack

    def ended(self, rec: RequestRecord) -> None:
        for m in self.members:
            m.ended(rec)

    def middleware(self, mw: Any, call: Any) -> AbstractContextManager[Any]:
        if len(self.members) == 1:
            return self.members[0].middleware(mw, call)
        stack = ExitStack()
        for m in self.members:
            stack.enter_context(m.middleware(mw, call))
        return stack

    def notification(self, method: str, transport: str, session_id: str | None, meta: dict[str, Any] | None) -> None:
        for m in self.members:
            m.notification(method, transport, session_id, meta)

    def asking(self, method: str, params: dict[str, Any], transport: str,
               session_id: str | None) -> AbstractContextManager[dict[str, Any]]:
        if len(self.members) == 1:
            return self.members[0].asking(method, params, transport, session_id)
        return _asking_each(self.members, method, params, transport, session_id)

    def session_opened(self, transport: str, session_id: str | None) -> None:
        for m in self.members:
            m.session_opened(transport, session_id)

    def session_closed(self, transport: str, session_id: str | None, seconds: float) -> None:
        for m in self.members:
            m.session_closed(transport, session_id, seconds)

    def stream_opened(self, transport: str) -> None:
        for m in self.members:
            m.stream_opened(transport)

    def stream_closed(self, transport: str) -> None:
        for m in self.members:
            m.stream_closed(transport)

    def rejected(self, reason: str, transport: str) -> None:
        for m in self.members:
            m.rejected(reason, transport)


@contextmanager
def _asking_each(members: list[Observer], method: str, params: dict[str, Any], transport: str,
                 session_id: str | None) -> Iterator[dict[str, Any]]:
    """Every observer around a server-to-client request, each given the params the one before left."""
    with ExitStack() as stack:
        for m in members:
            params = stack.enter_context(m.asking(method, params, transport, session_id))
        yield params
