"""The plain routes: the HTTP paths that are not JSON-RPC endpoints (``/healthz``, the REST
search API, ``/metrics``), answered on :class:`Exchange` like the MCP endpoints, so mcpkit's own server and
any ASGI server (hypercorn) serve them alike, with no web framework underneath.

A route is an exact path and the methods it answers (a GET route answers HEAD too); every
error is JSON, ``{"error": {"code", "message"}}``: 404 for a path no route has, 405 with
``Allow`` for a method its route does not answer. The checks every route shares (Host,
Origin, CORS, preflight, body limits, authorization, request ids) run before, in
:class:`~.asgi.HttpApp`.
"""

from __future__ import annotations

import hmac
import os
from typing import Any, Awaitable, Callable, Iterable

import msgspec

from ..._version import __version__
from ...server.app import App
from ...server.metrics import CONTENT_TYPE
from .exchange import Exchange
from .security import is_loopback_host
from .wire import Headers, rest_error

Handler = Callable[[Exchange], Awaitable[None]]
#: a request with one of these came through a proxy: its loopback peer address proves nothing
_PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-real-ip")


class PlainRoutes:
    """Exact paths to handlers: the router of the plain routes."""

    def __init__(self) -> None:
        #: path -> (the methods it answers, None: every method, the handler checks; handler)
        self._routes: dict[str, tuple[frozenset[str] | None, Handler]] = {}

    def add(self, path: str, handler: Handler, methods: Iterable[str] | None = ("GET",)) -> None:
        """Serve ``path`` with ``handler`` for ``methods`` (``None``: every method, the handler
        answers the ones it does not serve)."""
        if path in self._routes:
            raise ValueError(f"the route {path} is taken")
        allowed = None if methods is None else frozenset(m.upper() for m in methods)
        if allowed is not None and "GET" in allowed:
            allowed |= {"HEAD"}  # the servers send a HEAD answer's head only
        self._routes[path] = (allowed, handler)

    async def __call__(self, ex: Exchange) -> None:
        route = self._routes.get(ex.path)
        if route is None:
            await ex.respond(404, rest_error("NOT_FOUND", "nothing is served at this path"))
            return
        allowed, handler = route
        if allowed is not None and ex.method not in allowed:
            methods = ", ".join(sorted(allowed | {"OPTIONS"}))
            await ex.respond(405, rest_error("METHOD_NOT_ALLOWED", f"this path answers {methods}"),
                             [(b"allow", methods.encode())])
            return
        await handler(ex)


async def respond_json(ex: Exchange, status: int, body: Any, headers: Headers | None = None) -> None:
    """Answer with ``body`` as compact JSON."""
    await ex.respond(status, msgspec.json.encode(body), headers)


def plain_routes(app: App) -> PlainRoutes:
    """The plain routes of ``app``: ``/healthz`` and ``/mcp/search``."""
    from .search_api import SearchApi

    routes = PlainRoutes()

    async def healthz(ex: Exchange) -> None:
        state = {"backend": "memory", "ok": True} if app.shared is None else await app.shared.health()
        body: dict[str, Any] = {
            "status": "ok" if state["ok"] else "degraded",
            "version": __version__,
            "pid": os.getpid(),
            "plugins": [p.name for p in app.plugins if p.loaded],
            "tools": len(app.registry.tools),
            "state": state,
        }
        upstreams = {p.name: p.status() for p in app.plugins if p.loaded and p.status is not None}
        if upstreams:  # the gateway's upstreams: connected, or retrying and why
            body["upstreams"] = upstreams
            if any(u["state"] != "connected" for u in upstreams.values()):
                body["status"] = "degraded"
        await respond_json(ex, 200, body)  # 200 even when degraded: stateless calls still work without shared state

    routes.add("/healthz", healthz)
    routes.add("/mcp/search", SearchApi(app).serve, methods=None)
    if app.settings.metrics and app.metrics is not None:  # --metrics: otherwise /metrics is a path like any other (404)
        routes.add("/metrics", MetricsRoute(app).serve)
    return routes


class MetricsRoute:
    """``GET /metrics``: the Prometheus text of every worker, added up. It tells tool names and
    traffic, so it answers loopback clients (a Prometheus or agent on the same host) and,
    from elsewhere, only a request with ``Authorization: Bearer <metrics_token>``; with no
    token set, nobody else (403)."""

    def __init__(self, app: App) -> None:
        self.metrics = app.metrics
        token = app.settings.metrics_token
        self.expected = f"bearer {token}".encode() if token else None

    def allowed(self, ex: Exchange) -> bool:
        client, headers = ex.client, ex.headers
        proxied = any(h in headers for h in _PROXY_HEADERS)  # a proxy on this host speaks for someone else
        if not proxied and (client is None or is_loopback_host(str(client[0]))):
            return True  # no peer address: a Unix socket or an in-process server
        given = headers.get("authorization")
        if self.expected is None or given is None:
            return False
        scheme, _, rest = given.partition(" ")
        return hmac.compare_digest(f"{scheme.lower()} {rest.strip()}".encode(), self.expected)

    async def serve(self, ex: Exchange) -> None:
        if not self.allowed(ex):
            await ex.respond(403, rest_error("FORBIDDEN", "/metrics answers loopback clients, or the bearer metrics_token"))
            return
        await ex.respond(200, self.metrics.text(), content_type=CONTENT_TYPE)
