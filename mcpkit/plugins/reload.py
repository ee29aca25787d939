"""Re-importing a plugin given by path while the server serves it (``mcpkit dev``).

A reload is all or nothing. The module is imported afresh (in a worker thread: the event loop
keeps serving), registered with the plugin manager in place of the old one, its hooks called
and its items checked exactly as at start-up (conflicts with the other plugins included), and
its lifespan entered. Only when all of that worked is the new registry swapped in, whole, with
one assignment: a request that started before keeps the old items it holds and finishes on the
old code. Anything that fails (a syntax error, an import error, a hook that raises, a conflict,
a lifespan that will not open, a warning under ``--strict``) leaves the last good version
serving and is reported.

Lifespans: each version of a plugin holds its lifespan open in a task of its own. The new
version's is entered before it serves; the old version's is closed once the requests that
started before the swap are done (at most ``default_timeout`` seconds later).

What changed is announced on the app's change hub: ``tools/list_changed`` (and prompts,
resources) when a listing differs, ``resources/updated`` for the plugin's fixed resources (the
code that reads them changed), and a ``dev/reload`` event carrying the :class:`ReloadResult`
as a dict, which no transport forwards to clients: it is there for a console to show.
"""

from __future__ import annotations

import contextlib
import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import pluggy
import trio

from ..server.app import App, PluginInfo
from ..server.errors import DefinitionError, PluginError
from ..server.middleware import Chain, MiddlewareDef
from ..server.registry import Registry
from .config import Config
from .loader import Loaded, call_for, call_order, hook_problems, stage_plugin

log = logging.getLogger("mcpkit.dev")
#: the change hub event a reload raises (its argument: ReloadResult as a dict)
RELOAD_EVENT = "dev/reload"
#: how often a retired lifespan looks whether the requests it served are done
_RETIRE_POLL_S = 0.05


