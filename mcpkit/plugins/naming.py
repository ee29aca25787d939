"""Serving a plugin's items under other names: ``prefix`` and ``rename`` in ``[plugins.NAME]``.

Two plugins that both offer ``search`` can be served together when one of them is renamed::

    [plugins.docs]
    prefix = "docs"                       # every tool and prompt: search -> docs_search
    rename = { search = "find_docs" }     # one name (wins over prefix); resources by URI

These two keys belong to mcpkit: they are taken out of the table before the plugin sees it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from ..server.prompts import CompletionDef, PromptDef
from ..server.resources import ResourceDef
from ..server.tools import ToolDef

#: keys of ``[plugins.NAME]`` that mcpkit reads itself
RESERVED = ("prefix", "rename")


@dataclass
class Naming:
    prefix: str = ""
    rename: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_table(cls, plugin: str, table: dict[str, Any]) -> "Naming":
        prefix = table.get("prefix", "")
        rename = table.get("rename", {})
        if not isinstance(prefix, str):
            raise ValueError(f"[plugins.{plugin}] prefix must be a string, got {prefix!r}")
        if not isinstance(rename, dict) or not all(isinstance(k, str) and isinstance(v, str) and v
                                                   for k, v in rename.items()):
            raise ValueError(f"[plugins.{plugin}] rename must be a table of old = \"new\" names, got {rename!r}")
        return cls(prefix, dict(rename))

    def __bool__(self) -> bool:
        return bool(self.prefix or self.rename)

    def name(self, original: str) -> str:
        """A tool's or prompt's served name."""
        if original in self.rename:
            return self.rename[original]
        if not self.prefix:
            return original
        joiner = "" if self.prefix[-1] in "_-./" else "_"
        return f"{self.prefix}{joiner}{original}"

    def apply(self, item: Any) -> Any:
        """The item as it is to be served: a renamed copy, or the item itself."""
        if not self:
            return item
        if isinstance(item, (ToolDef, PromptDef)):
            new = self.name(item.name)
            if new == item.name:
                return item
            out = copy.copy(item)
            out.name = new
            return out
        if isinstance(item, ResourceDef):
            uri = self.rename.get(item.uri)
            if uri is None or uri == item.uri:
                return item
            return ResourceDef(item.fn, uri, name=item.name, title=item.title, description=item.description,
                               mime_type=item.mime_type, size=item.size, listed=item.listed,
                               scopes=item.scopes)
        if isinstance(item, CompletionDef) and item.ref is not None:
            ref = self.name(item.ref) if item.ref_type == "ref/prompt" else self.rename.get(item.ref, item.ref)
            if ref == item.ref:
                return item
            out = copy.copy(item)
            out.ref = ref
            return out
        return item

    def unused(self, served: set[str]) -> list[str]:
        """``rename`` entries naming nothing the plugin offers (a typo, most likely)."""
        return sorted(old for old in self.rename if old not in served)


def resolution_hint(kind: str, name: str, plugin: str) -> str:
    """How to serve both plugins: the setting that resolves a name conflict."""
    if kind == "resource":
        return (f'to serve both, give one another URI in the config file: [plugins.{plugin}] '
                f'rename = {{ "{name}" = "NEW-URI" }}, or leave one out with --disable {plugin}')
    return (f'to serve both, rename one in the config file: [plugins.{plugin}] prefix = "{plugin}" '
            f'(serves {plugin}_{name}) or rename = {{ {name} = "NEW-NAME" }}, or leave one out '
            f'with --disable {plugin}')
