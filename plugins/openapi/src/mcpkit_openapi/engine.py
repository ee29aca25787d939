"""The plugin's engine: settings, catalog + searcher, and the two tool operations.

Plain Python, no mcpkit import: ``plugin.py`` wires it into the server.
"""

from __future__ import annotations

import difflib
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bounds import DEFAULT_MAX_EXPANDED_BYTES, DEFAULT_MAX_NESTING, DEFAULT_MAX_OPERATION_BYTES, Limits
from .catalog import Catalog, SpecSource, build_catalog, parse_sources
from .lexical import query_has_terms, summary_of
from .ranking import MODES, Searcher, hybrid_available
from .spec import MAX_SPEC_BYTES, Operation

log = logging.getLogger("mcpkit_openapi")

KNOWN_SETTINGS = {"specs", "cache_dir", "ranking", "model", "timeout", "max_spec_mb", "max_nesting",
                  "max_operation_kb", "max_expanded_mb"}
MODEL_KEYS = {"path", "pooling", "query_prefix", "document_prefix", "max_tokens"}
DEFAULT_TIMEOUT = 5.0
EMBEDDED_NOTE = (
    "No specs configured: these results come from the embedded demo issue-tracker API. "
    "Set [plugins.openapi] specs = [\"path/to/openapi.json\"] to search your own APIs."
)


class SettingsError(ValueError):
    """A malformed [plugins.openapi] table."""


class QueryError(ValueError):
    """A query the engine cannot search (e.g. nothing but punctuation)."""


class UnknownOperation(LookupError):
    def __init__(self, operation_id: str, suggestions: list[str]) -> None:
        self.operation_id = operation_id
        self.suggestions = suggestions
        hint = f" Closest ids: {', '.join(suggestions)}." if suggestions else ""
        super().__init__(f"Unknown operation id {operation_id!r}.{hint} Use search_ids to find operation ids.")


@dataclass
class Settings:
    specs: list[SpecSource] = field(default_factory=list)
    cache_dir: Path | None = None
    ranking: str = "lexical"
    timeout: float = DEFAULT_TIMEOUT
    max_spec_bytes: int = MAX_SPEC_BYTES
    model: Any = None  # embed.ModelSpec of a configured model directory; None: the packaged one
    limits: Limits = field(default_factory=Limits)

    @classmethod
    def from_config(cls, config: dict[str, Any] | None, default_cache: Path | None = None) -> Settings:
        """Validate a ``[plugins.openapi]`` table (relative paths against the current directory)."""
        config = dict(config or {})
        unknown = sorted(set(config) - KNOWN_SETTINGS)
        if unknown:
            log.warning("openapi: ignoring unknown setting(s) %s", ", ".join(unknown))
        try:
            specs = parse_sources(config.get("specs"))
        except ValueError as exc:
            raise SettingsError(f"[plugins.openapi] specs: {exc}") from None
        model_setting = config.get("model")
        # lexical unless a model is named: the packaged model's install (~180 MB) is over the
        # plugin's budget, and on APIs nobody tuned for it ranks no better (eval/README.md)
        default_ranking = "hybrid" if model_setting is not None else "lexical"
        ranking = config.get("ranking", default_ranking)
        if ranking not in MODES:
            raise SettingsError(f"[plugins.openapi] ranking must be one of {', '.join(MODES)}, got {ranking!r}")
        if ranking == "hybrid" and not hybrid_available(own_model=model_setting is not None):
            raise SettingsError(
                "[plugins.openapi] ranking = 'hybrid' needs onnxruntime, numpy and the model package: "
                "pip install 'mcpkit-openapi[embeddings]' "
                "(or use ranking = 'lexical')"
            )
        model = None
        if model_setting is not None:
            if ranking == "lexical":
                log.warning("openapi: [plugins.openapi] model is not used with ranking = 'lexical'")
            else:
                model = parse_model(model_setting)
        timeout = config.get("timeout", DEFAULT_TIMEOUT)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            raise SettingsError(f"[plugins.openapi] timeout must be a positive number of seconds, got {timeout!r}")
        cache = config.get("cache_dir")
        if cache is not None and not isinstance(cache, str):
            raise SettingsError(f"[plugins.openapi] cache_dir must be a path string, got {cache!r}")
        cache_dir = Path(cache).expanduser().absolute() if cache else default_cache
        max_mb = _number(config, "max_spec_mb", MAX_SPEC_BYTES / 1048576, 4096, "a number of MiB")
        nesting = _number(config, "max_nesting", DEFAULT_MAX_NESTING, 10_000, "a number of levels")
        if not isinstance(nesting, int):
            raise SettingsError(f"[plugins.openapi] max_nesting must be a whole number of levels, got {nesting!r}")
        op_kb = _number(config, "max_operation_kb", DEFAULT_MAX_OPERATION_BYTES / 1024, 1 << 20, "a number of KB")
        expanded_mb = _number(config, "max_expanded_mb", DEFAULT_MAX_EXPANDED_BYTES / 1048576, 1 << 16, "a number of MiB")
        limits = Limits(nesting, int(op_kb * 1024), int(expanded_mb * 1048576))
        return cls(specs, cache_dir, ranking, float(timeout), int(max_mb * 1048576), model, limits)


def _number(config: dict[str, Any], key: str, default: float, most: float, what: str) -> Any:
    """A positive number setting of at most ``most``."""
    value = config.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= most:
        raise SettingsError(f"[plugins.openapi] {key} must be {what} in (0, {most:g}], got {value!r}")
    return value


