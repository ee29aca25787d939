"""Running the HTTP application: on mcpkit's own HTTP/1.1 server (the default) or on
hypercorn (``http_server = "hypercorn"``, for HTTP/2)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
from typing import Any

import trio

from ..._extras import require
from ...server.app import App
from ...server.context import STOP_BOUND_S
from .asgi import HttpApp

log = logging.getLogger("mcpkit.http")


async def serve_http(app: App, lifespans: list[tuple[str, Any]], *, strict: bool = False, legacy_only: bool = False,
                     sockets: list[socket.socket] | None = None, announce: bool = True, parent: int | None = None,
                     task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until SIGTERM/SIGINT: then stop accepting, end the standalone streams, let
    in-flight requests finish within ``shutdown_grace_s``; what still runs then is stopped
    and answers -32000 "server shutting down" (within ``STOP_BOUND_S``), then the rest is cut.

    ``sockets`` are listening sockets bound already (by the command line, or by the parent of
    ``--workers``); without them the server binds ``host:port`` itself. ``parent`` is the read
    end of a pipe only the supervising process holds open for writing: when it is gone (EOF),
    this worker shuts down the same way.
    """
    http_app = HttpApp(app, lifespans, strict=strict, legacy_only=legacy_only)
    stop = trio.Event()

    async def on_signal(task_status: trio.TaskStatus[None]) -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            task_status.started()
            async for signum in signals:
                log.warning("received %s; shutting down", signal.Signals(signum).name)
                stop.set()
                return

    async def on_orphaned(fd: int) -> None:
        from .lifeline import until_parent_exits

        await until_parent_exits(fd)
        log.warning("the supervising process is gone; shutting down")
        stop.set()

    server = _serve_hypercorn if app.settings.http_server == "hypercorn" else _serve_mcpkit
    async with trio.open_nursery() as nursery:
        async def serve_to_the_end(task_status: trio.TaskStatus[list[str]]) -> None:
            await server(http_app, stop, sockets, task_status=task_status)
            nursery.cancel_scope.cancel()  # drained: the watchers are done too

        await nursery.start(on_signal)
        if parent is not None:
            nursery.start_soon(on_orphaned, parent)
        binds = await nursery.start(serve_to_the_end)
        if announce:
            for bind in binds:
                print(f"mcpkit: serving MCP on {bind}/mcp (legacy SSE on {bind}/sse)", file=sys.stderr, flush=True)
                if app.settings.console:
                    print(f"mcpkit: console on {bind}/console", file=sys.stderr, flush=True)
        task_status.started(binds)
        await stop.wait()
        nursery.cancel_scope.deadline = trio.current_time() + app.settings.shutdown_grace_s + STOP_BOUND_S + 2


def urls(sockets: list[socket.socket], tls: bool) -> list[str]:
    out = []
    for sock in sockets:
        host, port = sock.getsockname()[:2]
        out.append(f"{'https' if tls else 'http'}://{f'[{host}]' if ':' in host else host}:{port}")
    return out


async def _serve_mcpkit(http_app: HttpApp, stop: trio.Event, sockets: list[socket.socket] | None,
                        task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    from .binding import bind, tls_context
    from .h1.listener import HttpServer

    s = http_app.app.settings
    ctx = tls_context(s.certfile, s.keyfile) if s.certfile else None
    own = sockets is None
    socks = [bind(s.host, s.port)] if sockets is None else sockets
    server = HttpServer(http_app, s, ctx)
    try:
        async with http_app.running(), trio.open_nursery() as nursery:
            await nursery.start(server.serve, socks)
            task_status.started(urls(socks, ctx is not None))
            await stop.wait()
            await http_app.shutdown()  # standalone streams and subscriptions end now
            server.drain()  # idle connections close; busy ones after their answer
            with trio.move_on_after(s.shutdown_grace_s):
                while server.connections:
                    await trio.sleep(0.05)
            http_app.app.requests.stop()  # the grace is over: each answers "shutting down"
            with trio.move_on_after(STOP_BOUND_S):
                while server.connections:
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()
    finally:
        if own:
            for sock in socks:
                sock.close()


def need_hypercorn() -> None:
    """Refuse ``http_server = "hypercorn"`` in one line when hypercorn is not installed."""
    require("hypercorn", "http_server = hypercorn (--server hypercorn)")


def hyper_config(app: App) -> Any:
    need_hypercorn()
    from hypercorn.config import Config as HyperConfig

    s = app.settings
    config = HyperConfig()
    host = f"[{s.host}]" if ":" in s.host else s.host
    config.bind = [f"{host}:{s.port}"]
    config.graceful_timeout = s.shutdown_grace_s + STOP_BOUND_S  # the last STOP_BOUND_S for the answers
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.keep_alive_timeout = s.keepalive_timeout_s
    config.keep_alive_max_requests = 100_000  # do not make busy clients reconnect every 1,000 calls
    if s.certfile:
        config.certfile, config.keyfile = s.certfile, s.keyfile
    return config


def hyper_binds(config: Any, sockets: list[socket.socket]) -> None:
    """Serve on sockets bound already: hypercorn takes them as ``fd://`` binds (copies it owns)."""
    config.bind = [f"fd://{os.dup(sock.fileno())}" for sock in sockets]


async def _serve_hypercorn(http_app: HttpApp, stop: trio.Event, sockets: list[socket.socket] | None,
                           task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    config = hyper_config(http_app.app)
    from hypercorn.trio import serve

    if sockets is not None:
        hyper_binds(config, sockets)
    grace = http_app.app.settings.shutdown_grace_s

    async def stop_requests_after_grace() -> None:
        await trio.sleep(grace)
        http_app.app.requests.stop()  # each answers "shutting down" while hypercorn still waits

    async with trio.open_nursery() as nursery:
        async def drain_trigger() -> None:
            await stop.wait()
            await http_app.shutdown()  # hypercorn then stops accepting and waits for the rest
            nursery.start_soon(stop_requests_after_grace)

        await serve(http_app, config, shutdown_trigger=drain_trigger, task_status=task_status)  # type: ignore[arg-type]
        nursery.cancel_scope.cancel()
