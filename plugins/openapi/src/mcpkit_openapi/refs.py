"""Local ``$ref`` resolution and schema compaction.

Refs are resolved lazily against the document they live in (``#/components/schemas/X``,
``#/definitions/X``, ``#/parameters/X`` ...). Cycles are guarded by the refs being expanded
above a node: a ref met again inside its own expansion becomes
``{"$ref": "X", "recursive": true}``. Refs to other files or URLs are kept as a marker, never
fetched.

A few hundred bytes of refs can fan out to millions of nodes (forty properties that each
``$ref`` a schema of forty properties, four levels down), so what compaction builds is
metered (:class:`~.bounds.Meter`): the schemas of one operation share
``max_operation_bytes``; when they do not fit, the operation's schemas are cut one level
shallower and built again, down to an outline (name and type) of each. The work of every
operation, attempts that were cut included, counts toward ``max_expanded_bytes`` for the
whole spec, past which the spec is refused. Work that nothing charges is bounded per node:
resolved pointers are memoized and a ``$ref`` with sibling keys merges only the keys read.
"""

from __future__ import annotations

from itertools import islice
from typing import Any
from urllib.parse import unquote

from .bounds import BoundExceeded, Limits, Meter, OverBudget, bounded, cut_text

MAX_DEPTH = 4  # nesting levels of schema kept for get_operation
MAX_PROPERTIES = 40
MAX_ENUM = 25
MAX_REQUIRED = 100
MAX_TEXT = 240
MAX_HOPS = 50  # refs followed in a row (A -> B -> C ...) before giving up
MAX_NAME = 200  # characters of a ref's name or a ref kept in a marker
HOP_COST = 4  # bytes of the meter charged for following one ref: the work, not the output
_KEPT_SCALARS = (
    "type", "format", "nullable", "default", "minimum", "maximum", "exclusiveMinimum",
    "exclusiveMaximum", "minLength", "maxLength", "pattern", "minItems", "maxItems",
    "uniqueItems", "readOnly", "writeOnly", "deprecated", "const", "collectionFormat",
)
# Every key read from an object reached through a $ref (here and in spec.py). A $ref with
# sibling keys merges them over its target; when the two are large, only these are merged.
_READ_KEYS = frozenset((
    "$ref", "title", "description", "summary", "enum", "required", "properties", "items",
    "additionalProperties", "allOf", "oneOf", "anyOf", "name", "in", "schema", "content",
    "parameters", "requestBody", "responses", "tags", "operationId", "consumes",
    "get", "put", "post", "delete", "options", "head", "patch", "trace", *_KEPT_SCALARS,
))
_FULL_MERGE = 64  # keys of target + referring object below which everything is merged


class RefError(Exception):
    """A local reference that points nowhere."""


class _Marker(dict):  # type: ignore[type-arg]
    """A stand-in made by :meth:`Resolver.deref` (a cycle, an external or a dangling ref),
    told apart from a document object that happens to have the same keys."""


def ref_name(ref: str) -> str:
    """``#/components/schemas/Issue`` -> ``Issue`` (the last pointer segment)."""
    return unquote(ref.rsplit("/", 1)[-1]).replace("~1", "/").replace("~0", "~")


def resolve_pointer(doc: Any, ref: str) -> Any:
    """Follow a local JSON pointer (``#/a/b~1c``) inside ``doc``."""
    if not ref.startswith("#"):
        raise RefError(f"not a local reference: {cut_text(ref, MAX_NAME)}")
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
            raise RefError(f"unresolvable reference: {cut_text(ref, MAX_NAME)}")
    return node


def _merged(target: dict, node: dict) -> dict:
    """``target`` with the keys of the referring ``node`` (but its ``$ref``) laid over it."""
    if len(target) + len(node) <= _FULL_MERGE:
        out = dict(target)
        out.update((k, v) for k, v in node.items() if k != "$ref")
        return out
    out = {k: target[k] for k in _READ_KEYS if k in target}
    out.update((k, node[k]) for k in _READ_KEYS if k in node and k != "$ref")
    return out


