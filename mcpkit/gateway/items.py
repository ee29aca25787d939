"""An upstream's tools, prompts, resources and completions as registry items of ours.

Each item keeps the upstream's definition as it was listed (schemas, annotations, ``_meta``,
icons: untouched) and serves it under the name the operator's ``prefix`` / ``rename`` give it.
Calling it forwards to the upstream under the original name; arguments go as they came (the
upstream validates them) and results come back as the upstream gave them, shaped only where
the downstream client's revision cannot carry something.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import msgspec

from ..protocol import http_rules
from ..server.auth import normalize_scopes
from ..server.context import Context
from ..server.prompts import CompletionDef, PromptDef
from ..server.resources import ResourceDef, _compile
from ..server.tools import ToolDef, ToolResult

#: forward(upstream method, params, ctx) -> the upstream's result
Forward = Callable[[str, dict[str, Any], "Context | None"], Awaitable[dict[str, Any]]]


class _NoArguments(msgspec.Struct):
    pass


class RawPromptMessage(msgspec.Struct, omit_defaults=True):
    """An upstream's prompt message, carried as it came."""

    role: Any
    content: Any
    meta: Any = msgspec.field(default=msgspec.UNSET, name="_meta")


def _typed(definition: dict[str, Any], key: str, kind: type, default: Any = None) -> Any:
    value = definition.get(key)
    return value if isinstance(value, kind) else default


class ForwardedTool(ToolDef):
    """A tool served by an upstream. Arguments pass through unvalidated (the upstream checks
    them); the upstream's CallToolResult is answered as it is (``ToolResult.raw``)."""

    def __init__(self, definition: dict[str, Any], call: Callable[[dict[str, Any], Context], Awaitable[ToolResult]], *,
                 scopes: list[str], timeout: float | None, task: str | None) -> None:
        # no signature to read: everything comes from the upstream's definition
        self.definition, self.fn = definition, call
        self.upstream_name = self.name = str(definition["name"])
        self.title, self.description = _typed(definition, "title", str), _typed(definition, "description", str, "")
        self.annotations, self.meta = _typed(definition, "annotations", dict), _typed(definition, "_meta", dict)
        schema = definition.get("inputSchema")
        self.input_schema = schema if isinstance(schema, dict) else {"type": "object", "properties": {}}
        self.header_params = http_rules.header_params(self.input_schema)
        out = definition.get("outputSchema")
        self.output_schema = out if isinstance(out, dict) else None
        self.timeout = timeout
        self.max_threads = None
        self.scopes = normalize_scopes(scopes, f"tool {self.name}")
        self.task = task  # type: ignore[assignment]
        self.is_async = True
        self.args_type = _NoArguments
        self.context_param = "ctx"
        self.untyped = []
        self._fields = ()
        self._wrap_output = False

    def __repr__(self) -> str:
        return f"<mcpkit forwarded tool {self.name!r}>"

    def parse_arguments(self, arguments: Any) -> dict[str, Any]:
        return {"arguments": arguments if isinstance(arguments, dict) else {}}

    def describe(self, *, titles: bool, annotations: bool, structured: bool) -> dict[str, Any]:
        out = dict(self.definition)
        out["name"] = self.name
        out.setdefault("description", "")
        out["inputSchema"] = self.input_schema
        if not titles:
            for key in ("title", "_meta", "icons"):
                out.pop(key, None)
        if not structured:
            out.pop("outputSchema", None)
        if not annotations:
            out.pop("annotations", None)
        return out

    def to_result(self, value: Any) -> ToolResult:
        return value if isinstance(value, ToolResult) else ToolResult(raw=value)


class ForwardedPrompt(PromptDef):
    """A prompt served by an upstream; its arguments and messages pass through."""

    def __init__(self, definition: dict[str, Any], get: Callable[..., Awaitable[Any]], *, scopes: list[str]) -> None:
        self.definition, self.fn = definition, get
        self.upstream_name = self.name = str(definition["name"])
        self.title, self.description = _typed(definition, "title", str), _typed(definition, "description", str, "")
        self.scopes = normalize_scopes(scopes, f"prompt {self.name}")
        self.is_async = True
        self.context_param = "ctx"
        args = definition.get("arguments")
        self.arguments = [a for a in args if isinstance(a, dict)] if isinstance(args, list) else []

    def describe(self, *, titles: bool) -> dict[str, Any]:
        out = dict(self.definition)
        out["name"] = self.name
        if not titles:
            for key in ("title", "_meta", "icons"):
                out.pop(key, None)
        return out

    def parse_arguments(self, arguments: Any) -> dict[str, Any]:
        return {"arguments": arguments if isinstance(arguments, dict) else {}}

    def to_messages(self, value: Any) -> tuple[list[Any], str | None]:  # type: ignore[override]
        messages = value.get("messages") if isinstance(value, dict) else None
        out = [RawPromptMessage(m.get("role"), m.get("content"), m.get("_meta", msgspec.UNSET))
               for m in messages or [] if isinstance(m, dict)]
        description = value.get("description") if isinstance(value, dict) else None
        return out, description if isinstance(description, str) else None


class ForwardedResource(ResourceDef):
    """A resource or resource template served by an upstream; reading it forwards the URI."""

    def __init__(self, definition: dict[str, Any], uri: str, read: Callable[..., Awaitable[Any]], *,
                 template: bool, scopes: list[str]) -> None:
        self.definition = definition
        self.upstream_uri = str(definition["uriTemplate" if template else "uri"])
        self.uri = uri
        self.fn = read
        self.name = str(definition.get("name") or self.upstream_uri)
        self.title, self.description = _typed(definition, "title", str), _typed(definition, "description", str)
        self.mime_type = _typed(definition, "mimeType", str)
        size = definition.get("size")
        self.size = size if isinstance(size, int) and not isinstance(size, bool) else None
        self.listed = True
        self.scopes = normalize_scopes(scopes, f"resource {uri}")
        self.is_async = True
        self.is_template = template
        self.variables = []
        self._pattern = _compile(uri) if template else None

    def __repr__(self) -> str:
        return f"<mcpkit forwarded resource {self.uri!r}>"

    def match(self, uri: str) -> dict[str, str] | None:
        """A template's reader gets the URI itself (the upstream expands its own template);
        a fixed resource's reader knows its URI."""
        if self._pattern is None:
            return {} if uri == self.uri else None
        return {"uri": uri} if self._pattern.fullmatch(uri) else None

    def describe(self, *, titles: bool) -> dict[str, Any]:
        out = dict(self.definition)
        out["uriTemplate" if self.is_template else "uri"] = self.uri
        if not titles:
            for key in ("title", "_meta", "icons"):
                out.pop(key, None)
        return out

    def to_contents(self, uri: str, value: Any) -> list[Any]:
        return list(value)


def forwarded_completion(ref_type: str, ref: str, complete: Callable[..., Awaitable[list[str]]]) -> CompletionDef:
    """Completions of every argument of one upstream prompt or resource template."""
    prompt, resource = (ref, None) if ref_type == "ref/prompt" else (None, ref)
    item = CompletionDef(complete, prompt=prompt, resource=resource, argument=None)
    item.upstream_ref = ref  # type: ignore[attr-defined]
    return item
