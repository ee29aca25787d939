"""A lean HTTP/1.1 client on trio: pooled keep-alive connections, httptools parsing, msgspec JSON.

It sits below ``mcpkit.server`` and ``mcpkit.client`` (it imports neither): tools reach it
through ``mcpkit.http_client()``, and the MCP client's HTTP transports and the gateway can
carry their requests on it. It costs 1/20–1/10 of httpx's CPU per call on trio
(``bench/bench_http_client.py``); what it leaves out (HTTP/2, cookies, proxies from the
environment, compression) is listed in docs/writing-plugins.md.
"""

from __future__ import annotations

import ssl
from typing import Mapping

from .client import HttpClient
from .errors import (HttpClientError, HttpConnectError, HttpConnectTimeout, HttpProtocolError, HttpResponseTooLarge,
                     HttpStatusError, HttpTimeout)
from .response import Headers, HttpResponse


def http_client(base_url: str | None = None, *, headers: Mapping[str, str] | None = None, timeout: float | None = 30.0,
                connect_timeout: float | None = 10.0, max_connections: int = 100, max_keepalive: int = 20,
                keepalive_expiry: float = 4.0, max_response_size: int = 32 * 1024 * 1024,
                follow_redirects: bool = False, verify: bool | str | ssl.SSLContext = True,
                cert: str | tuple[str, str] | None = None, user_agent: str | None = None) -> HttpClient:
    """A pooled keep-alive HTTP client for a plugin's tools (see docs/writing-plugins.md).

    Return it from the plugin's ``mcpkit_lifespan`` hook (it is an async context manager) and
    it is closed with the plugin. ``timeout`` bounds each whole request (None: no limit);
    ``max_connections`` bounds open connections, ``max_keepalive`` the idle ones kept per
    server; ``verify`` is True (system CAs), False, a CA file or an ``ssl.SSLContext``;
    ``cert`` a client certificate (file, or (certfile, keyfile))."""
    return HttpClient(base_url, headers=headers, timeout=timeout, connect_timeout=connect_timeout,
                      max_connections=max_connections, max_keepalive=max_keepalive, keepalive_expiry=keepalive_expiry,
                      max_response_size=max_response_size, follow_redirects=follow_redirects, verify=verify,
                      cert=cert, user_agent=user_agent)


__all__ = ["http_client", "HttpClient", "HttpResponse", "Headers", "HttpClientError", "HttpConnectError",
           "HttpConnectTimeout", "HttpTimeout", "HttpProtocolError", "HttpResponseTooLarge", "HttpStatusError"]
