"""Everything the plugins offer, in a stable order, with who offered it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable

import trio

from ..protocol.jsonrpc import ProtocolError

from .prompts import CompletionDef, PromptDef
from .resources import ResourceDef
from .tools import ToolDef


class DuplicateName(Exception):
    """Two plugins (or one plugin twice) offer the same tool, prompt or resource."""

    def __init__(self, kind: str, name: str, first: str, second: str) -> None:
        if first == second:
            text = f"plugin {first!r} offers {kind} {name!r} twice"
        else:
            text = f"{kind} {name!r} is offered by both plugin {first!r} and plugin {second!r}"
        super().__init__(text)
        self.kind, self.name, self.first, self.second = kind, name, first, second


#: an item kind -> the name of its group in listings ("tool" -> "tools")
KIND_GROUPS = {"tool": "tools", "resource": "resources", "prompt": "prompts"}


@dataclass
class Registry:
    tools: dict[str, ToolDef] = field(default_factory=dict)
    prompts: dict[str, PromptDef] = field(default_factory=dict)
    resources: list[ResourceDef] = field(default_factory=list)
    templates: list[ResourceDef] = field(default_factory=list)
    completions: list[CompletionDef] = field(default_factory=list)
    owner: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, name) -> plugin

    def _claim(self, kind: str, name: str, plugin: str) -> None:
        other = self.owner.get((kind, name))
        if other is not None:
            raise DuplicateName(kind, name, other, plugin)
        self.owner[(kind, name)] = plugin

    def add(self, item: Any, plugin: str) -> None:
        if isinstance(item, ToolDef):
            self._claim("tool", item.name, plugin)
            self.tools[item.name] = item
        elif isinstance(item, PromptDef):
            self._claim("prompt", item.name, plugin)
            self.prompts[item.name] = item
        elif isinstance(item, ResourceDef):
            self._claim("resource", item.uri, plugin)
            (self.templates if item.is_template else self.resources).append(item)
        elif isinstance(item, CompletionDef):
            self.completions.append(item)
        else:
            raise TypeError(f"plugin {plugin!r} returned {item!r}, which is not a tool, resource, prompt or completion")

    def remove_tool(self, name: str) -> None:
        self.tools.pop(name, None)
        self.owner.pop(("tool", name), None)

    def find_resource(self, uri: str) -> tuple[ResourceDef, dict[str, str]] | None:
        for res in self.resources:
            if res.uri == uri:
                return res, {}
        for tpl in self.templates:
            found = tpl.match(uri)
            if found is not None:
                return tpl, found
        return None

    def items_of(self, plugin: str) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {group: [] for group in KIND_GROUPS.values()}
        for (kind, name), owner in self.owner.items():
            if owner == plugin:
                out[KIND_GROUPS[kind]].append(name)
        return out


class ChangeHub:
    """Fans change events (list_changed, resource updated, task status) out to every listener.

    With shared state, events raised here also go to the other processes (``remote=False``),
    and theirs arrive here with ``remote=True``: listeners that act for every session of the
    deployment (``local_only``) see only this process's own events.
    """

    def __init__(self) -> None:
        self._listeners: set[trio.MemorySendChannel[tuple[str, Any]]] = set()
        self._local_only: set[trio.MemorySendChannel[tuple[str, Any]]] = set()
        #: with shared state: what :meth:`announce` waits for (the other processes told, the
        #: sessions' streams in Redis written), in place of the ``local_only`` listeners
        self.sinks: list[Callable[[str, Any], Awaitable[None]]] = []
        self.closed = False

    async def announce(self, event: str, arg: Any) -> None:
        """Publish a change raised by a request and wait until the sinks have it, so it is
        out before the request is answered. A sink that fails (shared state away) loses this
        hint; the link logs the outage."""
        self.publish(event, arg, announced=bool(self.sinks))
        for sink in self.sinks:
            try:
                await sink(event, arg)
            except ProtocolError:
                pass

    def publish(self, event: str, arg: Any, *, remote: bool = False, announced: bool = False) -> None:
        for chan in list(self._listeners):
            if (remote or announced) and chan in self._local_only:
                continue
            try:
                chan.send_nowait((event, arg))
            except trio.WouldBlock:
                pass  # a listener that stopped reading loses change hints, never blocks the server
            except trio.BrokenResourceError:
                self._listeners.discard(chan)

    def listen(self, *, local_only: bool = False) -> "_Listening":
        return _Listening(self, local_only)

    def close(self) -> None:
        """End every listener, including any that starts listening later (shutdown)."""
        self.closed = True
        for chan in list(self._listeners):
            chan.close()
        self._listeners.clear()


class _Listening:
    def __init__(self, hub: ChangeHub, local_only: bool = False) -> None:
        self._hub = hub
        self._local_only = local_only
        self._send, self.receive = trio.open_memory_channel[tuple[str, Any]](64)

    def __enter__(self) -> trio.MemoryReceiveChannel[tuple[str, Any]]:
        if self._hub.closed:
            self._send.close()  # shutting down: the listener ends at once
        else:
            self._hub._listeners.add(self._send)
            if self._local_only:
                self._hub._local_only.add(self._send)
        return self.receive

    def __exit__(self, *exc: object) -> None:
        self._hub._listeners.discard(self._send)
        self._hub._local_only.discard(self._send)
        self._send.close()
