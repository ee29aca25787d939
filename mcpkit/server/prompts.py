"""Prompts (``@mcpkit.prompt``) and argument completions (``@mcpkit.completion``)."""

from __future__ import annotations

import inspect
from typing import Any, Callable, Iterable

import msgspec

from ..protocol.types import CONTENT_TYPES, PromptMessage, TextContent
from .schema import checked_schema, is_injected_annotation, param_struct


class PromptDef:
    """A prompt as the registry keeps it (what ``@mcpkit.prompt`` makes)."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        scopes: Iterable[str] | None = None,
    ) -> None:
        from .auth import normalize_scopes

        self.fn = fn
        self.name = name or fn.__name__
        self.title = title
        self.description = description if description is not None else (inspect.getdoc(fn) or "")
        self.scopes = normalize_scopes(scopes, f"prompt {self.name}")
        self.is_async = inspect.iscoroutinefunction(fn)
        self.args_type, self.context_param, descs = param_struct(fn, "Prompt", is_injected_annotation)
        checked_schema(self.args_type, f"prompt {self.name!r}")
        required = set(_required(self.args_type))
        self.arguments = [
            {k: v for k, v in (("name", f), ("description", descs.get(f)), ("required", f in required)) if v is not None}
            for f in self.args_type.__struct_fields__
        ]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def describe(self, *, titles: bool) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        if titles and self.title:
            out["title"] = self.title
        if self.description:
            out["description"] = self.description
        if self.arguments:
            out["arguments"] = self.arguments
        return out

    def parse_arguments(self, arguments: dict[str, str] | None) -> dict[str, Any]:
        from .schema import explain

        try:
            args = msgspec.convert(arguments or {}, self.args_type, str_keys=True, strict=False)
        except msgspec.ValidationError as exc:
            raise ValueError(explain(exc)) from None
        return {f: getattr(args, f) for f in self.args_type.__struct_fields__}

    @staticmethod
    def to_messages(value: Any) -> tuple[list[PromptMessage], str | None]:
        """Accept str, a content block, a PromptMessage, or a list of these, or a dict with
        ``messages`` (and optional ``description``)."""
        description = None
        if isinstance(value, dict):
            description = value.get("description")
            value = value.get("messages", [])
        items = value if isinstance(value, (list, tuple)) else [value]
        out: list[PromptMessage] = []
        for item in items:
            if isinstance(item, PromptMessage):
                out.append(item)
            elif isinstance(item, str):
                out.append(PromptMessage(role="user", content=TextContent(text=item)))
            elif isinstance(item, CONTENT_TYPES):
                out.append(PromptMessage(role="user", content=item))
            else:
                out.append(msgspec.convert(item, PromptMessage))
        return out, description


def _required(struct: type[msgspec.Struct]) -> Iterable[str]:
    fields = struct.__struct_fields__
    n_defaults = len(struct.__struct_defaults__)
    return fields[: len(fields) - n_defaults] if n_defaults else fields


def prompt(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    scopes: Iterable[str] | None = None,
) -> Any:
    """Declare a prompt; its parameters (strings) are the prompt's arguments. ``scopes``: the
    OAuth scopes a caller needs to see and get it (authorized HTTP only)."""

    def wrap(f: Callable[..., Any]) -> PromptDef:
        return PromptDef(f, name=name, title=title, description=description, scopes=scopes)

    return wrap(fn) if fn is not None else wrap


class CompletionDef:
    """Completes one argument of a prompt (``prompt=``) or resource template (``resource=``)."""

    def __init__(self, fn: Callable[..., Any], *, prompt: str | None, resource: str | None, argument: str | None) -> None:
        if (prompt is None) == (resource is None):
            raise TypeError("completion() takes exactly one of prompt= or resource=")
        self.fn = fn
        self.ref_type = "ref/prompt" if prompt is not None else "ref/resource"
        self.ref = prompt if prompt is not None else resource
        self.argument = argument
        self.is_async = inspect.iscoroutinefunction(fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def matches(self, ref_type: str, ref: str, argument: str) -> bool:
        return self.ref_type == ref_type and self.ref == ref and self.argument in (None, argument)


def completion(*, prompt: str | None = None, resource: str | None = None, argument: str | None = None) -> Callable[[Callable[..., Any]], CompletionDef]:
    """Declare a completion function ``(argument, value, context) -> list[str]``."""

    def wrap(fn: Callable[..., Any]) -> CompletionDef:
        return CompletionDef(fn, prompt=prompt, resource=resource, argument=argument)

    return wrap
