"""Find plugins through the ``mcpkit.plugins`` entry points and build the registry from them."""

from __future__ import annotations

import copy
import difflib
import logging
from dataclasses import dataclass, field
from typing import Any, Iterable

import pluggy

from ..server.app import App, PluginInfo
from ..server.errors import DefinitionError, PluginError
from ..server.middleware import Chain, MiddlewareDef
from ..server.registry import DuplicateName, Registry
from ..server.resources import ResourceDef
from ..server.settings import Settings
from . import hookspecs
from .config import Config
from .entrypoints import EntryPoint, entry_points
from .naming import RESERVED, Naming, resolution_hint

log = logging.getLogger("mcpkit.plugins")
GROUP = "mcpkit.plugins"
_ITEM_HOOKS = ("mcpkit_tools", "mcpkit_resources", "mcpkit_prompts", "mcpkit_completions")


__all__ = ["PluginError", "Loaded", "discover", "load", "load_objects", "build_app", "lifespans", "cli_commands"]


@dataclass
class Loaded:
    manager: pluggy.PluginManager
    infos: list[PluginInfo]
    #: every installed plugin's name, selected or not
    installed: list[str] = field(default_factory=list)
    #: problems with the selection itself (a name in the file that is not installed)
    warnings: list[str] = field(default_factory=list)


def discover() -> list[EntryPoint]:
    """Installed plugin entry points, by name (the first of a duplicated name wins)."""
    seen: dict[str, EntryPoint] = {}
    for ep in entry_points(GROUP):
        seen.setdefault(ep.name, ep)
    return [seen[name] for name in sorted(seen)]


def unknown_plugins(unknown: Iterable[str], installed: Iterable[str]) -> str:
    """The error for plugin names that are not installed (close ones suggested, the installed ones listed)."""
    unknown, installed = list(unknown), list(installed)
    close = [match for name in unknown for match in difflib.get_close_matches(name, installed, n=1)]
    hint = f"; did you mean {', '.join(repr(n) for n in close)}?" if close else ""
    return (f"no installed plugin named {', '.join(repr(n) for n in unknown)}{hint} "
            f"(installed: {', '.join(installed) or 'none'})")


def load(only: Iterable[str] = (), disable: Iterable[str] = (), *, strict: bool = False,
         unknown_names: str = "warn", extra: dict[str, Any] | None = None) -> Loaded:
    """Import the selected plugins and register them with a plugin manager.

    A plugin that fails to import is logged and left out (fatal with ``strict``). A name in
    ``only``/``disable`` that is not installed is an error when ``unknown_names`` is "error"
    (the command line), else a warning (the config file, the environment). ``extra`` are
    plugin objects by name that are not installed packages (the gateway's upstreams): selected
    and registered like the others, after them.
    """
    only, disable = set(only), set(disable)
    eps = discover()
    extra = dict(extra or {})
    clash = sorted(set(extra) & {ep.name for ep in eps})
    if clash:
        raise PluginError(f"upstream {clash[0]!r} has the name of an installed plugin; give the upstream another name")
    installed = [ep.name for ep in eps] + list(extra)
    unknown = (only | disable) - set(installed)
    warnings: list[str] = []
    if unknown:
        msg = unknown_plugins(sorted(unknown), installed)
        if strict or unknown_names == "error":
            raise PluginError(msg)
        if only and only <= unknown:
            raise PluginError(f"{msg}; with none of the plugins it names installed there is nothing to serve")
        log.warning(msg)
        warnings.append(msg)
    pm = _manager()
    infos: list[PluginInfo] = []
    for ep in eps:
        if (only and ep.name not in only) or ep.name in disable:
            continue
        info = PluginInfo(ep.name, ep.dist_name, ep.dist_version)
        infos.append(info)
        _register(pm, info, ep.load, strict)
    for name, obj in extra.items():
        if (only and name not in only) or name in disable:
            continue
        info = PluginInfo(name, "upstream", None)
        infos.append(info)
        _register(pm, info, lambda obj=obj: obj, strict)
    return Loaded(pm, infos, installed, warnings)


