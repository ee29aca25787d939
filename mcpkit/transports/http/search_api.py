"""``POST /mcp/search``: a small REST face ("MCP v2" search API) over one search tool.

The request goes through the same dispatcher as any ``tools/call`` (argument checks, timeout,
error handling); this module only translates HTTP in and out.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import msgspec

from ...protocol.connection import RequestReceived
from ...protocol.versions import features
from ...server.app import App
from ...server.auth import FORBIDDEN
from ...server.dispatch import Dispatcher

log = logging.getLogger("mcpkit.http.search")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_BODY = 1024
_SEARCH_META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}


class SearchError(Exception):
    def __init__(self, status: int, code: str, message: str, retry_after: int | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.retry_after = status, code, message, retry_after
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.retry_after is not None:
            err["retry_after"] = self.retry_after
        return {"error": err}


def not_configured(tool_name: str) -> SearchError:
    return SearchError(404, "NOT_FOUND", f"no search endpoint here: no loaded plugin serves the search tool "
                       f"{tool_name!r} (server setting search_tool)")


def parse_request(content_type: str | None, body: bytes) -> tuple[str, int]:
    """Validate the request; returns (query, limit) or raises SearchError."""
    if len(body) > MAX_BODY:
        raise SearchError(413, "PAYLOAD_TOO_LARGE", f"the request body must be at most {MAX_BODY} bytes")
    if not content_type or content_type.split(";")[0].strip().lower() != "application/json":
        raise SearchError(400, "INVALID_CONTENT_TYPE", "Content-Type must be application/json")
    try:
        data = msgspec.json.decode(body)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        raise SearchError(400, "MALFORMED_JSON", "the body is not valid JSON (UTF-8)") from None
    if not isinstance(data, dict):
        raise SearchError(400, "MALFORMED_JSON", "the body must be a JSON object")
    query = data.get("query")
    if not isinstance(query, str) or not 3 <= len(query.strip()) <= 500:
        raise SearchError(400, "INVALID_QUERY", "query is required: a string of 3 to 500 characters (after trimming)")
    if _CONTROL.search(query):
        raise SearchError(400, "INVALID_QUERY", "query must be one line of text, without control characters")
    limit = data.get("limit", 5)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 20:
        raise SearchError(400, "INVALID_LIMIT", "limit must be an integer from 1 to 20")
    return query.strip(), limit


class SearchApi:
    def __init__(self, app: App) -> None:
        self.app = app
        self.tool_name = app.settings.search_tool
        self.dispatcher = Dispatcher(app)

    def _arguments(self, query: str, limit: int) -> dict[str, Any]:
        tool = self.app.registry.tools.get(self.tool_name)
        if tool is None:
            raise not_configured(self.tool_name)
        props = tool.input_schema.get("properties", {})
        key = next((k for k in ("query", "term", "q") if k in props), None)
        if key is None:
            raise SearchError(500, "INTERNAL_ERROR", "the configured search tool takes no query")
        args: dict[str, Any] = {key: query}
        if "limit" in props:
            args["limit"] = limit
        return args

    async def search(self, query: str, limit: int, request_id: str, principal: Any = None) -> dict[str, Any]:
        params = {"name": self.tool_name, "arguments": self._arguments(query, limit), "_meta": _SEARCH_META}
        raw = msgspec.json.encode(params)
        req = RequestReceived(request_id, "tools/call", msgspec.Raw(raw), features("2026-07-28"), None, {}, {}, None,
                              principal)
        answer = await self.dispatcher.answer(req, _NoPeer())
        if answer is None:  # cancelled: the client went away
            raise SearchError(503, "SEARCH_ERROR", "the search was cancelled; try again", retry_after=1)
        error = answer.error
        if error is not None and error.code == FORBIDDEN:
            data = error.data if isinstance(error.data, dict) else {}
            needed = " ".join(data.get("requiredScopes") or [])
            raise SearchError(403, "FORBIDDEN", f"the token lacks scope {needed}",
                              headers={"WWW-Authenticate": f'Bearer error="insufficient_scope", scope="{needed}"'})
        if error is not None:
            raise SearchError(503, "SEARCH_ERROR", "the search failed; try again", retry_after=1)
        result = msgspec.to_builtins(answer.result)
        if result.get("isError"):
            text = " ".join(c.get("text", "") for c in result.get("content", []))
            log.warning("search tool %s reported: %s", self.tool_name, text)
            raise SearchError(503, "SEARCH_ERROR", "the search failed; try again", retry_after=1)
        structured = result.get("structuredContent")
        items = next((v for v in structured.values() if isinstance(v, list)), []) if isinstance(structured, dict) else []
        return {"results": items[:limit]}


class _NoPeer:
    async def notify(self, data: bytes) -> None:
        return None

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        raise RuntimeError("no client to ask")


def install(quart: Any, app: App) -> None:
    """Add the route to the Quart application."""
    from quart import request

    api = SearchApi(app)

    @quart.route("/mcp/search", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def mcp_search() -> Any:
        started = time.perf_counter()
        rid = request.scope.get("mcpkit.request_id", "")
        if app.registry.tools.get(api.tool_name) is None:
            return not_configured(api.tool_name).body(), 404
        if request.method != "POST":
            return {"error": {"code": "METHOD_NOT_ALLOWED", "message": "use POST"}}, 405, {"Allow": "POST, OPTIONS"}
        version = request.headers.get("X-MCP-Version")
        if version is not None and version.strip() != "2":
            log.warning("request_id=%s X-MCP-Version %r (this endpoint speaks 2)", rid, version)
        query, count, status = "", 0, 200
        try:
            body = await request.get_data(cache=False)
            query, limit = parse_request(request.headers.get("Content-Type"), body)
            out = await api.search(query, limit, rid, request.scope.get("mcpkit.principal"))
            count = len(out["results"])
            out["took_ms"] = round((time.perf_counter() - started) * 1000, 2)
            response = out, 200
        except SearchError as exc:
            status = exc.status
            headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after is not None else {}
            headers.update(exc.headers)
            response = exc.body(), exc.status, headers
        except Exception:
            log.exception("request_id=%s search failed", rid)
            status = 500
            response = {"error": {"code": "INTERNAL_ERROR", "message": "internal error"}}, 500
        log.info("search request_id=%s query=%r results=%d status=%d duration_ms=%.1f",
                 rid, query[:80], count, status, (time.perf_counter() - started) * 1000)
        return response
