"""What the two HTTP transports share: the httpx client, connect retries, error bodies."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import msgspec
import trio

from ...protocol import jsonrpc
from ..errors import ConnectionClosed, ConnectionFailed, HttpError, McpError, from_rpc

log = logging.getLogger("mcpkit.client")
_MAX_ERROR_BODY = 64 * 1024


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
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(connect=connect_timeout, read=None, write=connect_timeout, pool=None),
            verify=verify, follow_redirects=True, auth=oauth,
            limits=httpx.Limits(max_connections=100, max_keepalive_connections=20))

    async def open_stream(self, method: str, url: str, headers: dict[str, str],
                          content: bytes | None = None) -> httpx.Response:
        """Send one request and return the streaming response; retry when it never left.

        Only failures to connect are retried: the server never saw those, so even a tool call is
        safe to send again. Anything after the request went out is not retried.
        """
        delay = self.backoff
        for attempt in range(self.retries + 1):
            request = self._http.build_request(method, url, headers=headers, content=content)
            try:
                return await self._http.send(request, stream=True)
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                if attempt == self.retries:
                    raise ConnectionFailed(f"could not connect to {url}: {_reason(exc)}") from None
                log.debug("connect to %s failed (%s); retrying in %.2fs", url, exc, delay)
                await trio.sleep(delay)
                delay *= 2
            except httpx.HTTPError as exc:
                raise ConnectionClosed(f"{method} {url} failed: {_reason(exc)}") from None
        raise AssertionError("unreachable")

    async def error_from(self, resp: httpx.Response) -> McpError:
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
            await self._http.aclose()


async def read_capped(resp: httpx.Response, limit: int) -> bytes:
    out = b""
    try:
        async for chunk in resp.aiter_bytes():
            out += chunk
            if len(out) >= limit:
                break
    except httpx.HTTPError:
        pass
    return out[:limit]


def content_type(resp: httpx.Response) -> str:
    return resp.headers.get("content-type", "").split(";")[0].strip().lower()


def _reason(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0]
