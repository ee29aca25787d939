"""Running the HTTP app under hypercorn's trio worker."""

from __future__ import annotations

import logging
import signal
import sys
from typing import Any

import trio
from hypercorn.config import Config as HyperConfig
from hypercorn.trio import serve

from ...server.app import App
from .asgi import HttpApp

log = logging.getLogger("mcpkit.http")


def hyper_config(app: App) -> HyperConfig:
    s = app.settings
    config = HyperConfig()
    host = f"[{s.host}]" if ":" in s.host else s.host
    config.bind = [f"{host}:{s.port}"]
    config.graceful_timeout = s.shutdown_grace_s
    config.accesslog = None
    config.errorlog = logging.getLogger("hypercorn.error")
    config.keep_alive_timeout = 75
    config.keep_alive_max_requests = 100_000  # do not make busy clients reconnect every 1,000 calls
    return config


async def serve_http(app: App, lifespans: list[tuple[str, Any]], *, strict: bool = False, legacy_only: bool = False,
                     task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    """Serve until SIGTERM/SIGINT: then stop accepting, let in-flight work finish within the
    grace period, close the streams."""
    http_app = HttpApp(app, lifespans, strict=strict, legacy_only=legacy_only)
    stop = trio.Event()

    async def on_signal() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async for signum in signals:
                log.warning("received %s; shutting down", signal.Signals(signum).name)
                stop.set()
                await http_app.shutdown()
                return

    async with trio.open_nursery() as nursery:
        nursery.start_soon(on_signal)
        binds = await nursery.start(_serve, http_app, hyper_config(app), stop)
        for bind in binds:
            print(f"mcpkit: serving MCP on {bind}/mcp (legacy SSE on {bind}/sse)", file=sys.stderr, flush=True)
        task_status.started(binds)
        await stop.wait()
        nursery.cancel_scope.deadline = trio.current_time() + app.settings.shutdown_grace_s + 2


async def _serve(http_app: HttpApp, config: HyperConfig, stop: trio.Event, task_status: trio.TaskStatus[list[str]] = trio.TASK_STATUS_IGNORED) -> None:
    await serve(http_app, config, shutdown_trigger=stop.wait, task_status=task_status)  # type: ignore[arg-type]
