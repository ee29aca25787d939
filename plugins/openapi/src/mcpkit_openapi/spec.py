"""Reading OpenAPI 3.0/3.1 and Swagger 2.0 documents into flat operation records."""

from __future__ import annotations

import json
import os
import re
import stat
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import Any

from .bounds import BoundExceeded, Limits, cut_text
from .nesting import check_depth, check_yaml, nesting_error
from .refs import Resolver, _short

HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
MAX_DESCRIPTION = 1500  # characters of an operation description kept
# What one operation keeps of lists a spec may make as long as it likes (and share between
# many operations through $refs); the largest of eleven public specs have 36 parameters, 9
# responses and 3 tags.
MAX_PARAMETERS = 100
MAX_RESPONSES = 50
MAX_TAGS = 20
MAX_CONTENT_TYPES = 20
MAX_LABEL = 200  # characters of a name, tag, response code or content type
MAX_PATH = 2000  # an operation's path or operationId longer than this refuses the spec


class SpecError(Exception):
    """A spec that cannot be read or is not an OpenAPI/Swagger document."""


@dataclass
class Operation:
    """One callable operation, with everything get_operation shows (refs already resolved)."""

    operation_id: str
    method: str
    path: str
    summary: str = ""
    description: str = ""
    tags: list[str] = field(default_factory=list)
    parameters: list[dict[str, Any]] = field(default_factory=list)
    request_body: dict[str, Any] | None = None
    responses: dict[str, str] = field(default_factory=dict)
    deprecated: bool = False
    synthesized_id: bool = False
    api: str = ""
    # the description without the paragraphs the spec repeats across many operations ("This
    # endpoint is part of ..."), when it has any ("" when it has nothing else); None when
    # nothing was dropped
    own_description: str | None = None
    # for the assistant, when get_operation shows less than the spec has (schemas cut to fit
    # the size bound, parameters or responses left out); "" when it shows everything
    note: str = ""

    @property
    def own_text(self) -> str:
        """The description the ranking reads: its own paragraphs, not the spec's boilerplate."""
        return self.description if self.own_description is None else self.own_description

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Operation:
        return cls(**data)


@dataclass
class ParsedSpec:
    title: str
    version: str
    spec_version: str  # "2.0", "3.0.3", "3.1.0"
    operations: list[Operation]


def parse_document(raw: bytes, name: str, limits: Limits | None = None) -> Any:
    """JSON or YAML bytes -> Python object. ``name`` picks the first parser to try.

    Nesting is bounded (``limits.max_nesting``) before anything recurses over the document,
    and so is what YAML aliases add (see nesting.py).
    """
    limits = limits or Limits()
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(f"not UTF-8 text: {exc}") from None
    if not name.lower().endswith((".yaml", ".yml")):
        try:
            doc = json.loads(text)
        except RecursionError:  # the decoder's own guard, far below a crash
            raise SpecError(str(nesting_error(limits.max_nesting))) from None
        except ValueError as exc:  # JSONDecodeError, or an integer of more than 4,300 digits
            if name.lower().endswith(".json"):
                raise SpecError(f"invalid JSON: {_one_line(exc)}") from None
        else:
            try:
                check_depth(doc, limits.max_nesting)
            except BoundExceeded as exc:
                raise SpecError(str(exc)) from None
            return doc
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is a declared dependency
        raise SpecError("YAML spec but PyYAML is not installed") from None
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        check_yaml(text, loader, limits.max_nesting)
        return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader
    except BoundExceeded as exc:
        raise SpecError(str(exc)) from None
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        # ValueError/TypeError: a scalar the safe constructor cannot build (an integer of
        # more than 4,300 digits, a date that does not exist); RecursionError: merge keys
        # (<<) chained thousands deep
        raise SpecError(f"invalid YAML: {_one_line(exc)}") from None


def _one_line(exc: Exception) -> str:
    """An error's message on one line (YAML's quote the offending lines), cut to 300 characters."""
    return cut_text(" ".join(str(exc).split()), 300)


