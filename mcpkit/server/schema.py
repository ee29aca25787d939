"""JSON Schemas from type hints, and argument validation, all through msgspec."""

from __future__ import annotations

import inspect
import re
import types
import typing
from typing import Any, Callable

import msgspec

from .errors import DefinitionError


class Injected:
    """Base of the parameter types the server fills in itself (the request's ``Context``):
    a parameter annotated with one is not an argument, so it stays out of the schema."""


def is_injected_annotation(ann: Any) -> bool:
    """True for an :class:`Injected` type and for ``T | None`` of one."""
    if isinstance(ann, type) and issubclass(ann, Injected):
        return True
    return typing.get_origin(ann) is not None and any(
        isinstance(a, type) and issubclass(a, Injected) for a in typing.get_args(ann))


def inline_schema(tp: Any) -> dict[str, Any]:
    """JSON Schema of ``tp`` with the top definition inlined and the others under ``$defs``."""
    (top,), defs = msgspec.json.schema_components([tp], ref_template="#/$defs/{name}")
    ref = top.get("$ref")
    if ref is not None and ref.startswith("#/$defs/"):
        name = ref.rsplit("/", 1)[1]
        top = dict(defs.pop(name))
        if _refers_to(top, defs, ref):  # recursive type: keep the definition
            defs[name] = dict(top)
    top.pop("title", None)
    if top.get("required") == []:
        del top["required"]
    if defs:
        top["$defs"] = defs
    return top


def _refers_to(schema: Any, defs: dict[str, Any], ref: str) -> bool:
    text = msgspec.json.encode([schema, defs])
    return f'"{ref}"'.encode() in text


def is_object_schema(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "object"


def param_struct(
    fn: Callable[..., Any], name: str, skip: Callable[[Any], bool]
) -> tuple[type[msgspec.Struct], str | None, dict[str, str]]:
    """Build a Struct type holding ``fn``'s parameters.

    Returns the type, the name of the parameter ``skip`` picked out (the context), and a map of
    parameter descriptions found in ``Annotated`` metadata.
    """
    hints = typing.get_type_hints(fn, include_extras=True)
    fields: list[tuple[Any, ...]] = []
    picked: str | None = None
    described: dict[str, str] = {}
    for pname, param in inspect.signature(fn).parameters.items():
        ann = hints.get(pname, Any)
        if skip(ann):
            picked = pname
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise DefinitionError(f"{fn.__qualname__}: parameter {pname!r} must be a normal or keyword parameter "
                                  f"(no *args, **kwargs or positional-only parameters)")
        desc = _description(ann)
        if desc:
            described[pname] = desc
        if param.default is param.empty:
            fields.append((pname, ann))
        else:
            fields.append((pname, ann, param.default))
    struct = msgspec.defstruct(f"{name}Arguments", fields, kw_only=True)
    return struct, picked, described


def checked_schema(struct: type[msgspec.Struct], what: str) -> dict[str, Any]:
    """``inline_schema`` of a parameter struct; a type msgspec cannot handle raises
    DefinitionError naming ``what`` (``tool 'x'``) and the parameter."""
    try:
        return inline_schema(struct)
    except (TypeError, ValueError) as exc:
        hints = dict(zip(struct.__struct_fields__, typing.get_type_hints(struct, include_extras=True).values()))
        for pname, ann in hints.items():
            try:
                msgspec.json.schema(ann)
            except (TypeError, ValueError) as inner:
                reason = str(inner).strip().splitlines()[-1]
                raise DefinitionError(
                    f"{what}: parameter {pname!r}: type hint {_type_name(ann)} is not supported ({reason}); "
                    f"use str, int, float, bool, list, dict, Literal, an enum, or a msgspec Struct, "
                    f"dataclass or TypedDict") from None
        raise DefinitionError(f"{what}: {exc}") from None


def untyped_parameters(fn: Callable[..., Any], skip: str | None) -> list[str]:
    """Parameters declared without a type hint (they accept any JSON value)."""
    return [name for name, p in inspect.signature(fn).parameters.items()
            if p.annotation is p.empty and name != skip]


def _type_name(ann: Any) -> str:
    return getattr(ann, "__qualname__", None) or repr(ann)


def _description(ann: Any) -> str | None:
    if typing.get_origin(ann) is typing.Annotated:
        for extra in typing.get_args(ann)[1:]:
            if isinstance(extra, msgspec.Meta) and extra.description:
                return extra.description
    return None


def unwrap_optional(ann: Any) -> tuple[Any, ...]:
    """The members of a union annotation (or the annotation itself)."""
    origin = typing.get_origin(ann)
    if origin is typing.Union or origin is types.UnionType:
        return typing.get_args(ann)
    return (ann,)


_AT = re.compile(r"^(?P<msg>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.S)
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]+)`")


def explain(exc: msgspec.ValidationError) -> str:
    """Turn msgspec's message into one that names the argument and the rule it broke."""
    match = _AT.match(str(exc))
    assert match is not None
    msg, path = match["msg"], match["path"] or ""
    field = path.lstrip(".")
    missing = _MISSING.fullmatch(msg)
    if missing:
        name = (field + "." if field else "") + missing["field"]
        return f"missing required argument `{name}`"
    if not field:
        return msg[0].lower() + msg[1:] if msg else "invalid arguments"
    return f"argument `{field}`: {msg[0].lower() + msg[1:]}"
