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

_NAME_KEY = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
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
    if any(ord(c) < 0x20 and c != "\t" or ord(c) > 0x7E for c in value):
        raise mismatch(f"{header} contains characters not allowed in a header value")
    return value


def check_standard_headers(headers: Mapping[str, str], method: str, params: Mapping[str, Any]) -> None:
    """``Mcp-Method`` must equal the body's method; ``Mcp-Name`` its name or uri where required.

    ``headers`` has lower-case names.
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
    body_value = params.get(key)
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
