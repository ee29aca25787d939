"""Streamable HTTP header rules of the stateless era (2026-07-28), without any HTTP library.

The transport hands over the headers it received and the decoded request; these functions say
whether they agree, raising ProtocolError(-32020 HeaderMismatch) when they do not.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any, Mapping

from .jsonrpc import HEADER_MISMATCH, ProtocolError

_NAME_KEY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri",
             "tasks/get": "taskId", "tasks/update": "taskId", "tasks/cancel": "taskId"}
_SENTINEL = ("=?base64?", "?=")


def mismatch(message: str) -> ProtocolError:
    return ProtocolError(HEADER_MISMATCH, f"Header mismatch: {message}")


def decode_header_value(value: str, header: str) -> str:
    """Strip optional whitespace and undo the ``=?base64?...?=`` encoding."""
    value = value.strip(" \t")
    if value.startswith(_SENTINEL[0]) and value.endswith(_SENTINEL[1]) and len(value) >= 11:
        raw = value[len(_SENTINEL[0]) : -len(_SENTINEL[1])]
        try:
            return base64.b64decode(raw, validate=True).decode("utf-8")
        except (binascii.Error, ValueError, UnicodeDecodeError):
            raise mismatch(f"{header} carries invalid base64") from None
    if not (value.isascii() and value.isprintable()) and any(ord(c) < 0x20 and c != "\t" or ord(c) > 0x7E for c in value):
        raise mismatch(f"{header} contains characters not allowed in a header value")
    return value


def check_standard_headers(headers: Mapping[str, str], method: str, params: Any) -> None:
    """``Mcp-Method`` must equal the body's method; ``Mcp-Name`` its name or uri where required.

    ``headers`` has lower-case names; ``params`` are the decoded params (a typed struct, or a
    mapping).
    """
    got = headers.get("mcp-method")
    if got is None:
        raise mismatch("the Mcp-Method header is required")
    if got.strip(" \t") != method:
        raise mismatch(f"Mcp-Method header value {got.strip()!r} does not match body method {method!r}")
    key = _NAME_KEY.get(method)
    if key is None:
        return
    name = headers.get("mcp-name")
    if name is None:
        raise mismatch(f"the Mcp-Name header is required for {method}")
    body_value = params.get(key) if isinstance(params, dict) else getattr(params, key, None)
    if decode_header_value(name, "Mcp-Name") != body_value:
        raise mismatch(f"Mcp-Name header value does not match body {key} {body_value!r}")


def header_params(input_schema: Mapping[str, Any]) -> dict[str, str]:
    """Argument name -> header suffix for properties marked with ``x-mcp-header``."""
    out: dict[str, str] = {}
    for prop, schema in (input_schema.get("properties") or {}).items():
        if isinstance(schema, Mapping) and isinstance(schema.get("x-mcp-header"), str):
            out[prop] = schema["x-mcp-header"]
    return out


def check_param_headers(headers: Mapping[str, str], mirrored: Mapping[str, str], arguments: Mapping[str, Any] | None) -> None:
    """Each ``x-mcp-header`` argument present in the body needs an equal ``Mcp-Param-*`` header."""
    arguments = arguments or {}
    for prop, suffix in mirrored.items():
        header = f"mcp-param-{suffix.lower()}"
        value = arguments.get(prop)
        got = headers.get(header)
        if value is None:
            continue  # absent or null: the header is not expected
        if got is None:
            raise mismatch(f"the Mcp-Param-{suffix} header is required when {prop!r} is given")
        decoded = decode_header_value(got, f"Mcp-Param-{suffix}")
        if not _same(decoded, value):
            raise mismatch(f"Mcp-Param-{suffix} header value does not match argument {prop!r}")


def _same(header: str, value: Any) -> bool:
    if isinstance(value, bool):
        return header == ("true" if value else "false")
    if isinstance(value, (int, float)):
        try:
            return math.isclose(float(header), float(value), rel_tol=0, abs_tol=0)
        except ValueError:
            return False
    return isinstance(value, str) and header == value


# --- the client side: building the headers a stateless-era POST carries ---------------------

_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
_JS_SAFE = 2**53 - 1


def encode_header_value(value: str) -> str:
    """A header-safe form of ``value``: as is when plain visible ASCII, else the base64 sentinel."""
    plain = (
        value == value.strip(" \t")
        and all(0x20 <= ord(c) <= 0x7E for c in value)  # a tab is a control character: encode it
        and not (value.startswith(_SENTINEL[0]) and value.endswith(_SENTINEL[1]))
    )
    if plain:
        return value
    return _SENTINEL[0] + base64.b64encode(value.encode("utf-8")).decode("ascii") + _SENTINEL[1]


def mirrored_paths(input_schema: Mapping[str, Any]) -> dict[tuple[str, ...], str]:
    """Property path -> header suffix for every ``x-mcp-header`` in a tool's input schema.

    Raises ValueError naming the problem when an annotation breaks the spec's constraints (the
    client must then leave the tool out of its list).
    """
    found: dict[tuple[str, ...], str] = {}
    _walk(input_schema, (), found, reachable=True)
    seen: set[str] = set()
    for suffix in found.values():
        if suffix.lower() in seen:
            raise ValueError(f"x-mcp-header {suffix!r} is used twice (header names ignore case)")
        seen.add(suffix.lower())
    return found


def _walk(schema: Any, path: tuple[str, ...], found: dict[tuple[str, ...], str], reachable: bool) -> None:
    if isinstance(schema, list):
        for item in schema:
            _walk(item, path, found, reachable=False)
        return
    if not isinstance(schema, Mapping):
        return
    if "x-mcp-header" in schema:
        suffix = schema["x-mcp-header"]
        where = ".".join(path) or "the schema root"
        if not reachable or not path:
            raise ValueError(f"x-mcp-header at {where} is not reachable through properties alone")
        if not isinstance(suffix, str) or not suffix or any(c not in _TCHAR for c in suffix):
            raise ValueError(f"x-mcp-header {suffix!r} at {where} is not a valid header name token")
        kind = schema.get("type")
        if kind not in ("string", "integer", "boolean"):
            raise ValueError(f"x-mcp-header at {where} is on a {kind or 'untyped'} value; "
                             "only string, integer and boolean may be mirrored")
        found[path] = suffix
    for key, sub in schema.items():
        if key == "properties" and isinstance(sub, Mapping):
            for name, prop in sub.items():
                _walk(prop, path + (str(name),), found, reachable)
        elif key != "x-mcp-header" and isinstance(sub, (Mapping, list)):
            _walk(sub, path, found, reachable=False)


def request_headers(method: str, params: Mapping[str, Any] | None,
                    mirrored: Mapping[tuple[str, ...], str] | None = None) -> dict[str, str]:
    """``Mcp-Method``, ``Mcp-Name`` and ``Mcp-Param-*`` for one request body."""
    params = params or {}
    out = {"Mcp-Method": method}
    key = _NAME_KEY.get(method)
    if key is not None and isinstance(params.get(key), str):
        out["Mcp-Name"] = encode_header_value(params[key])
    arguments = params.get("arguments")
    for path, suffix in (mirrored or {}).items():
        value: Any = arguments
        for step in path:
            value = value.get(step) if isinstance(value, Mapping) else None
        text = _header_text(value)
        if text is not None:
            out[f"Mcp-Param-{suffix}"] = encode_header_value(text)
    return out


def _header_text(value: Any) -> str | None:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value) if abs(value) <= _JS_SAFE else None
    if isinstance(value, float) and value.is_integer() and abs(value) <= _JS_SAFE:
        return str(int(value))
    if isinstance(value, str):
        return value
    return None
