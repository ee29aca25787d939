"""The application object: registry, settings and shared services for every transport."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import trio

from .._version import __version__
from ..protocol.connection import ServerConnection
from .context import RunningRequests
from .middleware import Chain
from .observe import Observers
from .mrtr import StateSealer
from .changes import ChangeHub
from .registry import Registry
from .settings import Settings
from .tasks.manager import TASKS_EXTENSION, TaskManager
from .data_dir import data_dir
from .redis_link import RedisLink
from .tasks.redis_store import RedisTaskStore
from .tasks.sqlite_store import SqliteTaskStore
from .tasks.store import MemoryTaskStore, TaskStore


@dataclass
class PluginInfo:
    name: str
    distribution: str | None = None
    version: str | None = None
    error: str | None = None
    loaded: bool = False
    #: load-time mistakes that did not stop the plugin (an unmarked hook, an untyped parameter)
    warnings: list[str] = field(default_factory=list)
    #: names this plugin offers that an earlier plugin took ({"kind", "name", "plugin"})
    conflicts: list[dict[str, str]] = field(default_factory=list)
    #: the file or package folder it was loaded from, for a plugin given by path (not installed)
    path: str | None = None
    #: a live state to report (an upstream of the gateway: connected, retrying, ...), or None
    status: Callable[[], dict[str, Any]] | None = None


@dataclass
class App:
    registry: Registry
    settings: Settings = field(default_factory=Settings)
    plugins: list[PluginInfo] = field(default_factory=list)
    hub: ChangeHub = field(default_factory=ChangeHub)
    #: token verifier factories by name, from the plugins' ``mcpkit_token_verifiers`` hooks
    verifier_factories: dict[str, Any] = field(default_factory=dict)
    #: middleware wrapping requests, in order (see :mod:`mcpkit.server.middleware`)
    middleware: Chain = field(default_factory=Chain)
    #: every request running, on every transport (a server that stops ends them with an answer)
    requests: RunningRequests = field(default_factory=RunningRequests, repr=False)
    _limiters: dict[Any, trio.CapacityLimiter] = field(default_factory=dict, repr=False)
    #: the registry may change while serving (``mcpkit dev`` reloads plugins): every list
    #: capability is declared, with listChanged, even for a kind nothing offers yet
    reloading: bool = False
    #: what watches this server (metrics, traces, the console); empty: nothing is reported
    observers: Observers = field(default_factory=Observers, repr=False)
    #: the metrics this process counts (:class:`~mcpkit.server.metrics.Metrics`), when enabled
    metrics: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        secret = self.settings.state_secret
        self.sealer = StateSealer(secret.encode() if secret else None)
        self.server_info = {"name": self.settings.name, "version": __version__}
        #: the link to shared state when several processes serve one deployment
        self.shared: RedisLink | None = None
        if self.settings.state != "memory":
            s = self.settings
            self.shared = RedisLink(s.state, s.state_prefix, s.state_timeout_s)
        self.tasks = TaskManager(self.settings, self._task_store, self.hub.publish)

    def _task_store(self) -> TaskStore:
        """The store tasks are kept in: durable SQLite by default; in memory when no tool can
        run as a task (no file is made for nothing) or when configured so."""
        s = self.settings
        if self.shared is not None:
            return RedisTaskStore(self.shared)
        if s.task_store == "memory" or not self.task_tools():
            return MemoryTaskStore()
        return SqliteTaskStore(s.task_store_path or data_dir() / "tasks.sqlite3")

    def task_tools(self) -> list[str]:
        return [name for name, tool in self.registry.tools.items() if tool.task]

    def thread_limiter(self, item: Any) -> trio.CapacityLimiter:
        """The worker-thread slots of one tool, resource, prompt or completion (shared by
        every transport of this app)."""
        limiter = self._limiters.get(item)
        if limiter is None:
            size = getattr(item, "max_threads", None) or self.settings.max_threads_per_tool
            limiter = self._limiters[item] = trio.CapacityLimiter(size)
        return limiter

    def replace_registry(self, registry: Registry) -> Registry:
        """Serve ``registry`` from now on, swapped in whole (a request holding the old one's
        items finishes with them); returns the old one."""
        old, self.registry = self.registry, registry
        kept = {*registry.tools.values(), *registry.prompts.values(), *registry.resources, *registry.templates,
                *registry.completions}
        for item in [item for item in self._limiters if item not in kept]:
            del self._limiters[item]  # a request that holds one keeps it; new ones get new slots
        return old

    def capabilities(self) -> dict[str, Any]:
        reg = self.registry
        caps: dict[str, Any] = {"logging": {}}
        if reg.tools or self.reloading:
            caps["tools"] = {"listChanged": True}
        if reg.prompts or self.reloading:
            caps["prompts"] = {"listChanged": True}
        if reg.resources or reg.templates or self.reloading:
            caps["resources"] = {"subscribe": True, "listChanged": True}
        caps["completions"] = {}
        if self.task_tools():
            caps["extensions"] = {TASKS_EXTENSION: {}}
        return caps

    def new_connection(self, *, allow_handshake: bool = True) -> ServerConnection:
        return ServerConnection(
            server_info=self.server_info,
            capabilities=self.capabilities(),
            instructions=self.settings.instructions,
            allow_handshake=allow_handshake,
        )
