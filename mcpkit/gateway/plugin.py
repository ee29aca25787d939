"""Each upstream as a plugin named after it, and the gateway that runs them all.

An :class:`UpstreamPlugin` is registered through the loader like an installed plugin, so
``--plugin`` / ``--disable`` select it and ``mcpkit plugins`` lists it. Its items are not known
when the registry is built (nothing is connected yet): the plugin's lifespan connects, and
every listing (the first, and each one after an upstream ``list_changed`` or a reconnect)
replaces the plugin's items in the registry in place, keeping their position, then announces
our own ``list_changed``.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, AsyncIterator

import trio

from ..client.errors import McpError
from ..plugins.hookspecs import hookimpl
from ..plugins.naming import Naming
from ..protocol import jsonrpc
from ..protocol.jsonrpc import ProtocolError
from ..server.app import App, PluginInfo
from ..server.context import Context
from ..server.errors import ResourceNotFound
from ..server.tools import ToolResult
from .items import ForwardedPrompt, ForwardedResource, ForwardedTool, forwarded_completion
from .link import Link, Listing, Unavailable
from .parking import Parking
from .relay import Calls, call_result, content_for, failure_text, forward, plain_result
from .settings import UpstreamSettings

log = logging.getLogger("mcpkit.gateway")
_NOT_FOUND = (jsonrpc.INVALID_PARAMS, jsonrpc.RESOURCE_NOT_FOUND_LEGACY)


class UpstreamPlugin:
    """The plugin object of one upstream."""

    def __init__(self, settings: UpstreamSettings, gateway: "Gateway") -> None:
        self.settings = settings
        self.name = settings.name
        self.gateway = gateway
        self.calls = Calls(settings.name, Parking(lambda: gateway.nursery))
        handlers = {"log": self.calls.on_log, "request": self.calls.on_request,
                    "elicitation": _declared, "sampling": _declared}
        self.link = Link(settings, listed=self._listed, updated=self._updated, handlers=handlers)
        self.naming = Naming(settings.prefix, dict(settings.rename))
        self.app: App | None = None
        self.info: PluginInfo | None = None
        self._completions: list[Any] = []
        self._warned: set[str] = set()
        self._served_uris: dict[str, str] = {}  # upstream URI -> the URI we serve it as

    def __repr__(self) -> str:
        return f"<upstream {self.name}: {self.settings.describe()}>"

    @hookimpl
    def mcpkit_lifespan(self) -> Any:
        return self.gateway.running(self)

    def status(self) -> dict[str, Any]:
        return self.link.status()

    # -- the registry ---------------------------------------------------------------------------
    async def _listed(self, listing: Listing, kinds: set[str], notified: bool = False) -> None:
        """Install a listing. Our ``list_changed`` goes out for each kind whose items changed,
        and for each kind the upstream said changed (``notified``): it may know better."""
        app = self.app
        if app is None:
            return
        changed = []
        if "tools" in kinds and (self._install_tools(app, listing) or notified):
            changed.append("tools")
        if "prompts" in kinds and (self._install_prompts(app, listing) or notified):
            changed.append("prompts")
        if "resources" in kinds and (self._install_resources(app, listing) or notified):
            changed.append("resources")
        self._install_completions(app, listing)
        for kind in changed:
            await app.hub.announce(f"{kind}/list_changed", None)

    def _claim(self, app: App, kind: str, name: str) -> bool:
        owner = app.registry.owner.get((kind, name))
        if owner is None or owner == self.name:
            return True
        problem = f"{kind} {name!r} is already offered by plugin {owner!r}, so this upstream's is not served; " \
                  f"set prefix or rename in [upstreams.{self.name}]"
        if problem not in self._warned:
            self._warned.add(problem)
            log.warning("upstream %s: %s", self.name, problem)
            if self.info is not None:
                self.info.warnings.append(problem)
        return False

    def _install_tools(self, app: App, listing: Listing) -> bool:
        s = self.settings
        task = "optional" if s.task == "optional" or _declares_tasks(listing) else None
        new: dict[str, Any] = {}
        for d in listing.tools:
            if not isinstance(d.get("name"), str) or not s.wants(d["name"]):
                continue
            tool = self.naming.apply(ForwardedTool(d, self._tool_call(d["name"]), scopes=s.scopes, timeout=s.timeout, task=task))
            if self._claim(app, "tool", tool.name):
                new[tool.name] = tool
        return _replace(app, "tool", app.registry.tools, new, self.name)

    def _install_prompts(self, app: App, listing: Listing) -> bool:
        new: dict[str, Any] = {}
        for d in listing.prompts:
            if isinstance(d.get("name"), str):
                prompt = self.naming.apply(ForwardedPrompt(d, self._prompt_get(d["name"]), scopes=self.settings.scopes))
                if self._claim(app, "prompt", prompt.name):
                    new[prompt.name] = prompt
        return _replace(app, "prompt", app.registry.prompts, new, self.name)

    def _install_resources(self, app: App, listing: Listing) -> bool:
        reg = app.registry
        fixed: dict[str, Any] = {}
        templates: dict[str, Any] = {}
        for template, items in ((False, listing.resources), (True, listing.templates)):
            key = "uriTemplate" if template else "uri"
            for d in items:
                original = d.get(key)
                if not isinstance(original, str) or not original:
                    continue
                uri = self.naming.rename.get(original, original)
                read = self._resource_read(None if template else original)
                item = ForwardedResource(d, uri, read, template=template, scopes=self.settings.scopes)
                if self._claim(app, "resource", uri):
                    (templates if template else fixed)[uri] = item
        self._served_uris = {item.upstream_uri: uri for uri, item in fixed.items()}
        changed = _replace_list(app, reg.resources, fixed, self.name)
        changed = _replace_list(app, reg.templates, templates, self.name) or changed
        for (kind, name), owner in list(reg.owner.items()):
            if kind == "resource" and owner == self.name and name not in fixed and name not in templates:
                del reg.owner[(kind, name)]
        for uri in (*fixed, *templates):
            reg.owner[("resource", uri)] = self.name
        return changed

    def _install_completions(self, app: App, listing: Listing) -> None:
        comps = app.registry.completions
        comps[:] = [c for c in comps if all(c is not mine for mine in self._completions)]
        self._completions = []
        if "completions" not in listing.capabilities:
            return
        for d in listing.prompts:
            if isinstance(d.get("name"), str) and d.get("arguments"):
                self._completions.append(forwarded_completion("ref/prompt", self.naming.name(d["name"]),
                                                              self._complete("ref/prompt", d["name"])))
        for d in listing.templates:
            if isinstance(d.get("uriTemplate"), str):
                served = self.naming.rename.get(d["uriTemplate"], d["uriTemplate"])
                self._completions.append(forwarded_completion("ref/resource", served, self._complete("ref/resource", d["uriTemplate"])))
        comps.extend(self._completions)

    async def _updated(self, uri: str) -> None:
        if self.app is not None:
            await self.app.hub.announce("resources/updated", self._served_uris.get(uri, uri))

    # -- the forwarding functions -------------------------------------------------------------------
    def _tool_call(self, upstream_name: str) -> Any:
        link, calls = self.link, self.calls

        async def call(arguments: dict[str, Any], ctx: Context) -> ToolResult:
            # the result goes out as the upstream's bytes, unless a middleware may look inside
            app = self.app
            raw = app is not None and not app.middleware.for_method("tools/call")
            try:
                result = await forward(link, calls, "tools/call", {"name": upstream_name, "arguments": arguments}, ctx, raw)
            except (Unavailable, McpError) as exc:
                return ToolResult(raw={"content": [{"type": "text", "text": failure_text(link, exc)}], "isError": True})
            except trio.Cancelled:
                if trio.current_time() >= trio.current_effective_deadline():  # out of time: does the upstream answer?
                    self.gateway.check_alive(link)
                raise
            return ToolResult(raw=call_result(result, ctx.protocol_version))

        return call

    def _prompt_get(self, upstream_name: str) -> Any:
        link, calls = self.link, self.calls

        async def get(arguments: dict[str, Any], ctx: Context) -> dict[str, Any]:
            params: dict[str, Any] = {"name": upstream_name}
            if arguments:
                params["arguments"] = arguments
            try:
                result = plain_result(await forward(link, calls, "prompts/get", params, ctx))
            except (Unavailable, McpError) as exc:
                raise ProtocolError(jsonrpc.INTERNAL_ERROR, failure_text(link, exc)) from None
            for message in result.get("messages") or []:
                if isinstance(message, dict) and isinstance(message.get("content"), dict):
                    message["content"] = content_for([message["content"]], ctx.protocol_version)[0]
            return result

        return get

    def _resource_read(self, fixed_uri: str | None) -> Any:
        link, calls = self.link, self.calls

        async def read(uri: str | None = None) -> list[Any]:
            target = fixed_uri or uri or ""
            try:
                result = await forward(link, calls, "resources/read", {"uri": target}, None)
            except ProtocolError as exc:
                if exc.code in _NOT_FOUND:
                    raise ResourceNotFound(target, exc.message) from None
                raise
            except (Unavailable, McpError) as exc:
                raise RuntimeError(failure_text(link, exc)) from None
            contents = result.get("contents")
            return contents if isinstance(contents, list) else []

        return read

    def _complete(self, ref_type: str, upstream_ref: str) -> Any:
        link, calls = self.link, self.calls
        key = "name" if ref_type == "ref/prompt" else "uri"

        async def complete(argument: str, value: str, context: dict[str, Any]) -> list[str]:
            params: dict[str, Any] = {"ref": {"type": ref_type, key: upstream_ref}, "argument": {"name": argument, "value": value}}
            if context:
                params["context"] = {"arguments": context}
            try:
                result = await forward(link, calls, "completion/complete", params, None)
            except (Unavailable, McpError) as exc:
                raise RuntimeError(failure_text(link, exc)) from None
            values = (result.get("completion") or {}).get("values")
            return [v for v in values if isinstance(v, str)] if isinstance(values, list) else []

        return complete


async def _declared(params: dict[str, Any]) -> Any:
    """Declares the capability upstream; requests are answered by ``Calls.on_request``."""
    raise McpError("not reached")


def _declares_tasks(listing: Listing) -> bool:
    from ..protocol.types import TASKS_EXTENSION

    exts = listing.capabilities.get("extensions")
    return isinstance(exts, dict) and TASKS_EXTENSION in exts


def _replace(app: App, kind: str, table: dict[str, Any], new: dict[str, Any], plugin: str) -> bool:
    """Put ``new`` in place of ``plugin``'s items in ``table``, where the first of them was."""
    owner = app.registry.owner
    old = {name: item for name, item in table.items() if owner.get((kind, name)) == plugin}
    if [(n, getattr(i, "definition", None)) for n, i in old.items()] == [(n, i.definition) for n, i in new.items()]:
        for name, item in new.items():  # same definitions: fresh forwarders, same order
            table[name] = item
        return False
    out: dict[str, Any] = {}
    placed = False
    for name, item in table.items():
        if name in old:
            if not placed:
                out.update(new)
                placed = True
            continue
        out[name] = item
    if not placed:
        out.update(new)
    table.clear()
    table.update(out)
    for name in old:
        if name not in new:
            owner.pop((kind, name), None)
    for name in new:
        owner[(kind, name)] = plugin
    return True


