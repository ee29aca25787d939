"""One bounded HTTP exchange with a JSON answer: what the OAuth client's metadata,
registration and token requests and the resource server's verifiers (key sets, issuer
metadata, introspection) share. It sits below both, so neither side imports the other."""

from __future__ import annotations

from typing import Any

import httpx
import msgspec

#: JSON documents larger than this (metadata, key sets, token answers) are refused
MAX_DOCUMENT_BYTES = 1024 * 1024


class TooLarge(Exception):
    pass


async def read_bounded(http: httpx.AsyncClient, method: str, url: str, limit: int = MAX_DOCUMENT_BYTES,
                       **kwargs: Any) -> tuple[int, bytes, httpx.Headers]:
    """(status, body, headers) of one request; TooLarge past ``limit``; httpx errors pass through."""
    async with http.stream(method, url, **kwargs) as resp:
        body = b""
        async for chunk in resp.aiter_bytes():
            body += chunk
            if len(body) > limit:
                raise TooLarge(f"the answer of {url} is larger than {limit} bytes")
        return resp.status_code, body, resp.headers


def json_or_none(body: bytes) -> Any:
    """The decoded JSON body, or None when it is empty or not JSON."""
    try:
        return msgspec.json.decode(body) if body else None
    except msgspec.DecodeError:
        return None
