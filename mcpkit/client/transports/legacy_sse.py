"""The 2024-11-05 HTTP+SSE transport: a GET stream for everything the server says, and POSTs
to the URL its first ``endpoint`` event names."""

from __future__ import annotations

from typing import Any
from urllib.parse import urljoin, urlsplit

import trio

from ...protocol.jsonrpc import RequestId
from ..errors import BadResponse, ConnectionClosed, ConnectionFailed
from .._sse import SseDecoder
from . import Deliver, Failure, deliver_frame
from ._httpbase import HTTP_ERRORS, HttpBase, content_type


class LegacySseTransport(HttpBase):
    kind = "sse"

    def __init__(self, url: str, *, endpoint_timeout: float = 10.0, **kwargs: Any) -> None:
        super().__init__(url, **kwargs)
        self.endpoint_timeout = endpoint_timeout
        self.post_url: str | None = None
        self._closing = False

    def describe(self) -> dict[str, Any]:
        return {"transport": "sse", "url": self.url, "endpoint": self.post_url}

    async def start(self, nursery: trio.Nursery, deliver: Deliver) -> None:
        await nursery.start(self._stream, deliver)

    async def _stream(self, deliver: Deliver, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        headers = {"Accept": "text/event-stream", **self.extra_headers}
        with trio.move_on_after(self.endpoint_timeout) as waiting:
            resp = await self.open_stream("GET", self.url, headers)
        if waiting.cancelled_caught:
            raise ConnectionFailed(f"GET {self.url} did not answer within {self.endpoint_timeout:g}s")
        try:
            if resp.status_code != 200 or content_type(resp) != "text/event-stream":
                err = await self.error_from(resp)
                failed = ConnectionFailed(f"GET {self.url} did not open an SSE stream ({err.message})")
                failed.http_status, failed.www_authenticate = resp.status_code, err.www_authenticate
                raise failed
            decoder = SseDecoder()
            started = False
            deadline = trio.current_time() + self.endpoint_timeout
            chunks = resp.aiter_bytes().__aiter__()
            while True:
                try:
                    if started:
                        chunk = await chunks.__anext__()
                    else:
                        with trio.fail_at(deadline):
                            chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                except trio.TooSlowError:
                    raise ConnectionFailed(f"{self.url} sent no endpoint event within "
                                           f"{self.endpoint_timeout:g}s") from None
                except HTTP_ERRORS:
                    break
                for event in decoder.feed(chunk):
                    if event.event == "endpoint":
                        self.post_url = self._endpoint(event.data.strip())
                        if not started:
                            started = True
                            task_status.started()
                    elif event.event == "message" and event.data.strip():
                        deliver_frame(event.data.encode(), deliver)
            if not started:
                raise ConnectionFailed(f"{self.url} closed the SSE stream before naming an endpoint")
            if not self._closing:
                deliver(Failure(None, ConnectionClosed("the server closed the SSE stream")))
        finally:
            with trio.CancelScope(shield=True):
                await resp.aclose()

    def _endpoint(self, data: str) -> str:
        url = urljoin(self.url, data)
        if urlsplit(url)[:2] != urlsplit(self.url)[:2]:
            raise BadResponse(f"the endpoint event names another origin: {url}")
        return url

    async def send(self, frame: bytes, *, request_id: RequestId | None = None,
                   headers: dict[str, str] | None = None, stateless: bool = False) -> None:
        if self.post_url is None:
            raise ConnectionClosed("the SSE stream is not open")
        h = {"Content-Type": "application/json", **self.extra_headers}
        resp = await self.open_stream("POST", self.post_url, h, frame)
        try:
            if resp.status_code >= 300:
                raise await self.error_from(resp)
        finally:
            await resp.aclose()

    def abort(self, request_id: RequestId) -> bool:
        return False

    async def aclose(self) -> None:
        self._closing = True
        await self.close_http()