class Resolver:
    """Resolves refs of one document; ``deref`` follows chains of refs (``A -> B -> obj``).

    Between :meth:`start_operation` and :meth:`finish_operation`, the schemas compacted share
    one operation's meter.
    """

    def __init__(self, doc: Any, limits: Limits | None = None) -> None:
        self.doc = doc
        self.limits = limits or Limits()
        self._targets: dict[str, Any] = {}
        self._names: dict[str, str] = {}
        self.expanded = 0  # work charged by the operations finished so far
        self.start_operation()

    def start_operation(self) -> None:
        self.meter = Meter(self.limits.max_operation_bytes)
        self.depth_limit = MAX_DEPTH

    def finish_operation(self) -> str:
        """Count the operation's work toward the spec's bound (raising :class:`BoundExceeded`
        past it); return a note for the assistant when its schemas had to be cut, else ""."""
        self.expanded += self.meter.work
        if self.expanded > self.limits.max_expanded_bytes:
            mb = f"{self.limits.max_expanded_bytes / 1048576:.4g}"
            raise BoundExceeded(f"expands to more than {mb} MiB once its $refs are resolved "
                                f"(the limit is max_expanded_mb = {mb})")
        kb = f"{self.limits.max_operation_bytes / 1024:.4g} KB"
        if self.depth_limit == MAX_DEPTH:
            return ""
        if self.depth_limit == 0:
            return (f"Its schemas are too large to show within {kb}: each is reduced to its name and "
                    'type, marked "truncated": true.')
        return (f"To stay within {kb}, some of its schemas are cut {self.depth_limit} level(s) deep "
                f'instead of {MAX_DEPTH}; what is marked "truncated": true is left out.')

    def name(self, ref: str) -> str:
        found = self._names.get(ref)
        if found is None:
            found = self._names[ref] = cut_text(ref_name(ref), MAX_NAME)
        return found

    def _resolve(self, ref: str) -> Any:
        if ref not in self._targets:
            try:
                self._targets[ref] = resolve_pointer(self.doc, ref)
            except RefError as exc:
                self._targets[ref] = exc
        return self._targets[ref]

    def deref(self, node: Any, active: set[str] | frozenset[str] = frozenset()) -> tuple[Any, list[str]]:
        """Return (target, the refs followed to reach it). A ref in ``active`` (being expanded
        above) or met twice is a cycle. Sibling keys of a ref are merged over the target
        (OpenAPI 3.1 allows ``description`` next to ``$ref``)."""
        followed: list[str] = []
        while isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref = node["$ref"]
            if ref in active or ref in followed or len(followed) > MAX_HOPS:
                return _Marker({"$ref": self.name(ref), "recursive": True}), followed
            if not ref.startswith("#"):
                return _Marker({"$ref": cut_text(ref, MAX_NAME), "note": "external reference, not resolved"}), followed
            target = self._resolve(ref)
            if isinstance(target, RefError):
                return _Marker({"$ref": cut_text(ref, MAX_NAME), "note": str(target)}), followed
            if len(node) > 1 and isinstance(target, dict):
                target = _merged(target, node)
            followed.append(ref)
            node = target
        return node, followed

    def obj(self, node: Any) -> Any:
        """Dereference one object (parameter, response, request body) without compaction."""
        return self.deref(node)[0]

    def compact_schema(self, node: Any) -> Any:
        """A resolved, size-bounded copy of a schema, fit for an LLM context window: at most
        MAX_DEPTH levels, fewer when the operation's schemas would not fit its share."""
        while self.depth_limit > 0:
            saved = self.meter.used
            try:
                return self._compact(node, 0, set())
            except OverBudget:
                self.meter.used = saved
                self.depth_limit -= 1
        return self._outline(node)

    def _put(self, out: dict[str, Any], key: str, value: Any, size: int) -> None:
        self.meter.charge(len(key) + 4 + size)
        out[key] = value

    def _leaf(self, node: Any, followed: list[str]) -> Any:
        """What a node that is not a schema object compacts to (charged), or None if it is one."""
        self.meter.charge(2 + HOP_COST * len(followed))
        if isinstance(node, _Marker):
            value, size = bounded(dict(node))
            self.meter.charge(size)
            return value
        if isinstance(node, bool):
            return node
        if isinstance(node, str):
            value, size = bounded(node)
            self.meter.charge(size)
            return value
        return None if isinstance(node, dict) else {}

    def _compact(self, node: Any, depth: int, active: set[str]) -> Any:
        name = self.name(node["$ref"]) if isinstance(node, dict) and isinstance(node.get("$ref"), str) else None
        node, followed = self.deref(node, active)
        leaf = self._leaf(node, followed)
        if leaf is not None:
            return leaf
        if depth >= self.depth_limit:
            return self._cut(node, name)
        out: dict[str, Any] = {}
        title = name or (node["title"] if isinstance(node.get("title"), str) else None)
        if title:
            self._put(out, "title", *bounded(title))
        for key in _KEPT_SCALARS:
            if key in node and (key == "type" or not isinstance(node[key], (dict, list))):
                self._put(out, key, *bounded(node[key]))
        if isinstance(node.get("description"), str):
            text = _short(node["description"])
            if text:
                self._put(out, "description", text, len(text) + 2)
        if isinstance(node.get("enum"), list):
            self._put(out, "enum", *self._values(node["enum"], MAX_ENUM))
        if isinstance(node.get("required"), list):
            self._put(out, "required", *self._values(node["required"], MAX_REQUIRED))
        active.update(followed)
        props = node.get("properties")
        if isinstance(props, dict) and props:
            kept: dict[Any, Any] = {}
            self._put(out, "properties", kept, 0)
            for key, sub in islice(props.items(), MAX_PROPERTIES):
                self.meter.charge(len(key) + 3 if isinstance(key, str) else 8)
                kept[key] = self._compact(sub, depth + 1, active)
            if len(props) > MAX_PROPERTIES:
                self._put(out, "more_properties", len(props) - MAX_PROPERTIES, 8)
        if "items" in node:
            self._put(out, "items", self._compact(node["items"], depth + 1, active), 0)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            self._put(out, "additionalProperties", self._compact(extra, depth + 1, active), 0)
        elif isinstance(extra, bool):
            self._put(out, "additionalProperties", extra, 5)
        for key in ("allOf", "oneOf", "anyOf"):
            if isinstance(node.get(key), list):
                self._put(out, key, [self._compact(s, depth + 1, active) for s in node[key][:10]], 0)
        active.difference_update(followed)
        return out

    def _values(self, values: list[Any], limit: int) -> tuple[list[Any], int]:
        kept, total = [], 2
        for value in values[:limit]:
            value, size = bounded(value)
            kept.append(value)
            total += size + 1
        if len(values) > limit:
            kept.append("...")
            total += 6
        return kept, total

    def _cut(self, node: dict, name: str | None) -> dict[str, Any]:
        """The stand-in for a schema below the depth kept: its name and type."""
        out: dict[str, Any] = {}
        if name:
            self._put(out, "title", name, len(name) + 2)
        if "type" in node:
            self._put(out, "type", *bounded(node["type"], MAX_NAME))
        self._put(out, "truncated", True, 5)
        return out

    def _outline(self, node: Any) -> Any:
        """A whole schema as its stand-in, when nothing deeper fits: charged but never refused,
        and only ``{"truncated": true}`` once the operation's share is spent."""
        saved = self.meter.used
        try:
            return self._compact(node, 0, set())
        except OverBudget:
            self.meter.used = saved
            self.meter.charge_soft(20)
            return {"truncated": True}


def _short(text: str, limit: int = MAX_TEXT) -> str:
    """The text on one line, cut at ``limit`` characters with "…". Only a prefix is read, so a
    long text costs no more than a short one however often it is reached through refs."""
    head = text[: limit * 8 + 64]
    short = " ".join(head.split())
    if len(short) <= limit and len(head) == len(text):
        return short
    return short[: limit - 1].rstrip() + "…"
