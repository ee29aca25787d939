"""mcpkit wiring: the ``search_ids`` and ``get_operation`` tools and the start-up index build.

Configuration (``[plugins.openapi]``): ``specs``, ``cache_dir``, ``ranking``, ``model``,
``timeout``, ``max_spec_mb``; see the README. The engine (``engine.py`` and below) has no mcpkit dependency.
"""

import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator
from typing import Annotated, Any

import mcpkit
import msgspec

from .engine import Engine, QueryError, Settings, SettingsError, UnknownOperation

log = logging.getLogger("mcpkit_openapi")

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


class OperationMatch(msgspec.Struct):
    operation_id: str
    summary: str
    similarity_score: float
    method: str
    path: str


class SearchIdsResult(msgspec.Struct, omit_defaults=True):
    operations: list[OperationMatch]
    note: str | None = None


class Parameter(msgspec.Struct, omit_defaults=True):
    name: str
    in_: str = msgspec.field(name="in")
    required: bool = False
    schema: Any = None
    description: str | None = None
    deprecated: bool = False


class RequestBody(msgspec.Struct, omit_defaults=True):
    content_types: list[str]
    required: bool = False
    schema: Any = None
    description: str | None = None


class OperationDetails(msgspec.Struct, omit_defaults=True):
    operation_id: str
    method: str
    path: str
    summary: str
    description: str
    tags: list[str]
    parameters: list[Parameter]
    request_body: RequestBody | None
    responses: dict[str, str]
    api: str | None = None
    deprecated: bool = False
    note: str | None = None


def _settings(config: dict[str, Any] | None) -> Settings:
    return Settings.from_config(config, default_cache=mcpkit.data_dir() / "openapi-cache")


def _engine(config: dict[str, Any] | None) -> Engine:
    """The engine for this configuration, built on first use (normally by the lifespan)."""
    key = json.dumps(config or {}, sort_keys=True, default=str)
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = Engine(_settings(config))
        return engine


def make_tools(config: dict[str, Any] | None) -> list[Any]:
    """Build the two tools for one ``[plugins.openapi]`` table (validated here)."""
    settings = _settings(config)
    read_only = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}

    def search_ids(
        query: Annotated[str, msgspec.Meta(
            min_length=1, max_length=500,
            description="The task in a few words, e.g. 'move this issue to done'; use the API's own "
                        "terms when you know them ('transition', 'webhook', 'workspace')")],
        limit: Annotated[int, msgspec.Meta(ge=1, le=20, description="How many operation ids to return (1-20)")] = 5,
    ) -> SearchIdsResult:
        """Find which API operation does a task: answers a natural-language query with the most
        relevant operation ids of the configured OpenAPI specs, best first.

        Input: `query` (1-500 characters, a task described in plain words) and optional `limit`
        (1-20, default 5). Output: `{operations: [{operation_id, summary, similarity_score,
        method, path}]}` where similarity_score is in 0-1 (higher is closer). When several APIs
        are loaded, ids carry the API name as a prefix (`github:issues/update`).
        Then call get_operation with an id to learn its parameters and request body.
        Results match by words and by meaning; the API's own terms (its resource names and
        verbs, as seen in earlier results' summaries and paths) match best. If no result fits,
        search again with other words or the product's name for the thing.

        Example: search_ids(query="move this issue to done", limit=2) ->
        {"operations": [{"operation_id": "transitionIssue", "summary": "Move an issue to another
        status", "similarity_score": 0.51, "method": "POST", "path": "/issues/{issueId}/transitions"},
        {"operation_id": "archiveProject", ...}]}
        """
        engine = _engine(config)
        try:
            hits = engine.search(query, limit)
        except QueryError as exc:
            raise mcpkit.ToolError(f"search_ids: {exc}") from None
        except Exception as exc:  # keep failures descriptive for the model
            log.exception("openapi: search_ids failed")
            raise mcpkit.ToolError(f"search_ids failed: {type(exc).__name__}: {exc}") from None
        return SearchIdsResult(
            operations=[OperationMatch(h.operation_id, h.summary, h.similarity_score, h.method, h.path) for h in hits],
            note=engine.note,
        )

    def get_operation(
        operation_id: Annotated[str, msgspec.Meta(
            min_length=1, max_length=1000, description="An operation id returned by search_ids")],
    ) -> OperationDetails:
        """Describe one API operation so it can be called: method, path, summary, description,
        parameters (name, in, required, schema), request body (content types and schema) and
        response codes. `$ref`s are resolved and deep schemas shortened; a schema cut short shows
        `"truncated": true`, and `note` says when the answer leaves anything out to stay small.

        Input: `operation_id` as returned by search_ids (e.g. "issues/update", or
        "GET /repositories/{workspace}" for operations the spec left without an id).
        An unknown id is an error that lists the closest known ids.
        """
        engine = _engine(config)
        try:
            details = engine.describe(operation_id)
        except UnknownOperation as exc:
            raise mcpkit.ToolError(str(exc)) from None
        return msgspec.convert(details, OperationDetails)

    return [
        mcpkit.tool(title="Search API operations", annotations=read_only, timeout=settings.timeout)(search_ids),
        mcpkit.tool(title="Describe an API operation", annotations=read_only, timeout=settings.timeout)(get_operation),
    ]


@contextlib.asynccontextmanager
async def _lifespan(config: dict[str, Any] | None) -> AsyncIterator[None]:
    _engine(config)  # build (or load from the cache) before the server answers requests
    yield


@mcpkit.hookimpl
def mcpkit_tools(config: dict[str, Any]) -> list[Any]:
    try:
        return make_tools(config)
    except SettingsError as exc:
        log.error("openapi: %s", exc)
        raise


@mcpkit.hookimpl
def mcpkit_lifespan(config: dict[str, Any]) -> Any:
    return _lifespan(config)
