"""Holding plugin lifespans open while a transport serves."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, AsyncIterator

import trio

from .app import App
from .middleware import Chain
from .mrtr import StateSealer
from .redis_link import StateUnavailable

log = logging.getLogger("mcpkit.server")


@contextlib.asynccontextmanager
async def plugin_lifespans(app: App, lifespans: list[tuple[str, Any]], *, strict: bool = False) -> AsyncIterator[App]:
    """Enter each plugin's lifespan; a plugin whose lifespan fails to open is dropped
    (its tools, resources and prompts leave the registry) unless ``strict``."""
    async with contextlib.AsyncExitStack() as stack:
        if app.settings.traces:  # first in, last out: the spans of everything below are flushed
            from .tracing import traced

            await stack.enter_async_context(traced(app))
        for name, cm in lifespans:
            try:
                await stack.enter_async_context(cm)
            except Exception as exc:
                if strict:
                    raise RuntimeError(f"plugin {name}: lifespan failed: {exc}") from exc
                log.error("plugin %s: lifespan failed, its tools are not served: %s: %s", name, type(exc).__name__, exc)
                _drop(app, name, f"lifespan failed: {type(exc).__name__}: {exc}")
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(app.hub.pump)
                async with shared_state(app), app.tasks.serving():
                    yield app
                nursery.cancel_scope.cancel()
        finally:
            app.hub.close()


@contextlib.asynccontextmanager
async def shared_state(app: App) -> AsyncIterator[None]:
    """With ``state = "redis://..."``: the link held open, the requestState secret shared, and
    change events (list_changed, resource updates, task status) passed between processes: the
    bus is one relay of the change hub, and what the bus brings arrives at its listeners."""
    link = app.shared
    if link is None:
        yield
        return

    async def tell_others(event: str, arg: Any) -> None:
        await link.publish("change", event=event, arg=arg)

    async with link.running(), trio.open_nursery() as nursery:
        if not app.settings.state_secret:
            nursery.start_soon(_adopt_shared_secret, app, link)
        link.on("change", lambda m: app.hub.arrived(m["event"], _arg(m["event"], m.get("arg"))))
        with app.hub.relaying(tell_others):
            yield
        nursery.cancel_scope.cancel()


async def _adopt_shared_secret(app: App, link: Any) -> None:
    """Every process seals requestState with the same key; until Redis answers, a local one."""
    while True:
        try:
            app.sealer = StateSealer(await link.shared_secret())
            return
        except StateUnavailable:
            await trio.sleep(2)


def _arg(event: str, arg: Any) -> Any:
    return tuple(arg) if event == "task" and isinstance(arg, list) else arg


def _drop(app: App, plugin: str, error: str) -> None:
    reg = app.registry
    for (kind, name), owner in list(reg.owner.items()):
        if owner != plugin:
            continue
        del reg.owner[(kind, name)]
        if kind == "tool":
            reg.tools.pop(name, None)
        elif kind == "prompt":
            reg.prompts.pop(name, None)
        else:
            reg.resources = [r for r in reg.resources if r.uri != name]
            reg.templates = [r for r in reg.templates if r.uri != name]
    app.middleware = Chain([m for m in app.middleware.entries if m.plugin != plugin])
    for info in app.plugins:
        if info.name == plugin:
            info.error, info.loaded = error, False
