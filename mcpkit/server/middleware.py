"""Middleware: async callables that wrap the requests a server answers.

A middleware is ``async def mw(call: Call, call_next) -> dict``: it may look at or change
``call`` (the arguments of a tool call, say), then ``return await call_next()`` to go on to the
next middleware and finally the handler, and look at or replace the result on the way back. It
may also answer without calling ``call_next`` (a cache hit) or raise (a refusal). Several of them
nest in a fixed order: the lowest ``order`` is the outermost; equal orders keep the plugins' order
and, within a plugin, the order of its list.

The interface knows nothing of transports or of how the dispatcher answers a request, so it wraps
whatever a request turns into (a tool call today, a long-running task later) the same way.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Iterable

import msgspec

from .errors import DefinitionError

Next = Callable[[], Awaitable[dict[str, Any]]]
MiddlewareFn = Callable[["Call", Next], Awaitable[dict[str, Any]]]


@dataclass(slots=True)
class Call:
    """What a middleware sees of the request it wraps."""

    #: The JSON-RPC method: ``tools/call``, ``resources/read``, ``prompts/get``, ``tools/list``, …
    method: str
    #: The request's params as the client sent them (treat as read-only).
    params: dict[str, Any]
    request_id: Any
    protocol_version: str
    client_info: dict[str, Any]
    #: tools/call and prompts/get: the tool's or prompt's name; resources/read: the URI.
    target: str | None = None
    #: tools/call: the arguments the tool will get; a middleware may replace them.
    arguments: dict[str, Any] | None = None
    #: The plugin offering the tool, prompt or resource (None when nothing matched).
    plugin: str | None = None
    #: Free for middleware to share values along one call (a start time, a user id).
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def tool(self) -> str | None:
        """The tool's name on a tools/call, else None."""
        return self.target if self.method == "tools/call" else None


class MiddlewareDef:
    """A middleware as the server keeps it: the function, its name, order and methods."""

    def __init__(self, fn: MiddlewareFn, *, name: str | None = None, order: int = 0,
                 methods: Iterable[str] | None = None) -> None:
        call = fn if inspect.iscoroutinefunction(fn) else getattr(fn, "__call__", None)
        if not inspect.iscoroutinefunction(call):
            raise DefinitionError(f"middleware {name or getattr(fn, '__name__', fn)!r} must be an async function "
                            f"taking (call, call_next)")
        self.fn = fn
        self.name = name or getattr(fn, "__name__", type(fn).__name__)
        self.order = order
        self.methods = frozenset(methods) if methods is not None else None
        self.plugin: str | None = None

    def __call__(self, call: Call, call_next: Next) -> Awaitable[dict[str, Any]]:
        return self.fn(call, call_next)

    def __repr__(self) -> str:
        return f"<mcpkit middleware {self.name!r}>"

    def wraps(self, method: str) -> bool:
        return self.methods is None or method in self.methods


def middleware(fn: MiddlewareFn | None = None, *, name: str | None = None, order: int = 0,
               methods: Iterable[str] | None = None) -> Any:
    """Declare a middleware: ``async def fn(call, call_next)``. ``methods`` limits it to some
    JSON-RPC methods (e.g. ``{"tools/call"}``); ``order`` places it (lower is outer)."""

    def wrap(f: MiddlewareFn) -> MiddlewareDef:
        return MiddlewareDef(f, name=name, order=order, methods=methods)

    return wrap(fn) if fn is not None else wrap


class Chain:
    """The server's middleware, in order, with the list for each method worked out once."""

    def __init__(self, entries: Iterable[MiddlewareDef] = ()) -> None:
        self.entries = sorted(entries, key=lambda m: m.order)  # stable: ties keep plugin order
        self._by_method: dict[str, tuple[MiddlewareDef, ...]] = {}

    def __bool__(self) -> bool:
        return bool(self.entries)

    def for_method(self, method: str) -> tuple[MiddlewareDef, ...]:
        found = self._by_method.get(method)
        if found is None:
            found = self._by_method[method] = tuple(m for m in self.entries if m.wraps(method))
        return found

    async def run(self, call: Call, handler: Next, observers: Any = None) -> dict[str, Any]:
        """Run ``handler`` inside every middleware that wraps ``call.method``; with
        ``observers`` (the app's, when something watches) each middleware runs inside
        ``observers.middleware(mw, call)`` (a tracer's child span)."""
        chain = self.for_method(call.method)

        async def step(i: int) -> dict[str, Any]:
            if i == len(chain):
                return await handler()
            mw = chain[i]
            if observers is None:
                return await mw(call, lambda: step(i + 1))
            with observers.middleware(mw, call):
                return await mw(call, lambda: step(i + 1))

        return await step(0)


def describe_call(registry: Any, req: Any) -> Call:
    """The :class:`Call` for a request (``RequestReceived``), with the owning plugin looked up."""
    try:
        params = msgspec.json.decode(req.params) if req.params is not msgspec.UNSET else {}
    except msgspec.DecodeError:
        params = {}
    if not isinstance(params, dict):
        params = {}
    call = Call(req.method, params, req.id, req.features.version, req.client_info)
    if req.method in ("tools/call", "prompts/get") and isinstance(params.get("name"), str):
        call.target = params["name"]
        call.plugin = registry.owner.get(("tool" if req.method == "tools/call" else "prompt", call.target))
        if req.method == "tools/call":
            args = params.get("arguments")
            call.arguments = dict(args) if isinstance(args, dict) else {}
    elif req.method == "resources/read" and isinstance(params.get("uri"), str):
        call.target = params["uri"]
        found = registry.find_resource(call.target)
        if found is not None:
            call.plugin = registry.owner.get(("resource", found[0].uri))
    return call
