"""Find plugins through the ``mcpkit.plugins`` entry points and build the registry from them."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Iterable

import pluggy

from ..server.app import App, PluginInfo
from ..server.registry import DuplicateName, Registry
from ..server.settings import Settings
from . import hookspecs
from .config import Config
from .entrypoints import EntryPoint, entry_points

log = logging.getLogger("mcpkit.plugins")
GROUP = "mcpkit.plugins"
_ITEM_HOOKS = ("mcpkit_tools", "mcpkit_resources", "mcpkit_prompts", "mcpkit_completions")


class PluginError(Exception):
    """A plugin could not be loaded and --strict was given, or two plugins clash."""


@dataclass
class Loaded:
    manager: pluggy.PluginManager
    infos: list[PluginInfo]


def discover() -> list[EntryPoint]:
    """Installed plugin entry points, by name (the first of a duplicated name wins)."""
    seen: dict[str, EntryPoint] = {}
    for ep in entry_points(GROUP):
        seen.setdefault(ep.name, ep)
    return [seen[name] for name in sorted(seen)]


def load(only: Iterable[str] = (), disable: Iterable[str] = (), *, strict: bool = False) -> Loaded:
    """Import the selected plugins and register them with a plugin manager.

    A plugin that fails to import is logged and left out (fatal with ``strict``).
    """
    only, disable = set(only), set(disable)
    eps = discover()
    unknown = (only | disable) - {ep.name for ep in eps}
    if unknown:
        msg = f"no installed plugin named {', '.join(sorted(unknown))} (installed: {', '.join(ep.name for ep in eps) or 'none'})"
        if strict or (only and only <= unknown):
            raise PluginError(msg)
        log.warning(msg)
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    infos: list[PluginInfo] = []
    for ep in eps:
        if (only and ep.name not in only) or ep.name in disable:
            continue
        info = PluginInfo(ep.name, ep.dist_name, ep.dist_version)
        infos.append(info)
        try:
            pm.register(ep.load(), name=ep.name)
            info.loaded = True
        except Exception as exc:  # a broken plugin must not take the others down
            _fail(info, f"import failed: {type(exc).__name__}: {exc}", strict)
    return Loaded(pm, infos)


def _fail(info: PluginInfo, error: str, strict: bool) -> None:
    info.error = error
    info.loaded = False
    log.error("plugin %s: %s", info.name, error)
    if strict:
        raise PluginError(f"plugin {info.name}: {error}")


def call_for(pm: pluggy.PluginManager, hook: str, plugin: str, config: Config) -> Any:
    """Call one plugin's implementation of ``hook`` with the arguments it names."""
    for impl in getattr(pm.hook, hook).get_hookimpls():
        if impl.plugin_name == plugin:
            kwargs = {"config": config.for_plugin(plugin)} if "config" in impl.argnames else {}
            return impl.function(**kwargs)
    return None


def build_app(loaded: Loaded, config: Config, settings: Settings, *, strict: bool = False) -> App:
    """Collect every loaded plugin's tools, resources, prompts and completions."""
    registry = Registry()
    for info in loaded.infos:
        if not info.loaded:
            continue
        staged = Registry(owner=dict(registry.owner))
        try:
            for hook in _ITEM_HOOKS:
                for item in call_for(loaded.manager, hook, info.name, config) or []:
                    staged.add(item, info.name)
        except DuplicateName as exc:
            raise PluginError(f"conflicting plugins: {exc}") from None
        except Exception as exc:
            _fail(info, f"setup failed: {type(exc).__name__}: {exc}", strict)
            continue
        _merge(registry, staged)
    return App(registry=registry, settings=settings, plugins=loaded.infos,
               verifier_factories=_verifier_factories(loaded, config, strict))


def _verifier_factories(loaded: Loaded, config: Config, strict: bool) -> dict[str, Any]:
    """Token verifier factories the plugins offer (``mcpkit_token_verifiers``), by name."""
    out: dict[str, Any] = {}
    for info in loaded.infos:
        if not info.loaded:
            continue
        try:
            offered = call_for(loaded.manager, "mcpkit_token_verifiers", info.name, config) or {}
            if not isinstance(offered, dict) or not all(isinstance(k, str) and callable(v) for k, v in offered.items()):
                raise TypeError("mcpkit_token_verifiers must return {name: factory}")
        except Exception as exc:
            _fail(info, f"token verifiers failed: {type(exc).__name__}: {exc}", strict)
            continue
        for name, factory in offered.items():
            if name in out:
                raise PluginError(f"conflicting plugins: two offer the token verifier {name!r}")
            out[name] = factory
    return out


def _merge(into: Registry, staged: Registry) -> None:
    into.tools.update(staged.tools)
    into.prompts.update(staged.prompts)
    into.resources.extend(staged.resources)
    into.templates.extend(staged.templates)
    into.completions.extend(staged.completions)
    into.owner.update(staged.owner)


def lifespans(loaded: Loaded, config: Config) -> list[tuple[str, Any]]:
    """(plugin, async context manager) for each loaded plugin that has a lifespan."""
    out = []
    for info in loaded.infos:
        if info.loaded:
            cm = call_for(loaded.manager, "mcpkit_lifespan", info.name, config)
            if cm is not None:
                out.append((info.name, cm))
    return out


def cli_commands(loaded: Loaded) -> list[Any]:
    commands: list[Any] = []
    for info in loaded.infos:
        if info.loaded:
            try:
                commands.extend(call_for(loaded.manager, "mcpkit_cli_commands", info.name, Config()) or [])
            except Exception as exc:
                log.error("plugin %s: CLI commands failed: %s: %s", info.name, type(exc).__name__, exc)
    return commands
