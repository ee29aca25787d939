"""What the two HTTP transports share: the HTTP client, connect retries, error bodies.

Requests go through mcpkit's own pooled HTTP/1.1 client (``mcpkit.httpclient``, a small part of
httpx's CPU per request); with OAuth, whose flows are written as an ``httpx.Auth``, through httpx.
Both answer with the same few things the transports read (status, headers, ``aiter_bytes``,
``aread``, ``aclose``), and fail with one of :data:`HTTP_ERRORS`.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any

import httpx
import msgspec
import trio

from ...httpclient import HttpClient
from ...httpclient.errors import HttpClientError, HttpConnectError
from ...protocol import jsonrpc
from ..errors import ConnectionClosed, ConnectionFailed, HttpError, McpError, from_rpc

log = logging.getLogger("mcpkit.client")
_MAX_ERROR_BODY = 64 * 1024
#: what a request or a streamed body may fail with, from either client
HTTP_ERRORS = (httpx.HTTPError, HttpClientError, OSError, trio.BrokenResourceError)


class _Streamed:
    """An answer of mcpkit's client whose body is read as it arrives; ``aclose`` ends it (its
    connection goes back to the pool only when the body was read to the end)."""

    def __init__(self, resp: Any, stack: contextlib.AsyncExitStack) -> None:
        self._resp = resp
        self._stack = stack
        self.status_code = resp.status_code
        self.reason_phrase = resp.reason_phrase
        self.headers = resp.headers

    def aiter_bytes(self) -> Any:
        return self._resp.aiter_bytes()

    async def aread(self) -> bytes:
        return await self._resp.aread()

    async def aclose(self) -> None:
        stack, self._stack = self._stack, None
        if stack is not None:
            await stack.aclose()


class HttpBase:
    def __init__(self, url: str, *, headers: dict[str, str] | None = None, auth_token: str | None = None,
                 connect_timeout: float = 10.0, retries: int = 2, backoff: float = 0.25,
                 verify: Any = True, oauth: Any = None) -> None:
        self.url = url
        self.extra_headers = dict(headers or {})
        if auth_token:
            self.extra_headers["Authorization"] = f"Bearer {auth_token}"
        self.retries = retries
        self.backoff = backoff
        self.protocol_version: str | None = None
        self._http: Any
        self._own: HttpClient | None = None
        if oauth is None:
            self._own = HttpClient(timeout=None, connect_timeout=connect_timeout, follow_redirects=True, verify=verify,
                                   max_connections=100, max_keepalive=20)
        else:
            self._http = httpx.AsyncClient(
                timeout=httpx.Timeout(connect=connect_timeout, read=None, write=connect_timeout, pool=None),
                verify=verify, follow_redirects=True, auth=oauth,
                limits=httpx.Limits(max_connections=100, max_keepalive_connections=20))

    async def open_stream(self, method: str, url: str, headers: dict[str, str],
                          content: bytes | None = None) -> Any:
        """Send one request and return the streaming response; retry when it never left.

        Only failures to connect are retried: the server never saw those, so even a tool call is
        safe to send again. Anything after the request went out is not retried.
        """
        delay = self.backoff
        for attempt in range(self.retries + 1):
            try:
                if self._own is not None:
                    return await self._open_own(method, url, headers, content)
                request = self._http.build_request(method, url, headers=headers, content=content)
                return await self._http.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout, HttpConnectError) as exc:
                if attempt == self.retries:
                    raise ConnectionFailed(f"could not connect to {url}: {_reason(exc)}") from None
                log.debug("connect to %s failed (%s); retrying in %.2fs", url, exc, delay)
                await trio.sleep(delay)
                delay *= 2
            except HTTP_ERRORS as exc:
                raise ConnectionClosed(f"{method} {url} failed: {_reason(exc)}") from None
        raise AssertionError("unreachable")

    async def _open_own(self, method: str, url: str, headers: dict[str, str], content: bytes | None) -> _Streamed:
        assert self._own is not None
        stack = contextlib.AsyncExitStack()
        try:
            resp = await stack.enter_async_context(self._own.stream(method, url, headers=headers, content=content))
        except BaseException:
            await stack.aclose()
            raise
        return _Streamed(resp, stack)

    async def delete_session(self, url: str, headers: dict[str, str]) -> None:
        """DELETE the session (best effort: failures are ignored)."""
        try:
            if self._own is not None:
                await self._own.request("DELETE", url, headers=headers)
            else:
                resp = await self._http.delete(url, headers=headers)
                await resp.aclose()
        except HTTP_ERRORS:
            pass

    async def error_from(self, resp: Any) -> McpError:
        """The exception for a non-success response: its JSON-RPC error when it has one."""
        body = await read_capped(resp, _MAX_ERROR_BODY)
        try:
            msg = jsonrpc.decode(body)
        except jsonrpc.ProtocolError:
            msg = None
        if isinstance(msg, jsonrpc.Message) and msg.error is not msgspec.UNSET:
            err: McpError = from_rpc(msg.error.code, msg.error.message,
                                     None if msg.error.data is msgspec.UNSET else msg.error.data)
            err.http_status = resp.status_code
        else:
            snippet = body[:200].decode("utf-8", "replace").strip()
            reason = resp.reason_phrase or ""
            text = f"HTTP {resp.status_code} {reason}".strip() + (f": {snippet}" if snippet else "")
            err = HttpError(resp.status_code, text)
        err.www_authenticate = resp.headers.get("www-authenticate")
        return err

    async def close_http(self) -> None:
        with trio.CancelScope(shield=True):
            if self._own is not None:
                await self._own.aclose()
            else:
                await self._http.aclose()


async def read_capped(resp: Any, limit: int) -> bytes:
    out = b""
    try:
        async for chunk in resp.aiter_bytes():
            out += chunk
            if len(out) >= limit:
                break
    except HTTP_ERRORS:
        pass
    return out[:limit]


def content_type(resp: Any) -> str:
    return resp.headers.get("content-type", "").split(";")[0].strip().lower()


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]
