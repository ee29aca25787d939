"""Check tool arguments against a tool's JSON Schema before they are sent.

A deliberately small validator: the keywords MCP tool schemas use in practice (type, required,
properties, additionalProperties, items, enum, const, numeric and length bounds, pattern,
anyOf/oneOf, local ``$ref``). Anything it does not understand it lets through: the server has the
last word, this only catches mistakes early with an error that names the field.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from .errors import InvalidArguments

_TYPES: dict[str, Any] = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def check_arguments(schema: Mapping[str, Any] | None, arguments: Mapping[str, Any]) -> None:
    """Raise InvalidArguments naming the first field that breaks ``schema``."""
    if not isinstance(schema, Mapping):
        return
    problem = _check(schema, dict(arguments), "", schema, 0)
    if problem is not None:
        field, rule = problem
        where = f"argument {field!r}" if field else "arguments"
        raise InvalidArguments(f"{where}: {rule}", field or None)


def _check(schema: Any, value: Any, path: str, root: Mapping[str, Any], depth: int) -> tuple[str, str] | None:
    if not isinstance(schema, Mapping) or depth > 32:
        return None
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target = _resolve(root, ref)
        if target is not None:
            return _check(target, value, path, root, depth + 1)
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        known = [k for k in kinds if k in _TYPES]
        if known and not any(_TYPES[k](value) for k in known):
            return path, f"expected {' or '.join(known)}, got {_describe(value)}"
    if "const" in schema and value != schema["const"]:
        return path, f"must equal {schema['const']!r}"
    if isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        return path, f"must be one of {', '.join(repr(v) for v in schema['enum'])}"
    for key in ("anyOf", "oneOf"):
        options = schema.get(key)
        if isinstance(options, list) and options:
            if all(_check(o, value, path, root, depth + 1) for o in options):
                return path, f"does not match any of the allowed forms ({key})"
    for sub in schema.get("allOf") or []:
        problem = _check(sub, value, path, root, depth + 1)
        if problem:
            return problem
    return _bounds(schema, value, path) or _children(schema, value, path, root, depth)


def _bounds(schema: Mapping[str, Any], value: Any, path: str) -> tuple[str, str] | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        for key, ok, rule in (("minimum", lambda b: value >= b, "at least"),
                              ("maximum", lambda b: value <= b, "at most"),
                              ("exclusiveMinimum", lambda b: value > b, "greater than"),
                              ("exclusiveMaximum", lambda b: value < b, "less than")):
            bound = schema.get(key)
            if isinstance(bound, (int, float)) and not isinstance(bound, bool) and not ok(bound):
                return path, f"must be {rule} {bound}, got {value}"
    if isinstance(value, str):
        if isinstance(schema.get("minLength"), int) and len(value) < schema["minLength"]:
            return path, f"must be at least {schema['minLength']} characters long"
        if isinstance(schema.get("maxLength"), int) and len(value) > schema["maxLength"]:
            return path, f"must be at most {schema['maxLength']} characters long"
        pattern = schema.get("pattern")
        if isinstance(pattern, str):
            try:
                if re.search(pattern, value) is None:
                    return path, f"must match the pattern {pattern!r}"
            except re.error:
                pass
    if isinstance(value, list):
        if isinstance(schema.get("minItems"), int) and len(value) < schema["minItems"]:
            return path, f"needs at least {schema['minItems']} items"
        if isinstance(schema.get("maxItems"), int) and len(value) > schema["maxItems"]:
            return path, f"allows at most {schema['maxItems']} items"
    return None


def _children(schema: Mapping[str, Any], value: Any, path: str, root: Mapping[str, Any],
              depth: int) -> tuple[str, str] | None:
    if isinstance(value, dict):
        props = schema.get("properties") if isinstance(schema.get("properties"), Mapping) else {}
        for name in schema.get("required") or []:
            if name not in value:
                return _join(path, name), "is required"
        for name, item in value.items():
            if name in props:
                problem = _check(props[name], item, _join(path, name), root, depth + 1)
                if problem:
                    return problem
            elif schema.get("additionalProperties") is False:
                return _join(path, name), "is not an accepted argument"
            elif isinstance(schema.get("additionalProperties"), Mapping):
                problem = _check(schema["additionalProperties"], item, _join(path, name), root, depth + 1)
                if problem:
                    return problem
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for i, item in enumerate(value):
            problem = _check(schema["items"], item, f"{path}[{i}]", root, depth + 1)
            if problem:
                return problem
    return None


def _resolve(root: Mapping[str, Any], ref: str) -> Any:
    if not ref.startswith("#"):
        return None
    node: Any = root
    for part in ref[1:].split("/")[1:] if ref.startswith("#/") else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _describe(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string",
             list: "an array", dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)
