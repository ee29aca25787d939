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

from ...protocol import jsonrpc
from ...protocol.connection import RequestReceived
from ...protocol.versions import features
from ...server.app import App
from ...server.auth import FORBIDDEN
from ...server.dispatch import Dispatcher
from .exchange import Exchange
from .wire import Headers, rest_error

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

    def header_list(self) -> Headers:
        """The answer's headers: ``Retry-After`` and what the error names."""
        headers = [(name.lower().encode(), value.encode("latin-1")) for name, value in self.headers.items()]
        if self.retry_after is not None:
            headers.append((b"retry-after", str(self.retry_after).encode()))
        return headers

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

    async def serve(self, ex: Exchange) -> None:
        """The route: ``POST /mcp/search`` (any method comes here; only POST searches)."""
        started = time.perf_counter()
        rid = ex.request_id
        if self.app.registry.tools.get(self.tool_name) is None:
            await _answer_error(ex, not_configured(self.tool_name))
            return
        if ex.method != "POST":
            await _answer_error(ex, SearchError(405, "METHOD_NOT_ALLOWED", "use POST", headers={"Allow": "POST, OPTIONS"}))
            return
        version = ex.headers.get("x-mcp-version")
        if version is not None and version.strip() != "2":
            log.warning("request_id=%s X-MCP-Version %r (this endpoint speaks 2)", rid, version)
        body = await ex.read_body(self.app.settings.max_message_bytes)  # past it: the app's 413
        query, count = "", 0
        try:
            query, limit = parse_request(ex.headers.get("content-type"), body)
            out = await self.search(query, limit, rid, ex.principal)
            count = len(out["results"])
            out["took_ms"] = round((time.perf_counter() - started) * 1000, 2)
            status, answer, headers = 200, msgspec.json.encode(out), []
        except SearchError as exc:
            status, answer, headers = exc.status, msgspec.json.encode(exc.body()), exc.header_list()
        except Exception:
            log.exception("request_id=%s search failed", rid)
            status, answer, headers = 500, rest_error("INTERNAL_ERROR", "internal error"), []
        log.info("search request_id=%s query=%r results=%d status=%d duration_ms=%.1f",
                 rid, query[:80], count, status, (time.perf_counter() - started) * 1000)
        await ex.respond(status, answer, headers)

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
        result = jsonrpc.to_plain(answer.result)
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


async def _answer_error(ex: Exchange, exc: SearchError) -> None:
    await ex.respond(exc.status, msgspec.json.encode(exc.body()), exc.header_list())