def synthesized_id(method: str, path: str) -> str:
    """The id given to an operation that has no operationId: ``GET /repositories/{workspace}``."""
    return f"{method.upper()} {path}"


def load_operations(doc: Any, limits: Limits | None = None) -> ParsedSpec:
    """Validate the top level of a parsed document and extract its operations.

    Raises :class:`SpecError` when the operations expand past ``limits.max_expanded_bytes``.
    """
    if not isinstance(doc, dict):
        raise SpecError("the document is not a JSON/YAML object")
    swagger, openapi = doc.get("swagger"), doc.get("openapi")
    if _label(swagger) == "2.0":
        spec_version = "2.0"
    elif isinstance(openapi, str) and re.match(r"3\.[01](\.|$)", openapi):
        spec_version = openapi
    else:
        raise SpecError("neither 'openapi: 3.0.x/3.1.x' nor 'swagger: \"2.0\"' at the top level")
    info = doc.get("info") if isinstance(doc.get("info"), dict) else {}
    paths = doc.get("paths", {})
    if paths is None:
        paths = {}
    if not isinstance(paths, dict):
        raise SpecError("'paths' is not an object")
    if "paths" not in doc and spec_version.startswith(("2", "3.0")):
        raise SpecError("no 'paths' object")
    resolver = Resolver(doc, limits)
    v2 = spec_version == "2.0"
    ops: list[Operation] = []
    seen: dict[str, int] = {}
    for path, item in paths.items():
        item = resolver.obj(item)
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters") if isinstance(item.get("parameters"), list) else []
        for method in HTTP_METHODS:
            raw_op = item.get(method)
            if raw_op is None:
                continue
            if not isinstance(raw_op, dict):
                raise SpecError(f"operation {method.upper()} {path} is not an object")
            resolver.start_operation()
            op = _operation(resolver, doc, str(path), method, raw_op, shared, v2)
            try:
                schemas_note = resolver.finish_operation()
            except BoundExceeded as exc:
                raise SpecError(str(exc)) from None
            op.note = " ".join(n for n in (schemas_note, op.note) if n)
            count = seen.get(op.operation_id, 0) + 1
            seen[op.operation_id] = count
            if count > 1:  # duplicate ids happen in the wild; keep them apart, stably
                op.operation_id = f"{op.operation_id}#{count}"
            ops.append(op)
    drop_boilerplate(ops)
    return ParsedSpec(
        title=_label(info.get("title") or "") or "",
        version=_label(info.get("version") or "") or "",
        spec_version=spec_version,
        operations=ops,
    )


_PARAGRAPH = re.compile(r"\n\s*\n")
BOILERPLATE_MIN_OPS = 5  # a paragraph repeated in this many descriptions ...
BOILERPLATE_SHARE = 0.02  # ... and in this share of them is the spec's boilerplate


def drop_boilerplate(ops: list[Operation]) -> None:
    """Set ``own_description`` where a description carries paragraphs the spec repeats
    across many operations (Bluesky opens every one with "This endpoint is part of ...").

    The share keeps an API's few copies of one operation (Kubernetes' "read the specified
    Deployment" in each API version) out of it.
    """
    counts: dict[str, int] = {}
    split = []
    for op in ops:
        paras = [p.strip() for p in _PARAGRAPH.split(op.description) if p.strip()]
        split.append(paras)
        for p in set(paras):
            counts[p] = counts.get(p, 0) + 1
    floor = max(BOILERPLATE_MIN_OPS, BOILERPLATE_SHARE * len(ops))
    for op, paras in zip(ops, split):
        own = [p for p in paras if counts[p] < floor]
        if len(own) < len(paras):
            op.own_description = "\n\n".join(own)


def _text(value: Any, limit: int = MAX_DESCRIPTION) -> str:
    """A spec's text, stripped; only its first ``2 * limit`` characters are read (the caller
    cuts it at ``limit``), so a text shared by many operations costs little each time."""
    return value[: 2 * limit].strip() if isinstance(value, str) else ""