def _replace_list(app: App, items: list[Any], new: dict[str, Any], plugin: str) -> bool:
    owner = app.registry.owner
    mine = [i for i in items if owner.get(("resource", i.uri)) == plugin]
    if [(i.uri, i.definition) for i in mine] == [(u, i.definition) for u, i in new.items()]:
        items[:] = [new.get(i.uri, i) if i in mine else i for i in items]
        return False
    out: list[Any] = []
    placed = False
    for item in items:
        if any(item is m for m in mine):
            if not placed:
                out.extend(new.values())
                placed = True
            continue
        out.append(item)
    if not placed:
        out.extend(new.values())
    items[:] = out
    return True


class Gateway:
    """Every upstream of one server: started together, each waited for at start-up (a failing
    one does not hold up the others for longer than its connect timeout)."""

    def __init__(self) -> None:
        self.plugins: dict[str, UpstreamPlugin] = {}
        self._nursery: trio.Nursery | None = None

    def add(self, settings: UpstreamSettings) -> UpstreamPlugin:
        plugin = UpstreamPlugin(settings, self)
        self.plugins[settings.name] = plugin
        return plugin

    def attach(self, app: App) -> None:
        """Give each loaded upstream plugin the app whose registry it fills."""
        for info in app.plugins:
            plugin = self.plugins.get(info.name)
            if plugin is not None and info.loaded:
                plugin.app, plugin.info = app, info
                info.status = plugin.status

    @property
    def nursery(self) -> trio.Nursery | None:
        """Where the gateway runs what outlives one request (parked calls, probes)."""
        return self._nursery

    def check_alive(self, link: Link) -> None:
        if self._nursery is not None:
            link.check_alive(self._nursery)

    @contextlib.asynccontextmanager
    async def running(self, plugin: UpstreamPlugin) -> AsyncIterator[None]:
        """One upstream plugin's lifespan. The first one to enter starts every attached
        upstream (concurrently) and the gateway's nursery; each waits for its own first
        attempt, bounded by its connect timeout."""
        if self._nursery is None:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                for p in self.plugins.values():
                    if p.app is not None:
                        nursery.start_soon(p.link.run)
                try:
                    await _first_attempt(plugin)
                    yield
                finally:  # the sessions close with the nursery: stdio children are reaped there
                    nursery.cancel_scope.cancel()
                    self._nursery = None
        else:
            await _first_attempt(plugin)
            yield


async def _first_attempt(plugin: UpstreamPlugin) -> None:
    with trio.move_on_after(plugin.settings.connect_timeout * 2 + 5):
        await plugin.link.first_attempt.wait()