def load_objects(plugins: dict[str, Any], *, strict: bool = False) -> Loaded:
    """Register given plugin objects (modules, or objects with hook methods) by name: what
    ``mcpkit.testing`` serves, through the same checks as installed plugins."""
    pm = _manager()
    infos: list[PluginInfo] = []
    for name, obj in plugins.items():
        info = PluginInfo(name, getattr(obj, "__name__", type(obj).__name__), None)
        infos.append(info)
        _register(pm, info, lambda obj=obj: obj, strict)
    return Loaded(pm, infos)


def _manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    return pm


def _register(pm: pluggy.PluginManager, info: PluginInfo, get: Any, strict: bool) -> None:
    try:
        obj = get()
        pm.register(obj, name=info.name)
        info.loaded = True
    except PluginError:
        raise
    except DefinitionError as exc:
        _fail(info, str(exc), strict)
        return
    except pluggy.PluginValidationError as exc:
        _fail(info, f"invalid hook: {exc}", strict)
        return
    except Exception as exc:  # a broken plugin must not take the others down
        _fail(info, f"import failed: {type(exc).__name__}: {exc}", strict)
        return
    for problem in hook_problems(pm, obj):
        _warn(info, problem, strict)


def hook_problems(pm: pluggy.PluginManager, obj: Any) -> list[str]:
    """Mistakes pluggy lets pass in silence: a misspelled hook, a hook function without
    ``@mcpkit.hookimpl``, a plugin that implements nothing."""
    problems: list[str] = []
    callers = pm.get_hookcallers(obj) or []
    marked = f"{hookspecs.PROJECT}_impl"
    for caller in callers:
        if not caller.has_spec():
            problems.append(f"hook {caller.name!r} is not an mcpkit hook, so it is never called{_did_you_mean(caller.name)}")
    for attr in sorted(dir(obj)):
        value = getattr(obj, attr, None)
        if attr.startswith("mcpkit_") and callable(value) and not hasattr(value, marked):
            hint = "" if attr in HOOK_NAMES else _did_you_mean(attr)
            problems.append(f"function {attr} is not marked @mcpkit.hookimpl, so it is never called{hint}")
    if not any(caller.has_spec() for caller in callers) and not problems:
        problems.append("implements no mcpkit hook (mark hook functions with @mcpkit.hookimpl)")
    return problems


HOOK_NAMES = sorted(name for name in dir(hookspecs) if name.startswith("mcpkit_"))


