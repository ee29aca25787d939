"""Hostile spec documents, written as text: the regression tests and the fuzz campaign
(fuzz/openapi_specs.py) both use them.

Each function returns the text of one spec file; the file name's extension matters (``.yaml``
or ``.json``) and is given by :data:`EXTENSIONS`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ENVELOPE = "openapi: 3.0.0\ninfo: {title: hostile, version: '1'}\n"


def _spec(paths: dict[str, Any], schemas: dict[str, Any] | None = None, title: str = "hostile") -> dict[str, Any]:
    doc: dict[str, Any] = {"openapi": "3.0.3", "info": {"title": title, "version": "1"}, "paths": paths}
    if schemas is not None:
        doc["components"] = {"schemas": schemas}
    return doc


def _post(op_id: str, schema: Any) -> dict[str, Any]:
    return {"post": {"operationId": op_id, "requestBody": {"content": {"application/json": {"schema": schema}}},
                     "responses": {"200": {"description": "ok"}}}}


def nested_flow_yaml(levels: int = 50_000, opener: str = "[") -> str:
    """``x: [[[[...]]]]`` (or ``{a: {a: ...}}``) under an otherwise valid spec: 100 KB at 50,000."""
    if opener == "[":
        body = "[" * levels + "]" * levels
    else:
        body = "{a: " * levels + "1" + "}" * levels
    return ENVELOPE + "paths: {}\nx: " + body + "\n"


def nested_block_yaml(levels: int = 300) -> str:
    """Nesting by indentation, one level per line (``a:`` under ``a:`` ...)."""
    lines = [ENVELOPE.rstrip("\n"), "paths: {}", "x:"]
    lines += [" " * (i + 1) + "a:" for i in range(levels)] + [" " * (levels + 1) + "1"]
    return "\n".join(lines) + "\n"


def nested_json(levels: int = 50_000) -> str:
    return '{"openapi": "3.0.0", "info": {"title": "deep", "version": "1"}, "paths": {}, "x": ' + "[" * levels + "]" * levels + "}"


def alias_bomb_yaml(levels: int = 9, width: int = 10) -> str:
    """A "billion laughs" (width ** levels strings) in an enum that get_operation shows."""
    lines = [ENVELOPE.rstrip("\n"), "l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, levels):
        lines.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]")
    lines += ["paths:", "  /bomb:", "    post:", "      operationId: bomb", "      requestBody:",
              "        content:", "          application/json:", "            schema:",
              f"              enum: [*l{levels - 1}]", "      responses: {'200': {description: ok}}"]
    return "\n".join(lines) + "\n"


def recursive_alias_yaml() -> str:
    """An alias inside the node it names: a list that contains itself."""
    return ENVELOPE + ("paths:\n  /loop:\n    post:\n      operationId: loop\n      requestBody:\n"
                       "        content:\n          application/json:\n            schema:\n"
                       "              enum: &a [1, *a]\n      responses: {'200': {description: ok}}\n")


def huge_integer_yaml(digits: int = 5000) -> str:
    """An integer Python refuses to convert (more than 4,300 digits)."""
    return ENVELOPE + "paths: {}\nx: " + "1" * digits + "\n"


def ref_fanout_json(levels: int = 5, width: int = 40, operations: int = 10, keyword: str = "properties") -> str:
    """Schemas S0 .. S<levels> where each of S0 .. S<levels-1> refers to the next ``width``
    times (as properties, or in allOf/anyOf/oneOf): the request body of every operation
    expands to width ** levels nodes. About 9 KB at the defaults."""
    schemas: dict[str, Any] = {}
    for i in range(levels):
        ref = {"$ref": f"#/components/schemas/S{i + 1}"}
        if keyword == "properties":
            schemas[f"S{i}"] = {"type": "object", "properties": {f"p{j}": ref for j in range(width)}}
        else:
            schemas[f"S{i}"] = {keyword: [ref] * width}
    schemas[f"S{levels}"] = {"type": "string", "description": "leaf"}
    paths = {f"/o{k}": _post(f"op{k}", {"$ref": "#/components/schemas/S0"}) for k in range(operations)}
    return json.dumps(_spec(paths, schemas, "fanout"), separators=(",", ":"))


def path_item_fanout_yaml(paths: int = 420, levels: int = 5, width: int = 40) -> str:
    """Hundreds of paths that all ``$ref`` one path item whose operation posts a fan-out
    schema: every path is one more expansion. About 14 KB at the defaults."""
    lines = [ENVELOPE.rstrip("\n")]
    for i in range(levels):
        props = ",".join(f"p{j}: {{$ref: '#/S{i + 1}'}}" for j in range(width))
        lines.append(f"S{i}: {{properties: {{{props}}}}}")
    lines += [f"S{levels}: {{type: string}}",
              "i: {post: {requestBody: {content: {a/json: {schema: {$ref: '#/S0'}}}}, responses: {}}}", "paths:"]
    lines += [f"  /{k}: {{$ref: '#/i'}}" for k in range(paths)]
    return "\n".join(lines) + "\n"


def sibling_merge_json(keys: int = 40_000, operations: int = 4_000) -> str:
    """A request body with ``keys`` extension keys, referred to by every operation with a
    sibling ``description``: each reference merges the siblings over the whole target."""
    body = {f"x-k{i}": i for i in range(keys)}
    body["content"] = {"application/json": {"schema": {"type": "object"}}}
    paths = {f"/m{k}": {"post": {"operationId": f"m{k}", "responses": {},
                                 "requestBody": {"$ref": "#/components/requestBodies/B", "description": "d"}}}
             for k in range(operations)}
    doc = _spec(paths)
    doc["components"] = {"requestBodies": {"B": body}}
    return json.dumps(doc, separators=(",", ":"))


def shared_text_yaml(chars: int = 2_000_000, paths: int = 3_000) -> str:
    """One operation with a very long description and summary, shared by thousands of paths."""
    text = "word " * (chars // 5)
    return ENVELOPE + ("components:\n  pathItems:\n    item:\n      get:\n"
                       f"        summary: '{text}'\n        description: '{text}'\n"
                       "        responses: {'200': {description: ok}}\npaths:\n") + "".join(
        f"  /s{k}: {{$ref: '#/components/pathItems/item'}}\n" for k in range(paths))


def config_toml(specs: dict[str, str], cache_dir: Path) -> str:
    """A ``[plugins.openapi]`` table loading these specs (API name -> path)."""
    entries = ", ".join(f"{{ path = {json.dumps(path)}, name = {json.dumps(name)} }}" for name, path in specs.items())
    return f"[plugins.openapi]\nspecs = [{entries}]\ncache_dir = {json.dumps(str(cache_dir))}\n"


# name -> (extension, builder at its default size)
BUILDERS = {
    "nested-flow": (".yaml", nested_flow_yaml),
    "nested-block": (".yaml", nested_block_yaml),
    "nested-json": (".json", nested_json),
    "alias-bomb": (".yaml", alias_bomb_yaml),
    "recursive-alias": (".yaml", recursive_alias_yaml),
    "huge-integer": (".yaml", huge_integer_yaml),
    "ref-fanout": (".json", ref_fanout_json),
    "path-item-fanout": (".yaml", path_item_fanout_yaml),
    "sibling-merge": (".json", sibling_merge_json),
    "shared-text": (".yaml", shared_text_yaml),
}
EXTENSIONS = {name: ext for name, (ext, _) in BUILDERS.items()}
