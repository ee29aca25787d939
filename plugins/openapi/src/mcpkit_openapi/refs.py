"""Local ``$ref`` resolution and schema compaction.

Refs are resolved lazily against the document they live in (``#/components/schemas/X``,
``#/definitions/X``, ``#/parameters/X`` ...). Cycles are guarded by the chain of refs being
expanded: a ref met again inside its own expansion becomes ``{"$ref": "X", "recursive": true}``.
Refs to other files or URLs are kept as a marker, never fetched.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

MAX_DEPTH = 4  # nesting levels of schema kept for get_operation
MAX_PROPERTIES = 40
MAX_ENUM = 25
MAX_TEXT = 240
_KEPT_SCALARS = (
    "type", "format", "nullable", "default", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems",
    "uniqueItems", "readOnly", "writeOnly", "deprecated", "const", "collectionFormat",
)


class RefError(Exception):
    """A local reference that points nowhere."""


def ref_name(ref: str) -> str:
    """``#/components/schemas/Issue`` -> ``Issue`` (the last pointer segment)."""
    return unquote(ref.rsplit("/", 1)[-1]).replace("~1", "/").replace("~0", "~")


def resolve_pointer(doc: Any, ref: str) -> Any:
    """Follow a local JSON pointer (``#/a/b~1c``) inside ``doc``."""
    if not ref.startswith("#"):
        raise RefError(f"not a local reference: {ref}")
    node = doc
    pointer = unquote(ref[1:])
    if not pointer:
        return doc
    for raw in pointer.lstrip("/").split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise RefError(f"unresolvable reference: {ref}")
    return node


class Resolver:
    """Resolves refs of one document; ``deref`` follows chains of refs (``A -> B -> obj``)."""

    def __init__(self, doc: Any) -> None:
        self.doc = doc

    def deref(self, node: Any, chain: tuple[str, ...] = ()) -> tuple[Any, tuple[str, ...]]:
        """Return (target, chain-including-followed-refs). Sibling keys of a ref are merged over
        the target (OpenAPI 3.1 allows ``description`` next to ``$ref``)."""
        hops = 0
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in chain or hops > 50:
                return {"$ref": ref_name(ref), "recursive": True}, chain
            if not ref.startswith("#"):
                return {"$ref": ref, "note": "external reference, not resolved"}, chain
            try:
                target = resolve_pointer(self.doc, ref)
            except RefError as exc:
                return {"$ref": ref, "note": str(exc)}, chain
            siblings = {k: v for k, v in node.items() if k != "$ref"}
            if siblings and isinstance(target, dict):
                target = {**target, **siblings}
            chain = chain + (ref,)
            node = target
            hops += 1
        return node, chain

    def obj(self, node: Any) -> Any:
        """Dereference one object (parameter, response, request body) without compaction."""
        return self.deref(node)[0]

    def compact_schema(self, node: Any, depth: int = 0, chain: tuple[str, ...] = ()) -> Any:
        """A resolved, size-bounded copy of a schema, fit for an LLM context window."""
        name = None
        if isinstance(node, dict) and isinstance(node.get("$ref"), str):
            name = ref_name(node["$ref"])
        node, chain = self.deref(node, chain)
        if not isinstance(node, dict):
            return node if isinstance(node, (bool, str)) else {}
        if "recursive" in node or "note" in node:
            return node
        if depth >= MAX_DEPTH:
            out: dict[str, Any] = {}
            if name:
                out["title"] = name
            if "type" in node:
                out["type"] = node["type"]
            out["truncated"] = True
            return out
        out = {}
        if name:
            out["title"] = name
        elif isinstance(node.get("title"), str):
            out["title"] = node["title"]
        for key in _KEPT_SCALARS:
            if key in node and (key == "type" or not isinstance(node[key], (dict, list))):
                out[key] = node[key]
        if isinstance(node.get("description"), str) and node["description"].strip():
            out["description"] = _short(node["description"])
        if isinstance(node.get("enum"), list):
            enum = node["enum"]
            out["enum"] = enum[:MAX_ENUM] + (["..."] if len(enum) > MAX_ENUM else [])
        if isinstance(node.get("required"), list):
            out["required"] = node["required"]
        props = node.get("properties")
        if isinstance(props, dict) and props:
            kept = list(props.items())[:MAX_PROPERTIES]
            out["properties"] = {k: self.compact_schema(v, depth + 1, chain) for k, v in kept}
            if len(props) > MAX_PROPERTIES:
                out["more_properties"] = len(props) - MAX_PROPERTIES
        if "items" in node:
            out["items"] = self.compact_schema(node["items"], depth + 1, chain)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            out["additionalProperties"] = self.compact_schema(extra, depth + 1, chain)
        elif isinstance(extra, bool):
            out["additionalProperties"] = extra
        for key in ("allOf", "oneOf", "anyOf"):
            if isinstance(node.get(key), list):
                out[key] = [self.compact_schema(s, depth + 1, chain) for s in node[key][:10]]
        return out


def _short(text: str, limit: int = MAX_TEXT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