def _did_you_mean(name: str) -> str:
    close = difflib.get_close_matches(name, HOOK_NAMES, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else f" (the hooks: {', '.join(HOOK_NAMES)})"


def _fail(info: PluginInfo, error: str, strict: bool) -> None:
    info.error = error
    info.loaded = False
    log.error("plugin %s: %s", info.name, error)
    if strict:
        raise PluginError(f"plugin {info.name}: {error}")


def _warn(info: PluginInfo, problem: str, strict: bool) -> None:
    info.warnings.append(problem)
    if strict:
        raise PluginError(f"plugin {info.name}: {problem} (fatal with --strict)")
    log.warning("plugin %s: %s", info.name, problem)


def call_for(pm: pluggy.PluginManager, hook: str, plugin: str, config: Config) -> list[Any]:
    """Call one plugin's implementation of ``hook`` the way pluggy calls hooks: inside every
    wrapper any plugin put on it (``wrapper=True`` / ``hookwrapper=True``), which see and may
    change its result. Returns the results (normally one; empty if the plugin does not
    implement the hook), as the wrappers left them.

    The hook is called once per plugin, not once for all, because each plugin gets its own
    ``config`` table and what it returns is served under its name; the call goes through
    pluggy's own executor (what ``pm.hook.NAME(...)`` runs), so tracing and call monitoring
    set on the manager see it too.
    """
    caller = getattr(pm.hook, hook)
    impls = [i for i in caller.get_hookimpls() if i.wrapper or i.hookwrapper or i.plugin_name == plugin]
    if not any(i.plugin_name == plugin and not (i.wrapper or i.hookwrapper) for i in impls):
        return []
    kwargs = {"config": _own_table(config, plugin), "plugin": plugin}
    result = pm._hookexec(caller.name, impls, kwargs, False)
    return list(result) if isinstance(result, list) else [result]


def call_order(pm: pluggy.PluginManager, hook: str) -> list[str]:
    """The plugins implementing ``hook``, ``tryfirst`` ones first and ``trylast`` ones last, as
    pluggy orders them; among equals they keep the order they were loaded in (pluggy itself
    would call the last registered first, which would reverse every listing)."""
    impls = [i for i in getattr(pm.hook, hook).get_hookimpls() if not (i.wrapper or i.hookwrapper)]
    loaded = [name for name, _ in pm.list_name_plugin()]

    def rank(impl: Any) -> tuple[int, int]:
        group = 0 if impl.tryfirst else 2 if impl.trylast else 1
        return group, loaded.index(impl.plugin_name) if impl.plugin_name in loaded else len(loaded)

    return [i.plugin_name for i in sorted(impls, key=rank)]


def _flat(results: list[Any], hook: str) -> list[Any]:
    """The items of list-returning hooks, every result checked to be a list."""
    out: list[Any] = []
    for items in results:
        if items is None:
            continue
        if not isinstance(items, (list, tuple)):
            raise ValueError(f"{hook} returned {type(items).__name__}; it must return a list")
        out.extend(items)
    return out


def _own_table(config: Config, plugin: str) -> dict[str, Any]:
    """The plugin's table without the keys mcpkit reads itself (prefix, rename)."""
    return {k: v for k, v in config.for_plugin(plugin).items() if k not in RESERVED}


def build_app(loaded: Loaded, config: Config, settings: Settings, *, strict: bool = False,
              keep_conflicts: bool = False) -> App:
    """Collect every loaded plugin's tools, resources, prompts, completions and middleware.

    Two plugins offering one name stop the build with a message naming both and the setting that
    resolves it, unless ``keep_conflicts`` (``mcpkit plugins``): then the first keeps the name
    and the clash is recorded on the second plugin's info. Each kind is listed, and middleware
    of equal ``order`` nest, in the order pluggy calls the plugins' hooks, so ``tryfirst`` and
    ``trylast`` on a hook implementation take effect.
    """
    pm = loaded.manager
    registry = Registry()
    staged_of: dict[str, Registry] = {}
    middleware_of: dict[str, list[MiddlewareDef]] = {}
    for info in loaded.infos:
        if not info.loaded:
            continue
        staged = Registry(owner=dict(registry.owner))
        try:
            naming = Naming.from_table(info.name, config.for_plugin(info.name))
            offered = _collect(pm, info, config, naming, staged, strict, keep_conflicts)
            for old in naming.unused(offered):
                _warn(info, f"rename: the plugin offers nothing named {old!r}", strict)
            mws = [_as_middleware(m, info.name) for m in _flat(call_for(pm, "mcpkit_middleware", info.name, config), "mcpkit_middleware")]
        except PluginError:
            raise
        except (ValueError, DefinitionError) as exc:
            _fail(info, str(exc), strict)
            continue
        except Exception as exc:
            _fail(info, f"setup failed: {type(exc).__name__}: {exc}", strict)
            continue
        registry.owner.update(staged.owner)
        staged_of[info.name] = staged
        middleware_of[info.name] = mws
    _merge(registry, staged_of, pm)
    middleware = [mw for name in _ordered(pm, "mcpkit_middleware", middleware_of) for mw in middleware_of[name]]
    return App(registry=registry, settings=settings, plugins=loaded.infos, middleware=Chain(middleware),
               verifier_factories=_verifier_factories(loaded, config, strict))


def _ordered(pm: pluggy.PluginManager, hook: str, names: Iterable[str]) -> list[str]:
    """``names`` in the order pluggy calls their ``hook`` (those not implementing it last)."""
    rank = {name: i for i, name in enumerate(call_order(pm, hook))}
    return sorted(names, key=lambda n: rank.get(n, len(rank)))


def _collect(pm: pluggy.PluginManager, info: PluginInfo, config: Config, naming: Naming, staged: Registry,
             strict: bool, keep_conflicts: bool) -> set[str]:
    """Stage one plugin's items; returns the names and URIs it offers (before renaming)."""
    offered: set[str] = set()
    for hook in _ITEM_HOOKS:
        for item in _flat(call_for(pm, hook, info.name, config), hook):
            original = getattr(item, "uri", None) if isinstance(item, ResourceDef) else getattr(item, "name", None)
            if original:
                offered.add(original)
            served = naming.apply(item)
            for pname in getattr(served, "untyped", ()):
                _warn(info, f"tool {served.name!r}: parameter {pname!r} has no type hint, so it accepts any "
                            f"JSON value; annotate it (e.g. `{pname}: str`)", strict)
            try:
                staged.add(served, info.name)
            except TypeError as exc:
                raise ValueError(f"{hook}: {exc}") from None
            except DuplicateName as exc:
                if exc.first == exc.second:
                    _warn(info, f"{exc}; the second one is left out", strict)
                elif keep_conflicts:
                    info.conflicts.append({"kind": exc.kind, "name": exc.name, "plugin": exc.first})
                else:
                    raise PluginError(f"conflicting plugins: {exc}; {resolution_hint(exc.kind, exc.name, exc.second)}") from None
    return offered


def _as_middleware(item: Any, plugin: str) -> MiddlewareDef:
    mw = item if isinstance(item, MiddlewareDef) else MiddlewareDef(item)
    mw = copy.copy(mw)
    mw.plugin = plugin
    return mw


def _verifier_factories(loaded: Loaded, config: Config, strict: bool) -> dict[str, Any]:
    """Token verifier factories the plugins offer (``mcpkit_token_verifiers``), by name."""
    out: dict[str, Any] = {}
    for info in loaded.infos:
        if not info.loaded:
            continue
        try:
            offered: dict[str, Any] = {}
            for result in call_for(loaded.manager, "mcpkit_token_verifiers", info.name, config):
                if not isinstance(result, dict) or not all(isinstance(k, str) and callable(v) for k, v in result.items()):
                    raise TypeError("mcpkit_token_verifiers must return {name: factory}")
                offered.update(result)
        except Exception as exc:
            _fail(info, f"token verifiers failed: {type(exc).__name__}: {exc}", strict)
            continue
        for name, factory in offered.items():
            if name in out:
                raise PluginError(f"conflicting plugins: two offer the token verifier {name!r}")
            out[name] = factory
    return out


def _merge(into: Registry, staged_of: dict[str, Registry], pm: pluggy.PluginManager) -> None:
    """Each kind of item from every plugin, plugins in the order pluggy calls that kind's hook."""
    for name in _ordered(pm, "mcpkit_tools", staged_of):
        into.tools.update(staged_of[name].tools)
    for name in _ordered(pm, "mcpkit_prompts", staged_of):
        into.prompts.update(staged_of[name].prompts)
    for name in _ordered(pm, "mcpkit_resources", staged_of):
        into.resources.extend(staged_of[name].resources)
        into.templates.extend(staged_of[name].templates)
    for name in _ordered(pm, "mcpkit_completions", staged_of):
        into.completions.extend(staged_of[name].completions)


def lifespans(loaded: Loaded, config: Config) -> list[tuple[str, Any]]:
    """(plugin, async context manager) for each loaded plugin that has a lifespan, entered in
    the order pluggy calls ``mcpkit_lifespan``."""
    loaded_names = [info.name for info in loaded.infos if info.loaded]
    out = []
    for name in _ordered(loaded.manager, "mcpkit_lifespan", loaded_names):
        for cm in call_for(loaded.manager, "mcpkit_lifespan", name, config):
            if cm is not None:
                out.append((name, cm))
    return out


def cli_commands(loaded: Loaded) -> list[Any]:
    commands: list[Any] = []
    for info in loaded.infos:
        if info.loaded:
            try:
                commands.extend(_flat(call_for(loaded.manager, "mcpkit_cli_commands", info.name, Config()), "mcpkit_cli_commands"))
            except Exception as exc:
                log.error("plugin %s: CLI commands failed: %s: %s", info.name, type(exc).__name__, exc)
    return commands