def _label(value: Any) -> str | None:
    """A name, tag, code or content type as text of at most MAX_LABEL characters; None for a
    value that is not a scalar (a YAML list where a name belongs)."""
    if isinstance(value, (dict, list, set, tuple)):
        return None
    return cut_text(value if isinstance(value, str) else str(value), MAX_LABEL)


def _first(value: Any, n: int) -> list[Any]:
    """The first ``n`` items of a list in the spec; nothing for anything else."""
    return list(islice(value, n)) if isinstance(value, list) else []


def _operation(
    r: Resolver, doc: dict, path: str, method: str, raw: dict, shared: list, v2: bool
) -> Operation:
    op_id = _text(raw.get("operationId"), MAX_PATH)
    if len(op_id) > MAX_PATH or len(path) > MAX_PATH:
        raise SpecError(f"operation {cut_text(path, 80)} has a path or operationId longer than {MAX_PATH:,} characters")
    description = _text(raw.get("description"))
    if len(description) > MAX_DESCRIPTION:
        description = description[: MAX_DESCRIPTION - 1].rstrip() + "…"
    summary = _short(_text(raw.get("summary")), 300)
    r.meter.charge_soft(len(path) + len(op_id) + len(description) + len(summary) + 160)
    params: dict[tuple[str, str], dict] = {}
    raw_params = raw.get("parameters")
    for p in _first(shared, MAX_PARAMETERS) + _first(raw_params, MAX_PARAMETERS):
        p = r.obj(p)
        if isinstance(p, dict) and "name" in p and "in" in p:
            key = (_label(p["name"]), _label(p["in"]))
            if key[0] is not None and key[1] is not None:
                params[key] = p  # operation level overrides path level
    notes = []
    longest = max(len(shared), len(raw_params) if isinstance(raw_params, list) else 0)
    if len(params) > MAX_PARAMETERS or longest > MAX_PARAMETERS:
        notes.append(f"Only its first {MAX_PARAMETERS} parameters are shown.")
        params = dict(islice(params.items(), MAX_PARAMETERS))
    parameters: list[dict[str, Any]] = []
    body: dict[str, Any] | None = None
    form: list[dict] = []
    for (name, where), p in params.items():
        if v2 and where == "body":
            body = {
                "content_types": _consumes(doc, raw),
                "required": bool(p.get("required", False)),
                "schema": r.compact_schema(p.get("schema", {})),
            }
            if _text(p.get("description")):
                body["description"] = _short(p["description"])
            continue
        if v2 and where == "formData":
            form.append(p)
            continue
        entry: dict[str, Any] = {"name": name, "in": where, "required": bool(p.get("required", where == "path"))}
        if _text(p.get("description")):
            entry["description"] = _short(p["description"])
            r.meter.charge_soft(len(entry["description"]))
        r.meter.charge_soft(len(name) + len(where) + 48)
        entry["schema"] = _param_schema(r, p, v2)
        if p.get("deprecated"):
            entry["deprecated"] = True
        parameters.append(entry)
    if v2 and form:
        body = _form_body(r, doc, raw, form)
    elif not v2 and raw.get("requestBody") is not None:
        body = _request_body(r, raw["requestBody"])
    responses: dict[str, str] = {}
    raw_responses = raw.get("responses") if isinstance(raw.get("responses"), dict) else {}
    for code, resp in islice(raw_responses.items(), MAX_RESPONSES):
        resp = r.obj(resp)
        text = _text(resp.get("description")) if isinstance(resp, dict) else ""
        label = _label(code) or ""
        responses[label] = _short(text, 160) if text else ""
        r.meter.charge_soft(len(label) + len(responses[label]) + 8)
    if len(raw_responses) > MAX_RESPONSES:
        notes.append(f"Only its first {MAX_RESPONSES} responses are shown.")
    tags = [_label(t) or "" for t in _first(raw.get("tags"), MAX_TAGS) if isinstance(t, (str, int))]
    return Operation(
        operation_id=op_id or synthesized_id(method, path),
        method=method.upper(),
        path=path,
        summary=summary,
        description=description,
        tags=tags,
        parameters=parameters,
        request_body=body,
        responses=responses,
        deprecated=bool(raw.get("deprecated", False)),
        synthesized_id=not op_id,
        note=" ".join(notes),
    )


