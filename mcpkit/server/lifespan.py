"""Holding plugin lifespans open while a transport serves."""

from __future__ import annotations

import contextlib
import logging
from typing import Any, AsyncIterator

from .app import App
from .middleware import Chain

log = logging.getLogger("mcpkit.server")


@contextlib.asynccontextmanager
async def plugin_lifespans(app: App, lifespans: list[tuple[str, Any]], *, strict: bool = False) -> AsyncIterator[App]:
    """Enter each plugin's lifespan; a plugin whose lifespan fails to open is dropped
    (its tools, resources and prompts leave the registry) unless ``strict``."""
    async with contextlib.AsyncExitStack() as stack:
        for name, cm in lifespans:
            try:
                await stack.enter_async_context(cm)
            except Exception as exc:
                if strict:
                    raise RuntimeError(f"plugin {name}: lifespan failed: {exc}") from exc
                log.error("plugin %s: lifespan failed, its tools are not served: %s: %s", name, type(exc).__name__, exc)
                _drop(app, name, f"lifespan failed: {type(exc).__name__}: {exc}")
        try:
            async with app.tasks.serving():
                yield app
        finally:
            app.hub.close()


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