def parse_model(value: Any) -> Any:
    """The ``model`` setting: a model directory path, or a table ``{path, pooling,
    query_prefix, document_prefix, max_tokens}``; checked now, loaded on first use."""
    from .embed import ModelError, model_from_dir

    where = "[plugins.openapi] model"
    table = {"path": value} if isinstance(value, str) else value
    if not isinstance(table, dict) or not isinstance(table.get("path"), str) or not table["path"]:
        raise SettingsError(f"{where} must be a model directory path or a table with a 'path', got {value!r}")
    unknown = sorted(set(table) - MODEL_KEYS)
    if unknown:
        raise SettingsError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(MODEL_KEYS))})")
    for key in ("query_prefix", "document_prefix", "pooling"):
        if key in table and not isinstance(table[key], str):
            raise SettingsError(f"{where}.{key} must be a string, got {table[key]!r}")
    max_tokens = table.get("max_tokens", 128)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 8 <= max_tokens <= 8192:
        raise SettingsError(f"{where}.max_tokens must be an integer in [8, 8192], got {max_tokens!r}")
    try:
        return model_from_dir(Path(table["path"]).expanduser().absolute(), pooling=table.get("pooling"),
                              query_prefix=table.get("query_prefix", ""),
                              document_prefix=table.get("document_prefix", ""), max_tokens=max_tokens)
    except ModelError as exc:
        raise SettingsError(f"{where}: {exc}") from None


@dataclass
class Hit:
    operation_id: str
    summary: str
    similarity_score: float
    method: str
    path: str


class Engine:
    """Loads the catalog once and answers search / describe requests (thread-safe reads)."""

    def __init__(self, settings: Settings) -> None:
        t0 = time.perf_counter()
        self.settings = settings
        self.catalog: Catalog = build_catalog(settings.specs, settings.cache_dir, settings.max_spec_bytes,
                                              settings.limits)
        self.searcher = Searcher(self.catalog.operations, settings.ranking, settings.cache_dir,
                                 model=settings.model)
        self.ids = [op.operation_id for op in self.catalog.operations]
        self._lower = {i.lower(): i for i in self.ids}
        self._suffix: dict[str, list[str]] = {}
        for op in self.catalog.operations:
            if op.operation_id != op.operation_id.split(":", 1)[-1]:
                self._suffix.setdefault(op.operation_id.split(":", 1)[1], []).append(op.operation_id)
        log.info(
            "openapi: event=index_ready apis=%d operations=%d errors=%d ranking=%s embedded_default=%s build_ms=%.0f",
            len(self.catalog.apis), len(self.ids), len(self.catalog.errors), settings.ranking,
            self.catalog.embedded_default, (time.perf_counter() - t0) * 1000,
        )

    @property
    def note(self) -> str | None:
        """A remark for the model when results do not come from the user's own specs, or are
        ranked without the embedding model that was asked for."""
        notes = []
        if self.catalog.embedded_default:
            notes.append(EMBEDDED_NOTE)
        elif not self.catalog.operations and self.catalog.errors:
            notes.append("No configured spec could be loaded: " + "; ".join(self.catalog.errors))
        if self.searcher.model_error:
            notes.append(f"The embedding model could not be used, so results are ranked lexically: "
                         f"{self.searcher.model_error}")
        return " ".join(notes) or None

    def search(self, query: str, limit: int = 5) -> list[Hit]:
        """Most relevant operations for a natural-language query, best first."""
        t0 = time.perf_counter()
        try:
            if not query.strip() or not query_has_terms(query):
                raise QueryError("the query has no searchable words; describe the task, e.g. 'close an issue'")
            results = self.searcher.search(query, limit)
            hits = []
            for doc, score in results:
                op = self.catalog.operations[doc]
                hits.append(Hit(op.operation_id, summary_of(op), round(score, 4), op.method, op.path))
        except Exception as exc:
            log.info("openapi: event=search_ids query=%s status=error error=%s latency_ms=%.2f",
                     _q(query), json.dumps(str(exc)), (time.perf_counter() - t0) * 1000)
            raise
        log.info("openapi: event=search_ids query=%s limit=%d results=%d latency_ms=%.2f ranking=%s",
                 _q(query), limit, len(hits), (time.perf_counter() - t0) * 1000, self.searcher.effective_mode)
        return hits

    def resolve_id(self, operation_id: str) -> Operation:
        key = operation_id.strip()
        op = self.catalog.by_id.get(key)
        if op is None and key.lower() in self._lower:
            op = self.catalog.by_id[self._lower[key.lower()]]
        if op is None and len(self._suffix.get(key, [])) == 1:  # unprefixed id, unambiguous
            op = self.catalog.by_id[self._suffix[key][0]]
        if op is None:
            close = difflib.get_close_matches(key, self.ids, n=5, cutoff=0.5)
            if not close:
                lowered = {i.lower(): i for i in self.ids}
                close = [lowered[c] for c in difflib.get_close_matches(key.lower(), list(lowered), n=5, cutoff=0.3)]
            raise UnknownOperation(operation_id, close)
        return op

    def describe(self, operation_id: str) -> dict[str, Any]:
        """What a caller needs to invoke one operation, compact enough for an LLM context."""
        op = self.resolve_id(operation_id)
        out: dict[str, Any] = {
            "operation_id": op.operation_id,
            "method": op.method,
            "path": op.path,
            "summary": op.summary,
            "description": op.description,
            "tags": op.tags,
            "parameters": op.parameters,
            "request_body": op.request_body,
            "responses": op.responses,
        }
        if len(self.catalog.apis) > 1 or self.catalog.embedded_default:
            out["api"] = op.api
        if op.deprecated:
            out["deprecated"] = True
        if op.note:
            out["note"] = op.note
        return out


def _q(query: str, limit: int = 120) -> str:
    return json.dumps(query if len(query) <= limit else query[:limit] + "…", ensure_ascii=False)