def _param_schema(r: Resolver, p: dict, v2: bool) -> Any:
    if "schema" in p:
        return r.compact_schema(p["schema"])
    if isinstance(p.get("content"), dict) and p["content"]:  # 3.x parameter with content
        media = next(iter(p["content"].values()))
        return r.compact_schema(media.get("schema", {}) if isinstance(media, dict) else {})
    if v2:  # 2.0 non-body parameters carry the schema keywords inline
        keys = ("type", "format", "items", "enum", "default", "minimum", "maximum", "pattern",
                "maxLength", "minLength", "collectionFormat")
        return r.compact_schema({k: p[k] for k in keys if k in p})
    return {}


def _consumes(doc: dict, raw: dict) -> list[str]:
    types = raw.get("consumes") or doc.get("consumes") or ["application/json"]
    labels = [_label(t) for t in _first(types, MAX_CONTENT_TYPES)]
    return [t for t in labels if t is not None] or ["application/json"]


def _form_body(r: Resolver, doc: dict, raw: dict, form: list[dict]) -> dict[str, Any]:
    props = {_label(p["name"]) or "": _param_schema(r, p, True) for p in form}
    required = [_label(p["name"]) or "" for p in form if p.get("required")]
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    types = _consumes(doc, raw)
    if types == ["application/json"]:
        types = ["application/x-www-form-urlencoded"]
    return {"content_types": types, "required": bool(required), "schema": schema}


def _request_body(r: Resolver, raw_body: Any) -> dict[str, Any] | None:
    rb = r.obj(raw_body)
    if not isinstance(rb, dict):
        return None
    content = rb.get("content") if isinstance(rb.get("content"), dict) else {}
    keys = list(islice(content, MAX_CONTENT_TYPES))
    types = [_label(k) or "" for k in keys]
    chosen = next((k for k, t in zip(keys, types) if "json" in t), keys[0] if keys else None)
    schema: Any = {}
    if chosen is not None and isinstance(content[chosen], dict):
        schema = r.compact_schema(content[chosen].get("schema", {}))
    out: dict[str, Any] = {"content_types": types, "required": bool(rb.get("required", False)), "schema": schema}
    if _text(rb.get("description")):
        out["description"] = _short(rb["description"])
    return out


# The largest spec file read. Real descriptions are far smaller (GitHub's, 1,223 operations, is
# 13 MB); the cap keeps a mistaken path (a log, a disk image, /dev/zero) from filling memory.
MAX_SPEC_BYTES = 64 * 1024 * 1024


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_spec_file(path: Path, max_bytes: int = MAX_SPEC_BYTES) -> bytes:
    """The bytes of a spec file, refusing anything but a regular file of at most ``max_bytes``.

    The file is opened non-blocking (a FIFO would otherwise wait for a writer forever) and
    checked with ``fstat`` on the open descriptor, so a path swapped after a check is still
    caught; the read stops one byte past the cap in case the file grows meanwhile.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:  # a directory opens, and is refused below as not a regular file
        raise SpecError(f"cannot read file: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SpecError(f"is {_kind(st.st_mode)}, not a regular file")
        limit = f"the limit is {max_bytes / 1048576:g} MiB"
        if st.st_size > max_bytes:
            raise SpecError(f"is {st.st_size / 1048576:.1f} MiB; {limit}")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise SpecError(f"grew past {limit} while being read")
        return b"".join(chunks)
    except OSError as exc:
        raise SpecError(f"cannot read file: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def load_spec_file(path: Path, max_bytes: int = MAX_SPEC_BYTES,
                   limits: Limits | None = None) -> tuple[bytes, ParsedSpec]:
    """Read and parse one spec file; raises :class:`SpecError` with a readable reason."""
    raw = read_spec_file(path, max_bytes)
    return raw, load_operations(parse_document(raw, path.name, limits), limits)
