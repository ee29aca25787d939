"""Everything the plugins offer, in a stable order, with who offered it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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
