"""Test plugins without subprocesses: an in-memory server and a client connected to it.

    import mcpkit.testing
    import acme_tools

    async def test_greet():
        async with mcpkit.testing.connect(acme_tools) as client:   # or a path: connect("./acme.py")
            result = await client.call_tool("greet", {"name": "Ada"})
            assert result.text == "Hello, Ada."

The server is built from the given plugin objects the way ``mcpkit serve`` builds it from
installed ones (same hooks, same load-time checks, lifespans entered), and it answers through the
same dispatcher; only the pipe is gone: every message is still encoded to JSON and decoded on the
other side. The client is :class:`mcpkit.client.Client`. Under pytest the ``mcpkit_client``
fixture does the same for the plugins a test module names (see :mod:`mcpkit.testing.pytest_plugin`).
"""

from __future__ import annotations

import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, AsyncIterator, Mapping

import trio

from ..plugins import loader
from ..protocol.framing import LineSplitter
from ..plugins.config import Config, load_config
from ..plugins.paths import PluginPath, plugin_path
from ..server.app import App
from ..server.lifespan import plugin_lifespans
from ..server.settings import load_settings
from ..transports.stdio import StdioSession

__all__ = ["connect", "build_app", "plugin_name", "MemoryTransport"]

PluginsArg = Any  # a plugin object or a path to one (str, Path), a list of them, or a {name: object} mapping


def build_app(plugins: PluginsArg, config: Mapping[str, Any] | str | os.PathLike[str] | None = None, *,
              strict: bool = True) -> tuple[App, loader.Loaded, Config]:
    """The application ``mcpkit serve`` would build from these plugins and this config.

    ``config`` has the config file's shape (``{"server": {...}, "plugins": {"NAME": {...}}}``) or
    names a TOML file. With ``strict`` (the default here) a load-time mistake raises
    :class:`mcpkit.PluginError` instead of being logged.
    """
    cfg = _config(config)
    # tasks live in memory unless the config says otherwise: tests leave no store behind
    settings = load_settings({"task_store": "memory", **cfg.server}, environ={})
    loaded = loader.load_objects(_named(plugins), strict=strict)
    app = loader.build_app(loaded, cfg, settings, strict=strict)
    return app, loaded, cfg


@asynccontextmanager
async def connect(*plugins: PluginsArg, config: Mapping[str, Any] | str | os.PathLike[str] | None = None,
                  strict: bool = True, **client_options: Any) -> AsyncIterator[Any]:
    """Serve ``plugins`` in memory and yield a connected :class:`mcpkit.client.Client`.

    ``client_options`` are :class:`mcpkit.client.ClientSettings` fields and ``connect``'s
    callbacks: ``mode="handshake"``, ``protocol_version="2025-06-18"``, ``on_elicitation=...``.
    """
    from ..client import connect as client_connect

    app, loaded, cfg = build_app(list(plugins) if len(plugins) != 1 else plugins[0], config, strict=strict)
    async with plugin_lifespans(app, loader.lifespans(loaded, cfg), strict=strict):
        async with trio.open_nursery() as nursery:
            transport = MemoryTransport(app, nursery)
            client_options.setdefault("remember_era", False)
            try:
                async with client_connect("mcpkit.testing", transport=transport, **client_options) as client:
                    client.app = app  # for tests that look at the server side
                    yield client
            finally:
                nursery.cancel_scope.cancel()


class MemoryTransport:
    """A client transport whose far end is a server session in the same trio run.

    Frames go through the server's own line handling (``StdioSession``), so the client sees the
    bytes a stdio server would have written, minus the pipe.
    """

    kind = "stdio"

    def __init__(self, app: App, nursery: trio.Nursery) -> None:
        self.protocol_version: str | None = None
        self._app = app
        self._nursery = nursery
        self._session: StdioSession | None = None
        self._lines = LineSplitter(app.settings.max_message_bytes)
        self._closed = False

    def describe(self) -> dict[str, Any]:
        return {"transport": "stdio", "command": ["mcpkit.testing"]}

    async def start(self, nursery: trio.Nursery, deliver: Any) -> None:
        from ..client.transports import deliver_frame

        class _Out:
            async def write(_self, data: bytes) -> None:
                await trio.lowlevel.checkpoint()
                if not self._closed:
                    deliver_frame(bytes(data), deliver)

        self._session = StdioSession(self._app, _Out(), self._nursery)  # type: ignore[arg-type]
        self._nursery.start_soon(self._session.forward_changes)

    async def send(self, frame: bytes, *, request_id: Any = None, headers: dict[str, str] | None = None,
                   stateless: bool = False) -> None:
        from ..client.errors import ConnectionClosed

        if self._session is None or self._closed:
            raise ConnectionClosed("the in-memory server is closed")
        for line in self._lines.feed(bytes(frame) + b"\n"):  # the stdio server's own framing and limit
            await self._session.take(line)

    def abort(self, request_id: Any) -> bool:
        return False

    async def aclose(self) -> None:
        self._closed = True
        self._app.hub.close()


def _named(plugins: PluginsArg) -> dict[str, Any]:
    """Plugins by name; a path (a module file or a package folder) is imported as ``mcpkit
    serve PATH`` imports it, under its file's or folder's name."""
    if isinstance(plugins, Mapping):
        return {name: _as_plugin(obj) for name, obj in plugins.items()}
    items = plugins if isinstance(plugins, (list, tuple)) else [plugins]
    out: dict[str, Any] = {}
    for obj in items:
        obj = _as_plugin(obj)
        out[obj.name if isinstance(obj, PluginPath) else plugin_name(obj)] = obj
    return out


def _as_plugin(obj: Any) -> Any:
    return plugin_path(obj) if isinstance(obj, (str, os.PathLike)) else obj


def plugin_name(obj: Any) -> str:
    """The name a plugin object is served under (its ``[plugins.NAME]`` table): a module's last
    dotted part (``acme.tools`` -> ``tools``; ``acme.plugin`` -> ``acme``), else the class name.
    Pass a ``{name: object}`` mapping to choose another."""
    parts = (getattr(obj, "__name__", None) or type(obj).__name__).split(".")
    if len(parts) > 1 and parts[-1] == "plugin":
        parts.pop()
    return parts[-1]


def _config(config: Mapping[str, Any] | str | os.PathLike[str] | None) -> Config:
    if config is None:
        return Config()
    if isinstance(config, (str, os.PathLike)):
        return load_config(Path(config))
    unknown = set(config) - {"server", "plugins"}
    if unknown:
        raise ValueError(f"config has the config file's shape: 'server' and 'plugins' tables, not {sorted(unknown)}")
    return Config(server=dict(config.get("server", {})), plugins={k: dict(v) for k, v in config.get("plugins", {}).items()})
