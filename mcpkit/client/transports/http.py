"""Streamable HTTP, both eras: one POST per message, answers as JSON or an SSE stream.

Handshake era: the server's ``Mcp-Session-Id`` is kept and sent back, a standalone GET stream
carries server-initiated messages, and a POST stream that ends early is resumed with GET and
``Last-Event-ID`` after the server's ``retry`` delay. Stateless era: each request owns its stream,
and closing it is how a request is cancelled.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from ...protocol.jsonrpc import RequestId
from ..errors import BadResponse, ConnectionClosed, McpError, SessionExpired
from .._sse import SseDecoder
from . import Deliver, Failure, deliver_frame
from ._httpbase import HTTP_ERRORS, HttpBase, content_type

log = logging.getLogger("mcpkit.client")
_JSON_BODY_LIMIT = 64 * 1024 * 1024


class HttpTransport(HttpBase):
    kind = "http"

    def __init__(self, url: str, *, resume_attempts: int = 5, default_retry_ms: int = 1000,
                 **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.session_id: str | None = None
        self.resume_attempts = resume_attempts
        self.default_retry_ms = default_retry_ms
        self._nursery: trio.Nursery | None = None
        self._deliver: Deliver | None = None
        self._scopes: dict[RequestId, trio.CancelScope] = {}
        self._closing = False

    def describe(self) -> dict[str, Any]:
        return {"transport": "http", "url": self.url, "session": self.session_id}

    async def start(self, nursery: trio.Nursery, deliver: Deliver) -> None:
        self._nursery, self._deliver = nursery, deliver

    def _headers(self, extra: dict[str, str] | None, accept: str) -> dict[str, str]:
        headers = {"Accept": accept, **self.extra_headers}
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        if self.session_id:
            headers["Mcp-Session-Id"] = self.session_id
        if extra:
            headers.update(extra)
        return headers

    async def send(self, frame: bytes, *, request_id: RequestId | None = None,
                   headers: dict[str, str] | None = None, stateless: bool = False) -> None:
        h = self._headers(headers, "application/json, text/event-stream")
        h["Content-Type"] = "application/json"
        if request_id is None:
            await self._post_one_way(frame, h)
            return
        assert self._nursery is not None
        scope = trio.CancelScope()
        self._scopes[request_id] = scope
        self._nursery.start_soon(self._request, frame, request_id, h, stateless, scope)

    def abort(self, request_id: RequestId) -> bool:
        scope = self._scopes.pop(request_id, None)
        if scope is not None:
            scope.cancel()
        return True

    async def _post_one_way(self, frame: bytes, headers: dict[str, str]) -> None:
        resp = await self.open_stream("POST", self.url, headers, frame)
        try:
            if resp.status_code in (200, 202, 204):
                return
            if resp.status_code == 404 and self.session_id:
                raise SessionExpired(f"the server does not know session {self.session_id}")
            raise await self.error_from(resp)
        finally:
            await resp.aclose()

    async def _request(self, frame: bytes, rid: RequestId, headers: dict[str, str], stateless: bool,
                       scope: trio.CancelScope) -> None:
        assert self._deliver is not None
        with scope:
            try:
                await self._exchange(frame, rid, headers, stateless)
            except McpError as exc:
                self._deliver(Failure(rid, exc))
            except HTTP_ERRORS as exc:
                self._deliver(Failure(rid, ConnectionClosed(f"the connection failed: {exc or type(exc).__name__}")))
        self._scopes.pop(rid, None)

    async def _exchange(self, frame: bytes, rid: RequestId, headers: dict[str, str], stateless: bool) -> None:
        assert self._deliver is not None
        resp = await self.open_stream("POST", self.url, headers, frame)
        try:
            if self.session_id is None and not stateless:
                self.session_id = resp.headers.get("mcp-session-id") or None
            status = resp.status_code
            if status == 404 and self.session_id and not stateless:
                raise SessionExpired(f"the server does not know session {self.session_id}")
            if status >= 300:
                err = await self.error_from(resp)
                self._deliver(Failure(rid, err))
                return
            if status == 202:
                raise BadResponse("the server accepted the request without answering it")
            kind = content_type(resp)
            if kind == "application/json":
                body = await resp.aread()
                if len(body) > _JSON_BODY_LIMIT:
                    raise BadResponse("the response body is over 64 MiB")
                deliver_frame(body, self._deliver, rid)
            elif kind == "text/event-stream":
                decoder = SseDecoder()
                answered = await self._pump(resp, decoder, rid)
                await resp.aclose()
                if not answered:
                    await self._resume(decoder, rid, stateless)
            else:
                raise BadResponse(f"unexpected Content-Type {kind or 'none'!r} in an answer")
        finally:
            await resp.aclose()

    async def _pump(self, resp: Any, decoder: SseDecoder, rid: RequestId | None) -> bool:
        """Deliver the stream's messages; True once the answer to ``rid`` went by."""
        assert self._deliver is not None
        answered = False

        def deliver(item: Any) -> None:
            nonlocal answered
            if rid is not None and getattr(item, "id", None) == rid and not isinstance(item, Failure) and item.is_response:
                answered = True
            self._deliver(item)  # type: ignore[misc]

        try:
            async for chunk in resp.aiter_bytes():
                for event in decoder.feed(chunk):
                    if event.event == "message" and event.data.strip():
                        deliver_frame(event.data.encode(), deliver, rid)
                if answered:
                    return True
        except HTTP_ERRORS:
            pass  # the stream broke: the caller resumes or reports
        return answered

    async def _resume(self, decoder: SseDecoder, rid: RequestId, stateless: bool) -> None:
        """Reconnect with GET + Last-Event-ID until the answer arrives (handshake era only)."""
        assert self._deliver is not None
        for _ in range(self.resume_attempts if not stateless else 0):
            if decoder.last_id is None:
                break
            await trio.sleep((decoder.retry_ms if decoder.retry_ms is not None else self.default_retry_ms) / 1000)
            headers = self._headers({"Last-Event-ID": decoder.last_id}, "text/event-stream")
            resp = await self.open_stream("GET", self.url, headers)
            try:
                if resp.status_code != 200 or content_type(resp) != "text/event-stream":
                    break
                if await self._pump(resp, decoder, rid):
                    return
            finally:
                await resp.aclose()
        self._deliver(Failure(rid, ConnectionClosed("the response stream ended before the answer arrived")))

    async def start_listening(self) -> None:
        """Open the standalone GET stream for server-initiated messages (handshake era).

        Returns once the server has answered the GET, so nothing it sends there right after
        (say, during the next tool call) can be missed.
        """
        assert self._nursery is not None
        await self._nursery.start(self._listen)

    async def _listen(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        decoder = SseDecoder()
        failures = 0
        started = False
        try:
            while not self._closing and failures < 5:
                headers = self._headers({"Last-Event-ID": decoder.last_id} if decoder.last_id else None,
                                        "text/event-stream")
                try:
                    resp = await self.open_stream("GET", self.url, headers)
                except McpError:
                    failures += 1
                    if not started:
                        return
                    await trio.sleep(self.default_retry_ms / 1000)
                    continue
                try:
                    if not started:
                        started = True
                        task_status.started()
                    if resp.status_code != 200 or content_type(resp) != "text/event-stream":
                        log.debug("no standalone stream (HTTP %s)", resp.status_code)
                        return
                    failures = 0
                    await self._pump(resp, decoder, None)
                finally:
                    await resp.aclose()
                await trio.sleep((decoder.retry_ms or self.default_retry_ms) / 1000)
        finally:
            if not started:
                task_status.started()

    async def aclose(self) -> None:
        self._closing = True
        for scope in list(self._scopes.values()):
            scope.cancel()
        with trio.CancelScope(shield=True):
            if self.session_id:
                with trio.move_on_after(2):
                    await self.delete_session(self.url, self._headers(None, "application/json"))
            await self.close_http()
