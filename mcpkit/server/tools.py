"""Tool definitions: the ``@mcpkit.tool`` decorator, schemas, argument checks, result shaping."""

from __future__ import annotations

import base64
import dataclasses
import inspect
import typing
from typing import Any, Callable, Iterable, Literal, Mapping

import msgspec
import msgspec.structs

from ..protocol import http_rules

from ..protocol.types import CONTENT_TYPES, EmbeddedResource, TextContent
from .schema import checked_schema, explain, inline_schema, is_object_schema, is_injected_annotation, param_struct, unwrap_optional, untyped_parameters


TaskSupport = Literal["optional", "required", None]


@dataclasses.dataclass
class ToolResult:
    """What a tool may return for full control over the result."""

    content: list[Any] = dataclasses.field(default_factory=list)
    structured: Any = msgspec.UNSET
    is_error: bool = False
    meta: dict[str, Any] | None = None
    #: a whole CallToolResult, answered as it is (a gateway forwarding an upstream's result);
    #: the fields above are then ignored
    raw: dict[str, Any] | None = None


class ToolDef:
    """A tool as the registry keeps it. Calling it calls the wrapped function."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        annotations: Mapping[str, Any] | None = None,
        timeout: float | None = None,
        input_schema: dict[str, Any] | None = None,
        meta: dict[str, Any] | None = None,
        max_threads: int | None = None,
        scopes: Iterable[str] | None = None,
        task: TaskSupport = None,
    ) -> None:
        from .auth import normalize_scopes

        self.fn = fn
        self.name = name or fn.__name__
        self.title = title
        self.description = description if description is not None else (inspect.getdoc(fn) or "")
        self.annotations = dict(annotations) if annotations else None
        self.timeout = timeout
        self.meta = meta
        if max_threads is not None and (isinstance(max_threads, bool) or not isinstance(max_threads, int) or max_threads < 1):
            raise ValueError(f"tool {self.name}: max_threads must be a positive integer")
        self.max_threads = max_threads
        #: OAuth scopes a caller needs to see and call this tool (authorized HTTP only)
        self.scopes = normalize_scopes(scopes, f"tool {self.name}")
        if task not in (None, "optional", "required"):
            raise ValueError(f"tool {self.name}: task must be 'optional', 'required' or None, not {task!r}")
        #: may this tool answer with a task (the tasks extension)? "required": only as one
        self.task = task
        self.is_async = inspect.iscoroutinefunction(fn)
        self.args_type, self.context_param, _ = param_struct(fn, _camel(self.name), is_injected_annotation)
        schema = checked_schema(self.args_type, f"tool {self.name!r}")
        self.input_schema = input_schema if input_schema is not None else schema
        #: parameters without a type hint (reported when the plugin loads)
        self.untyped = untyped_parameters(fn, self.context_param)
        self.input_schema.setdefault("type", "object")
        self.input_schema.setdefault("properties", {})
        self._fields = self.args_type.__struct_fields__
        self.output_schema, self._wrap_output = _output_schema(fn)
        #: arguments the Streamable HTTP binding mirrors into ``Mcp-Param-*`` headers
        self.header_params = http_rules.header_params(self.input_schema)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<mcpkit tool {self.name!r}>"

    def parse_arguments(self, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
        """Validate the client's arguments; raise ValueError naming the field and rule."""
        try:
            args = msgspec.convert(arguments or {}, self.args_type, str_keys=True)
        except msgspec.ValidationError as exc:
            raise ValueError(explain(exc)) from None
        return msgspec.structs.asdict(args)

    def describe(self, *, titles: bool, annotations: bool, structured: bool) -> dict[str, Any]:
        """The tools/list entry, shaped for the revision's feature set."""
        out: dict[str, Any] = {"name": self.name}
        if titles and self.title:
            out["title"] = self.title
        out["description"] = self.description
        out["inputSchema"] = self.input_schema
        if structured and self.output_schema is not None:
            out["outputSchema"] = self.output_schema
        if annotations and self.annotations:
            out["annotations"] = self.annotations
        if titles and self.meta:
            out["_meta"] = self.meta
        return out

    def to_result(self, value: Any) -> ToolResult:
        """Convert what the function returned into content (and structured content)."""
        if isinstance(value, ToolResult):
            return value
        if self.output_schema is not None and not _is_content(value):
            structured = msgspec.to_builtins(value)
            if self._wrap_output:
                structured = {"result": structured}
            text = msgspec.json.encode(structured).decode()
            return ToolResult([TextContent(text=text)], structured)
        return ToolResult(to_content(value))


