"""Getting the user's consent: where the authorization URL goes and how the redirect back
(with the code) is received.

:class:`LoopbackAuthorizer` is for people: it opens the URL in a browser and listens on a
loopback port for the redirect (RFC 8252). :class:`HeadlessAuthorizer` is for automation and
tests against authorization servers that answer at once (no login page): it fetches the URL
and reads the redirect itself.
"""

from __future__ import annotations

import inspect
import logging
import sys
import urllib.parse
import webbrowser
from typing import Any, Callable, Protocol

import httpx
import trio

from ..errors import AuthorizationFailed

log = logging.getLogger("mcpkit.client.oauth")
OpenUrl = Callable[[str], Any]
_PAGE = (b"<!doctype html><meta charset=utf-8><title>mcpkit</title>"
         b"<p>Authorization received. You can close this window and return to the application.</p>")


class Authorizer(Protocol):
    """Takes the user through the authorization endpoint and brings back the redirect."""

    async def redirect_uri(self) -> str:
        """The redirect URI to register and send (known before the flow starts)."""

    async def authorize(self, url: str) -> dict[str, str]:
        """Send the user to ``url``; return the query parameters of the redirect back."""


def callback_params(location: str) -> dict[str, str]:
    query = urllib.parse.urlsplit(location).query
    return {k: v[0] for k, v in urllib.parse.parse_qs(query, keep_blank_values=True).items()}


class HeadlessAuthorizer:
    """Follows the authorization server's redirects itself until one points at the redirect URI.
    Only for servers that grant without a login page (test servers, pre-approved automation)."""

    def __init__(self, redirect: str = "http://localhost:3000/callback", *, max_hops: int = 10, timeout: float = 30.0) -> None:
        self._redirect = redirect
        self.max_hops = max_hops
        self.timeout = timeout

    async def redirect_uri(self) -> str:
        return self._redirect

    async def authorize(self, url: str) -> dict[str, str]:
        async with httpx.AsyncClient(follow_redirects=False, timeout=self.timeout) as http:
            for _ in range(self.max_hops):
                try:
                    resp = await http.get(url)
                except httpx.HTTPError as exc:
                    raise AuthorizationFailed(f"the authorization endpoint could not be reached: {exc or type(exc).__name__}") from None
                location = resp.headers.get("location")
                if resp.status_code not in (301, 302, 303, 307, 308) or not location:
                    raise AuthorizationFailed(f"the authorization endpoint answered HTTP {resp.status_code} instead of "
                                              "redirecting back: it needs a person (use a browser-based authorizer)")
                location = urllib.parse.urljoin(url, location)
                if location.split("?", 1)[0] == self._redirect.split("?", 1)[0]:
                    return callback_params(location)
                url = location
        raise AuthorizationFailed("the authorization endpoint redirected too many times")


class LoopbackAuthorizer:
    """Opens the authorization URL in the user's browser and waits on a loopback port for the
    redirect. The listener is bound on first use and kept, so its redirect URI stays the same
    for this client (a registration made with it stays good)."""

    def __init__(self, *, host: str = "127.0.0.1", port: int = 0, path: str = "/callback",
                 open_url: OpenUrl | None = None, timeout: float = 300.0) -> None:
        self.host, self.port, self.path = host, port, path
        self.open_url = open_url or open_in_browser
        self.timeout = timeout
        self._listener: trio.SocketListener | None = None

    async def redirect_uri(self) -> str:
        if self._listener is None:
            listeners = await trio.open_tcp_listeners(self.port, host=self.host)
            for extra in listeners[1:]:
                await extra.aclose()
            self._listener = listeners[0]
            self.port = self._listener.socket.getsockname()[1]
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{self.path}"

    async def authorize(self, url: str) -> dict[str, str]:
        await self.redirect_uri()
        assert self._listener is not None
        found: dict[str, str] | None = None
        with trio.move_on_after(self.timeout):
            async with trio.open_nursery() as nursery:
                # a browser command may wait for its page: open it beside the listener
                nursery.start_soon(self._open, url)
                while found is None:
                    stream = await self._listener.accept()
                    found = await self._serve_one(stream)
                nursery.cancel_scope.cancel()
        if found is None:
            raise AuthorizationFailed(f"no authorization arrived within {self.timeout:g} s")
        return found

    async def _open(self, url: str) -> None:
        if inspect.iscoroutinefunction(self.open_url):
            await self.open_url(url)
        else:
            await trio.to_thread.run_sync(self.open_url, url, abandon_on_cancel=True)

    async def _serve_one(self, stream: trio.SocketStream) -> dict[str, str] | None:
        """Read one request; the redirect's parameters if it is the callback, else None."""
        try:
            with trio.move_on_after(10):
                data = b""
                while b"\r\n\r\n" not in data and len(data) < 16384:
                    chunk = await stream.receive_some(4096)
                    if not chunk:
                        break
                    data += chunk
                line = data.split(b"\r\n", 1)[0].decode("latin-1")
                method, _, rest = line.partition(" ")
                target = rest.rsplit(" ", 1)[0]
                parts = urllib.parse.urlsplit(target)
                if method != "GET" or parts.path != self.path:
                    await stream.send_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return None
                params = callback_params(target)
                if not params:
                    await stream.send_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                    return None
                await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\nContent-Length: "
                                      + str(len(_PAGE)).encode() + b"\r\nConnection: close\r\n\r\n" + _PAGE)
                return params
            return None
        except (trio.BrokenResourceError, OSError):
            return None
        finally:
            await stream.aclose()

    async def aclose(self) -> None:
        if self._listener is not None:
            await self._listener.aclose()
            self._listener = None


def open_in_browser(url: str) -> None:
    """Tell the user where to go, and try to open a browser there."""
    print(f"mcpkit: to authorize, open this URL in a browser:\n  {url}", file=sys.stderr, flush=True)
    try:
        webbrowser.open(url)
    except Exception as exc:  # no browser here: the printed URL will do
        log.debug("could not open a browser: %s", exc)
