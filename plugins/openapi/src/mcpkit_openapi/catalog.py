"""The catalog: every operation of every configured spec, under a unique id, cached on disk."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from .bounds import Limits
from .spec import (MAX_SPEC_BYTES, Operation, ParsedSpec, SpecError, load_operations, parse_document,
                   read_spec_file)

log = logging.getLogger("mcpkit_openapi")

CACHE_FORMAT = 4  # bump when Operation records or their extraction change
DEFAULT_SPEC = "default_spec.yaml"


@dataclass
class SpecSource:
    """One configured spec: a file path and an optional API name."""

    path: Path
    name: str | None = None


@dataclass
class ApiInfo:
    name: str
    title: str
    version: str
    spec_version: str
    source: str
    operations: int
    sha256: str


@dataclass
class Catalog:
    operations: list[Operation]
    apis: list[ApiInfo]
    errors: list[str] = field(default_factory=list)
    embedded_default: bool = False
    by_id: dict[str, Operation] = field(init=False)

    def __post_init__(self) -> None:
        self.by_id = {op.operation_id: op for op in self.operations}


def parse_sources(value: Any, base: Path | None = None) -> list[SpecSource]:
    """The ``specs`` setting -> sources. Accepts a string, a list of strings and/or tables
    ``{path = "...", name = "..."}``, or a table mapping API names to paths."""
    base = base or Path.cwd()
    if value is None:
        return []
    items: list[tuple[Any, Any]]
    if isinstance(value, str):
        items = [(value, None)]
    elif isinstance(value, dict):
        items = [(p, n) for n, p in value.items()]
    elif isinstance(value, list):
        items = []
        for entry in value:
            if isinstance(entry, dict):
                if "path" not in entry:
                    raise ValueError(f"spec entry {entry!r} has no 'path'")
                items.append((entry["path"], entry.get("name")))
            else:
                items.append((entry, None))
    else:
        raise ValueError("'specs' must be a list of paths or {path, name} tables")
    out = []
    for path, name in items:
        if not isinstance(path, (str, os.PathLike)) or not str(path):
            raise ValueError(f"spec path must be a non-empty string, got {path!r}")
        if name is not None and (not isinstance(name, str) or not slug(name)):
            raise ValueError(f"spec name must be a non-empty string, got {name!r}")
        p = Path(path).expanduser()
        out.append(SpecSource(p if p.is_absolute() else base / p, slug(name) if name else None))
    return out


def slug(text: str) -> str:
    """``GitHub v3 REST API`` -> ``github-v3-rest-api``."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _read_cached(cache_dir: Path | None, key: str) -> ParsedSpec | None:
    if cache_dir is None:
        return None
    try:
        data = json.loads((cache_dir / f"{key}.json").read_text("utf-8"))
        ops = [Operation.from_dict(o) for o in data["operations"]]
        return ParsedSpec(data["title"], data["version"], data["spec_version"], ops)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("openapi: ignoring unreadable cache entry %s: %s", key, exc)
        return None


def _write_cached(cache_dir: Path | None, key: str, parsed: ParsedSpec) -> None:
    if cache_dir is None:
        return
    data = {
        "format": CACHE_FORMAT,
        "title": parsed.title,
        "version": parsed.version,
        "spec_version": parsed.spec_version,
        "operations": [op.to_dict() for op in parsed.operations],
    }
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_dir, suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, default=str, separators=(",", ":"))
        os.replace(tmp, cache_dir / f"{key}.json")
    except OSError as exc:
        log.warning("openapi: cannot write the index cache in %s: %s", cache_dir, exc)


def cache_key(raw: bytes, limits: Limits | None = None) -> str:
    """``<sha256 of the bytes>-v<format>-<bounds>``: the bounds decide what is kept too."""
    return f"{hashlib.sha256(raw).hexdigest()}-v{CACHE_FORMAT}-{(limits or Limits()).cache_tag()}"


def load_parsed(raw: bytes, filename: str, cache_dir: Path | None,
                limits: Limits | None = None) -> tuple[str, ParsedSpec]:
    """Parse a spec's bytes, through the on-disk cache keyed by their sha256."""
    key = cache_key(raw, limits)
    parsed = _read_cached(cache_dir, key)
    if parsed is None:
        parsed = load_operations(parse_document(raw, filename, limits), limits)
        _write_cached(cache_dir, key, parsed)
    return key, parsed


def embedded_default_bytes() -> bytes:
    return resources.files(__package__).joinpath(DEFAULT_SPEC).read_bytes()


def build_catalog(sources: list[SpecSource], cache_dir: Path | None = None,
                  max_spec_bytes: int = MAX_SPEC_BYTES, limits: Limits | None = None) -> Catalog:
    """Load every source (bad ones are logged and skipped); with no sources, the embedded demo.

    Operation ids are prefixed ``name:`` when more than one API is loaded. A spec refused
    (unreadable, invalid, over a bound of ``limits``) costs one ERROR line naming it; nothing a
    spec holds stops the others from being served.
    """
    loaded: list[tuple[SpecSource, str, ParsedSpec]] = []
    errors: list[str] = []
    embedded = not sources
    if embedded:
        key, parsed = load_parsed(embedded_default_bytes(), DEFAULT_SPEC, cache_dir, limits)
        loaded.append((SpecSource(Path(DEFAULT_SPEC), "demo"), key, parsed))
    for src in sources:
        try:
            raw = read_spec_file(src.path, max_spec_bytes)
        except SpecError as exc:
            errors.append(f"{src.path}: {exc}")
            log.error("openapi: skipping spec %s: %s", src.path, exc)
            continue
        try:
            key, parsed = load_parsed(raw, src.path.name, cache_dir, limits)
        except SpecError as exc:
            errors.append(f"{src.path}: {exc}")
            log.error("openapi: skipping spec %s: %s", src.path, exc)
            continue
        except Exception as exc:  # a case the checks above missed: still this spec's fault alone
            reason = f"cannot be indexed ({type(exc).__name__}: {' '.join(str(exc).split())[:200]})"
            errors.append(f"{src.path}: {reason}")
            log.error("openapi: skipping spec %s: %s", src.path, reason)
            continue
        loaded.append((src, key, parsed))
    names: set[str] = set()
    apis: list[ApiInfo] = []
    operations: list[Operation] = []
    prefix = len(loaded) > 1
    for src, key, parsed in loaded:
        base = src.name or slug(parsed.title) or slug(src.path.stem) or "api"
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.add(name)
        for op in parsed.operations:
            op.api = name
            if prefix:
                op.operation_id = f"{name}:{op.operation_id}"
            operations.append(op)
        apis.append(ApiInfo(name, parsed.title, parsed.version, parsed.spec_version,
                            str(src.path), len(parsed.operations), key.split("-")[0]))
    return Catalog(operations, apis, errors, embedded)