def to_content(value: Any) -> list[Any]:
    """Turn a return value into a list of content blocks."""
    if value is None:
        return []
    if isinstance(value, str):
        return [TextContent(text=value)]
    if isinstance(value, CONTENT_TYPES):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, CONTENT_TYPES + (str,)) for v in value):
        return [TextContent(text=v) if isinstance(v, str) else v for v in value]
    if isinstance(value, bytes):
        return [EmbeddedResource(resource=_blob(value))]
    return [TextContent(text=msgspec.json.encode(msgspec.to_builtins(value)).decode())]


def _blob(data: bytes) -> Any:
    from ..protocol.types import BlobResourceContents

    return BlobResourceContents(uri="data:application/octet-stream", blob=base64.b64encode(data).decode())


def _is_content(value: Any) -> bool:
    return isinstance(value, CONTENT_TYPES) or (
        isinstance(value, list) and bool(value) and all(isinstance(v, CONTENT_TYPES) for v in value)
    )


_PLAIN = (str, type(None), Any, bytes)


def _output_schema(fn: Callable[..., Any]) -> tuple[dict[str, Any] | None, bool]:
    """outputSchema from the return annotation; the bool says whether values get wrapped."""
    hints = typing.get_type_hints(fn, include_extras=True)
    ret = hints.get("return", inspect.Signature.empty)
    if ret is inspect.Signature.empty or ret in _PLAIN or ret is ToolResult:
        return None, False
    for member in unwrap_optional(ret):
        if member in CONTENT_TYPES or member is ToolResult:
            return None, False
        origin = typing.get_origin(member)
        if origin in (list, tuple) and any(a in CONTENT_TYPES for a in _flat_args(member)):
            return None, False
    try:
        schema = inline_schema(ret)
    except (TypeError, ValueError):
        return None, False  # not a type msgspec can describe: plain text output
    if is_object_schema(schema) and type(None) not in unwrap_optional(ret):
        return schema, False
    defs = schema.pop("$defs", None)
    wrapped: dict[str, Any] = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    if defs:
        wrapped["$defs"] = defs
    return wrapped, True


def _flat_args(tp: Any) -> list[Any]:
    out: list[Any] = []
    for arg in typing.get_args(tp):
        out.extend(unwrap_optional(arg))
    return out


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.replace("-", "_").replace(".", "_").split("_"))


def tool(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    title: str | None = None,
    description: str | None = None,
    annotations: Mapping[str, Any] | None = None,
    timeout: float | None = None,
    input_schema: dict[str, Any] | None = None,
    meta: dict[str, Any] | None = None,
    max_threads: int | None = None,
    scopes: Iterable[str] | None = None,
    task: TaskSupport = None,
) -> Any:
    """Declare a function (``async def`` or plain ``def``) as an MCP tool.

    Usable bare (``@mcpkit.tool``) or with options (``@mcpkit.tool(timeout=5)``). The input schema
    comes from the signature, the output schema from the return annotation, the description from
    the docstring. ``input_schema`` replaces the generated schema verbatim (arguments are then
    passed through as given, still checked against the signature). ``max_threads`` caps the
    worker threads a plain ``def`` tool may hold at once (default: the ``max_threads_per_tool``
    setting); calls beyond it wait for a slot within their timeout. ``scopes`` are the OAuth
    scopes a caller needs (on an authorized HTTP server): callers without them do not see the
    tool, and calling it anyway is answered with a 403 step-up challenge. ``task="optional"`` lets
    the tool answer with a task (the ``io.modelcontextprotocol/tasks`` extension) when it runs
    long and the client declared the extension; ``task="required"`` only ever runs it as a
    task (clients of the stateless era without the extension get -32021). See docs/tasks.md.
    """

    def wrap(f: Callable[..., Any]) -> ToolDef:
        return ToolDef(
            f, name=name, title=title, description=description, annotations=annotations,
            timeout=timeout, input_schema=input_schema, meta=meta, max_threads=max_threads, scopes=scopes,
            task=task,
        )

    return wrap(fn) if fn is not None else wrap