@dataclass
class ReloadResult:
    plugin: str
    ok: bool
    #: what went wrong (the last good version keeps serving), or None
    error: str | None = None
    #: seconds from the start of the reload until the new version served (or it failed)
    seconds: float = 0.0
    #: per kind ("tools", "prompts", "resources"): names added, removed, changed
    added: dict[str, list[str]] = field(default_factory=dict)
    removed: dict[str, list[str]] = field(default_factory=dict)
    changed: dict[str, list[str]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line for the log: ``reloaded weather in 41 ms: tools +humidity -rain ~forecast``."""
        ms = f"{self.seconds * 1000:.0f} ms"
        if not self.ok:
            return f"plugin {self.plugin}: reload failed after {ms}, the last good version keeps serving: {self.error}"
        parts = []
        for kind in ("tools", "prompts", "resources"):
            marks = [f"+{n}" for n in self.added.get(kind, [])] + [f"-{n}" for n in self.removed.get(kind, [])] \
                + [f"~{n}" for n in self.changed.get(kind, [])]
            if marks:
                parts.append(f"{kind} {' '.join(marks)}")
        return f"reloaded {self.plugin} in {ms}" + (f": {'; '.join(parts)}" if parts else " (no listing changed)")


class Reloader:
    """Reloads the plugins ``loaded.paths`` names and holds their lifespans open."""

    def __init__(self, app: App, loaded: Loaded, config: Config, *, strict: bool = False) -> None:
        self.app, self.loaded, self.config, self.strict = app, loaded, config, strict
        self.history: list[ReloadResult] = []
        #: called with each result (besides the log and the change hub)
        self.listeners: list[Callable[[ReloadResult], None]] = []
        self._holders: dict[str, _Retirement] = {}
        self._nursery: trio.Nursery | None = None
        self._lock = trio.Lock()

    @property
    def names(self) -> list[str]:
        return list(self.loaded.paths)

    # -- running ---------------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def running(self) -> Any:
        """Hold the watched plugins' lifespans open (entered here, not with the others); on exit
        they close in order, after the requests they serve."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                for name in self.names:
                    info = self._info(name)
                    if info is None or not info.loaded:
                        continue
                    try:
                        self._holders[name] = await nursery.start(self._hold, self._lifespans(name))
                    except Exception as exc:
                        if self.strict:
                            raise RuntimeError(f"plugin {name}: lifespan failed: {exc}") from exc
                        self._withdraw(info, f"lifespan failed: {type(exc).__name__}: {exc}")
                yield self
            finally:
                for held in self._holders.values():
                    held.retire(set())
                self._holders.clear()

    async def reload(self, name: str) -> ReloadResult:
        """Import ``name`` afresh and serve it, or keep the last good version and say why."""
        async with self._lock:  # two saves in a row: one reload after the other
            start = time.perf_counter()
            result = await self._reload(name, start)
            result.seconds = time.perf_counter() - start
        self.history = [*self.history[-49:], result]
        log.debug("%s", result.summary())  # mcpkit dev prints it; a console shows the hub event
        for listener in self.listeners:
            listener(result)
        await self.app.hub.announce(RELOAD_EVENT, asdict(result))
        return result

    # -- inside ----------------------------------------------------------------------------------
    async def _reload(self, name: str, start: float) -> ReloadResult:
        pp = self.loaded.paths[name]
        pm = self.loaded.manager
        info = self._info(name)
        assert info is not None and self._nursery is not None
        try:
            module = await trio.to_thread.run_sync(pp.load)
        except BaseException as exc:  # SyntaxError, ImportError, whatever the module raises at import
            if not isinstance(exc, Exception):
                raise
            return ReloadResult(name, False, _import_error(exc, pp.path))
        trial = PluginInfo(name, path=info.path, loaded=True)
        old = pm.unregister(name=name) if pm.has_plugin(name) else None
        try:
            try:
                pm.register(module, name=name)
            except pluggy.PluginValidationError as exc:
                raise PluginError(f"invalid hook: {exc}") from None
            for problem in hook_problems(pm, module):
                if self.strict:
                    raise PluginError(f"{problem} (fatal with --strict)")
                trial.warnings.append(problem)
            others = {key: owner for key, owner in self.app.registry.owner.items() if owner != name}
            staged, middleware = stage_plugin(pm, trial, self.config, others, strict=self.strict)
            retire = await self._nursery.start(self._hold, self._lifespans(name))
        except Exception as exc:
            exc = _leaf(exc)
            if pm.has_plugin(name):
                pm.unregister(name=name)
            if old is not None:
                pm.register(old, name=name)
            return ReloadResult(name, False, _setup_error(exc), warnings=trial.warnings)
        # from here on nothing can fail: the new version serves
        info.loaded, info.error, info.warnings = True, None, trial.warnings
        registry, chain = self._with(name, staged, middleware)
        self.loaded.staged[name], self.loaded.middleware_of[name] = staged, middleware
        before = set(self.app.requests.scopes)
        previous = self.app.replace_registry(registry)
        self.app.middleware = chain
        if name in self._holders:
            self._holders[name].retire(before)
        self._holders[name] = retire
        result = ReloadResult(name, True, warnings=trial.warnings)
        _diff(previous, registry, result)
        for kind in ("tools", "prompts", "resources"):
            if result.added.get(kind) or result.removed.get(kind) or result.changed.get(kind):
                await self.app.hub.announce(f"{kind}/list_changed", None)
        for res in registry.resources:
            if registry.owner.get(("resource", res.uri)) == name:
                await self.app.hub.announce("resources/updated", res.uri)
        return result

    def _lifespans(self, name: str) -> list[Any]:
        return [cm for cm in call_for(self.loaded.manager, "mcpkit_lifespan", name, self.config) if cm is not None]

    async def _hold(self, cms: list[Any], task_status: trio.TaskStatus["_Retirement"]) -> None:
        """One version's lifespans, open until it is retired and what it served is done."""
        held = _Retirement()
        try:
            async with contextlib.AsyncExitStack() as stack:
                for cm in cms:
                    await stack.enter_async_context(cm)
                task_status.started(held)
                held.open = True
                await held.event.wait()
                with trio.move_on_after(self.app.settings.default_timeout):
                    while held.serving & self.app.requests.scopes:
                        await trio.sleep(_RETIRE_POLL_S)
        except Exception as exc:
            if not held.open:
                raise  # entering failed: the reload (or the start) fails with it
            log.error("a plugin lifespan failed to close: %s: %s", type(exc).__name__, exc)

    def _info(self, name: str) -> PluginInfo | None:
        return next((info for info in self.app.plugins if info.name == name), None)

    def _withdraw(self, info: PluginInfo, error: str) -> None:
        log.error("plugin %s: %s; its tools are not served", info.name, error)
        info.loaded, info.error = False, error
        registry, chain = self._with(info.name, Registry(), [])
        self.app.replace_registry(registry)
        self.app.middleware = chain

    def _with(self, name: str, staged: Registry, middleware: list[MiddlewareDef]) -> tuple[Registry, Chain]:
        """The registry and middleware being served, with ``name``'s items and middleware
        replaced by these. The other plugins' items are taken as they are served now (not as
        they were built: a plugin may change its own at run time, as the gateway's upstreams
        do), each kind in the order pluggy calls its hook."""
        app, pm = self.app, self.loaded.manager
        current, owner = app.registry, app.registry.owner
        live = [info.name for info in app.plugins if info.loaded]
        reg = Registry(owner={key: who for key, who in owner.items() if who != name})
        reg.owner.update(staged.owner)
        for plugin in _in_order(pm, "mcpkit_tools", live):
            reg.tools.update(staged.tools if plugin == name else
                             {n: t for n, t in current.tools.items() if owner.get(("tool", n)) == plugin})
        for plugin in _in_order(pm, "mcpkit_prompts", live):
            reg.prompts.update(staged.prompts if plugin == name else
                               {n: p for n, p in current.prompts.items() if owner.get(("prompt", n)) == plugin})
        for plugin in _in_order(pm, "mcpkit_resources", live):
            for into, mine, now in ((reg.resources, staged.resources, current.resources),
                                    (reg.templates, staged.templates, current.templates)):
                into.extend(mine if plugin == name else [r for r in now if owner.get(("resource", r.uri)) == plugin])
        old = self.loaded.staged.get(name)
        reg.completions = [c for c in current.completions if old is None or all(c is not o for o in old.completions)]
        reg.completions.extend(staged.completions)
        entries = [m for plugin in _in_order(pm, "mcpkit_middleware", live)
                   for m in (middleware if plugin == name else [m for m in app.middleware.entries if m.plugin == plugin])]
        return reg, Chain(entries)


class _Retirement:
    """Tells a version's lifespan holder to close, once ``serving`` (the requests running when
    the next version took over) are done."""

    def __init__(self) -> None:
        self.event = trio.Event()
        self.serving: set[Any] = set()
        self.open = False

    def retire(self, serving: set[Any]) -> None:
        self.serving = serving
        self.event.set()


def _in_order(pm: pluggy.PluginManager, hook: str, names: list[str]) -> list[str]:
    """``names`` in the order pluggy calls ``hook`` (those not implementing it after, as loaded)."""
    rank = {name: i for i, name in enumerate(call_order(pm, hook))}
    return sorted(names, key=lambda n: rank.get(n, len(rank)))


def _import_error(exc: Exception, path: Any) -> str:
    if isinstance(exc, SyntaxError):
        where = f"{exc.filename or path}, line {exc.lineno}" if exc.lineno else str(exc.filename or path)
        return f"import failed: SyntaxError: {exc.msg} ({where})"
    return f"import failed: {type(exc).__name__}: {exc}"


def _leaf(exc: Exception) -> Exception:
    while isinstance(exc, ExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def _setup_error(exc: Exception) -> str:
    if isinstance(exc, (PluginError, ValueError, DefinitionError)):
        return str(exc)
    return f"setup failed: {type(exc).__name__}: {exc}"


def _listing(registry: Registry) -> dict[str, dict[str, Any]]:
    """What clients see of each kind (name -> its listing entry), to tell what a reload changed."""
    tools = {name: (t.describe(titles=True, annotations=True, structured=True), t.task, t.scopes)
             for name, t in registry.tools.items()}
    prompts = {name: p.describe(titles=True) for name, p in registry.prompts.items()}
    resources = {r.uri: r.describe(titles=True) for r in [*registry.resources, *registry.templates]}
    return {"tools": tools, "prompts": prompts, "resources": resources}


def _diff(old: Registry, new: Registry, result: ReloadResult) -> None:
    before, after = _listing(old), _listing(new)
    for kind in before:
        a, b = before[kind], after[kind]
        added = [n for n in b if n not in a]
        removed = [n for n in a if n not in b]
        changed = [n for n in b if n in a and a[n] != b[n]]
        order_moved = not (added or removed or changed) and list(a) != list(b)
        if added:
            result.added[kind] = added
        if removed:
            result.removed[kind] = removed
        if changed or order_moved:
            result.changed[kind] = changed or list(b)


__all__ = ["Reloader", "ReloadResult", "RELOAD_EVENT"]
