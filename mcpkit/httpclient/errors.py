"""What the HTTP client raises. Every failure is an :class:`HttpClientError`, so a tool can
catch that one class; the subclasses say what went wrong."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .response import HttpResponse


class HttpClientError(Exception):
    """A request that got no usable answer: no connection, a timeout, a broken or oversized
    response — or, from ``raise_for_status()``, an error status."""

    def __init__(self, message: str, *, method: str = "", url: str = "") -> None:
        super().__init__(message)
        self.method = method
        self.url = url


class HttpConnectError(HttpClientError):
    """The server could not be reached (name lookup, refused, unreachable, TLS handshake)."""


class HttpTimeout(HttpClientError):
    """The request's deadline passed before its answer was complete."""


class HttpConnectTimeout(HttpConnectError, HttpTimeout):
    """Connecting took longer than ``connect_timeout``: the server saw no request, so sending it
    again elsewhere or later is safe."""


class HttpProtocolError(HttpClientError):
    """The server broke HTTP/1.1: malformed bytes, or the connection closed mid-answer."""


class HttpResponseTooLarge(HttpClientError):
    """The body is longer than ``max_response_size`` (read it with ``stream()`` instead)."""


class HttpStatusError(HttpClientError):
    """``raise_for_status()`` on a 4xx or 5xx answer; ``.response`` is that answer."""

    def __init__(self, message: str, *, response: "HttpResponse") -> None:
        super().__init__(message, method=response.method, url=response.url)
        self.response = response
