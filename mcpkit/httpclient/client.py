"""The pooled keep-alive HTTP/1.1 client: httpx-like calls on trio, a fraction of httpx's CPU.

Per request it builds one bytes block (request line and headers), takes an idle connection
to the origin (a non-blocking peek says whether the server closed it meanwhile) or opens one,
and reads the answer with httptools. No cookies, no proxies from the environment, no
compression, no HTTP/2: what a tool calling an API needs, and each thing it leaves out is
something it does not pay for on every call.
"""

from __future__ import annotations

import contextlib
import re
import ssl
import time
import urllib.parse
from functools import lru_cache
from typing import Any, AsyncIterator, Mapping

import msgspec
import trio

from .._version import __version__
from .connection import Connection
from .errors import HttpClientError, HttpConnectError, HttpConnectTimeout, HttpProtocolError, HttpTimeout
from .response import HttpResponse

Key = tuple[str, str, int]
Params = Mapping[str, Any] | list[tuple[str, Any]] | None
_IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_SAFE_TARGET = re.compile(r"[!-~]*")  # printable ASCII, no space: sent as it is
_encode_json = msgspec.json.Encoder().encode
_UNSET: Any = object()


@lru_cache(maxsize=256)
def _origin(url: str) -> tuple[Key, str, str]:
    """``http(s)://host[:port]/path?query`` -> ((scheme, host, port), Host header, path?query)."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise ValueError(f"unsupported URL {url!r}: only http:// and https:// are")
    host = parts.hostname
    if not host:
        raise ValueError(f"URL without a host: {url!r}")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise ValueError(f"bad port in URL {url!r}") from None
    shown = f"[{host}]" if ":" in host else host
    host_header = shown if port == (443 if scheme == "https" else 80) else f"{shown}:{port}"
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    return (scheme, host, port), host_header, target


def _query(params: Params) -> str:
    items = params.items() if isinstance(params, Mapping) else params or ()
    pairs = []
    for name, value in items:
        for v in (value if isinstance(value, (list, tuple)) else (value,)):
            if v is None:
                continue
            pairs.append((name, "true" if v is True else "false" if v is False else str(v)))
    return urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)


def _check_header(name: str, value: str) -> None:
    if any(c in name for c in "\r\n:\0 ") or any(c in value for c in "\r\n\0"):
        raise ValueError(f"header {name!r} has a character a header cannot carry (line breaks, NUL)")


def _ssl_context(verify: bool | str | ssl.SSLContext, cert: str | tuple[str, str] | None) -> ssl.SSLContext:
    if isinstance(verify, ssl.SSLContext):
        ctx = verify
    elif verify is False:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        ctx = ssl.create_default_context(cafile=verify if isinstance(verify, str) else None)
    if cert is not None:
        certfile, keyfile = (cert, None) if isinstance(cert, str) else cert
        ctx.load_cert_chain(certfile, keyfile)
    return ctx


class HttpClient:
    """A pool of keep-alive HTTP/1.1 connections with httpx-like calls. Use it inside trio
    (any task of the server); close it with ``aclose()`` or ``async with``."""

    def __init__(self, base_url: str | None = None, *, headers: Mapping[str, str] | None = None,
                 timeout: float | None = 30.0, connect_timeout: float | None = 10.0, max_connections: int = 100,
                 max_keepalive: int = 20, keepalive_expiry: float = 4.0, max_response_size: int = 32 * 1024 * 1024,
                 follow_redirects: bool = False, max_redirects: int = 10, verify: bool | str | ssl.SSLContext = True,
                 cert: str | tuple[str, str] | None = None, user_agent: str | None = None) -> None:
        if max_connections < 1 or max_keepalive < 0:
            raise ValueError("max_connections must be >= 1 and max_keepalive >= 0")
        self.base_url = base_url.rstrip("/") if base_url else None
        if self.base_url:
            _origin(self.base_url)  # a bad base URL fails here, not on the first call
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.max_connections = max_connections
        self.max_keepalive = max_keepalive
        self.keepalive_expiry = keepalive_expiry
        self.max_response_size = max_response_size
        self.follow_redirects = follow_redirects
        self.max_redirects = max_redirects
        self._verify, self._cert = verify, cert
        self._ssl: ssl.SSLContext | None = None
        defaults = {"user-agent": user_agent or f"mcpkit/{__version__}", "accept": "*/*"}
        for name, value in (headers or {}).items():
            _check_header(name, value)
            defaults[name.lower()] = value
        self.headers = defaults
        self._default_block = "".join(f"{k}: {v}\r\n" for k, v in defaults.items())
        self._idle: dict[Key, list[Connection]] = {}
        self._open = 0  # connections that exist: idle ones and ones in use
        self._waiters = trio.lowlevel.ParkingLot()
        self._closed = False

    # -- the calls ----------------------------------------------------------------------------

    async def get(self, url: str, **kw: Any) -> HttpResponse:
        return await self.request("GET", url, **kw)

    async def post(self, url: str, **kw: Any) -> HttpResponse:
        return await self.request("POST", url, **kw)

    async def put(self, url: str, **kw: Any) -> HttpResponse:
        return await self.request("PUT", url, **kw)

    async def patch(self, url: str, **kw: Any) -> HttpResponse:
        return await self.request("PATCH", url, **kw)

    async def delete(self, url: str, **kw: Any) -> HttpResponse:
        return await self.request("DELETE", url, **kw)

    async def head(self, url: str, **kw: Any) -> HttpResponse:
        return await self.request("HEAD", url, **kw)

    async def options(self, url: str, **kw: Any) -> HttpResponse:
        return await self.request("OPTIONS", url, **kw)

    async def request(self, method: str, url: str, *, params: Params = None, headers: Mapping[str, str] | None = None,
                      json: Any = None, content: bytes | str | None = None, data: Params = None,
                      timeout: float | None = _UNSET) -> HttpResponse:
        """Send a request and read its whole answer (at most ``max_response_size`` bytes).

        ``params`` go in the query string; the body is ``json`` (encoded with msgspec; None
        sends none),
        ``content`` (bytes or text) or ``data`` (an HTML form). ``timeout`` (seconds, None for
        none) bounds the whole exchange, connecting included; it defaults to the client's.
        A 4xx/5xx answer is returned, not raised: call ``raise_for_status()``."""
        limit = self.timeout if timeout is _UNSET else timeout
        if limit is None:
            return await self._send(method, url, params, headers, json, content, data, False)
        try:
            with trio.fail_after(limit):
                return await self._send(method, url, params, headers, json, content, data, False)
        except trio.TooSlowError:
            raise HttpTimeout(f"{method} {url} took more than {limit:g} s", method=method, url=url) from None

    @contextlib.asynccontextmanager
    async def stream(self, method: str, url: str, *, params: Params = None, headers: Mapping[str, str] | None = None,
                     json: Any = None, content: bytes | str | None = None, data: Params = None,
                     timeout: float | None = _UNSET) -> AsyncIterator[HttpResponse]:
        """Send a request and yield the answer once its headers are in; read the body with
        ``async for chunk in response.aiter_bytes()`` (no size limit, no deadline: put the
        reads under a cancel scope if they need one). ``timeout`` bounds the wait for the headers."""
        limit = self.timeout if timeout is _UNSET else timeout
        try:
            with trio.fail_after(limit if limit is not None else float("inf")):
                resp = await self._send(method, url, params, headers, json, content, data, True)
        except trio.TooSlowError:
            raise HttpTimeout(f"{method} {url} sent no answer within {limit:g} s", method=method, url=url) from None
        conn = resp._stream
        try:
            yield resp
        finally:
            resp._stream = None
            if conn is not None:
                self._done_with(conn)

    async def aclose(self) -> None:
        """Close every idle connection; connections in use close when their request ends.
        Requests after this raise RuntimeError."""
        self._closed = True
        for conns in self._idle.values():
            for conn in conns:
                conn.close()
                self._open -= 1
        self._idle.clear()
        self._waiters.unpark_all()

    async def __aenter__(self) -> "HttpClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- building the request -----------------------------------------------------------------

    def _resolve(self, url: str, params: Params) -> tuple[Key, str, str, str]:
        """The origin, Host header, request target and full URL."""
        if url.startswith(("http://", "https://", "HTTP://", "HTTPS://")):
            full = url
        elif "://" in url and "/" not in url.partition("://")[0]:
            _origin(url)  # another scheme: refused with its name
            full = url
        elif self.base_url is None:
            raise ValueError(f"relative URL {url!r} needs the client's base_url")
        else:
            full = self.base_url + (url if url.startswith("/") or not url else "/" + url)
        full = full.split("#", 1)[0]
        scheme_end = full.index("//") + 2
        slash = full.find("/", scheme_end)
        question = full.find("?", scheme_end)
        cut = min(p for p in (slash, question, len(full)) if p >= 0)
        key, host_header, _ = _origin(full[:cut])
        target = full[cut:] or "/"
        if target[0] == "?":
            target = "/" + target
        if params:
            query = _query(params)
            if query:
                joiner = "&" if "?" in target else "?"
                target += joiner + query
                full += joiner + query
        if not _SAFE_TARGET.fullmatch(target):
            target = urllib.parse.quote(target, safe="/?&=%:@!$'()*+,;~-._[]")
        return key, host_header, target, full

    def _head(self, method: str, host_header: str, target: str, headers: Mapping[str, str] | None,
              body: bytes | None, ctype: str | None) -> bytes:
        if headers:
            merged = dict(self.headers)
            for name, value in headers.items():
                _check_header(name, value)
                merged[name.lower()] = value
            block = "".join(f"{k}: {v}\r\n" for k, v in merged.items() if k not in ("host", "content-length"))
            has_type = "content-type" in merged
        else:
            block, has_type = self._default_block, "content-type" in self.headers
        if body is not None:
            if ctype and not has_type:
                block += f"content-type: {ctype}\r\n"
            block += f"content-length: {len(body)}\r\n"
        elif method in ("POST", "PUT", "PATCH"):
            block += "content-length: 0\r\n"
        return f"{method} {target} HTTP/1.1\r\nhost: {host_header}\r\n{block}\r\n".encode("latin-1")

    async def _send(self, method: str, url: str, params: Params, headers: Mapping[str, str] | None, json: Any,
                    content: bytes | str | None, data: Params, stream: bool) -> HttpResponse:
        if self._closed:
            raise RuntimeError("this HttpClient is closed")
        method = method.upper()
        if not (method.isascii() and method.isalpha()):
            raise ValueError(f"not an HTTP method: {method!r}")
        body: bytes | None
        ctype: str | None = None
        if json is not None:
            body, ctype = _encode_json(json), "application/json"
        elif content is not None:
            body = content.encode() if isinstance(content, str) else bytes(content)
        elif data is not None:
            body, ctype = _query(data).encode(), "application/x-www-form-urlencoded"
        else:
            body = None
        for _ in range(self.max_redirects + 1):
            key, host_header, target, full = self._resolve(url, params)
            head = self._head(method, host_header, target, headers, body, ctype)
            resp = await self._exchange(key, head + body if body else head, method, full, stream)
            location = resp.headers.get("location") if self.follow_redirects and resp.status_code in _REDIRECTS else None
            if location is None:
                return resp
            if resp._stream is not None:  # a redirect's own body is not wanted: drop its connection
                conn, resp._stream = resp._stream, None
                conn.reusable = False
                self._done_with(conn)
            url, params = urllib.parse.urljoin(full, location), None
            if resp.status_code == 303 or (resp.status_code in (301, 302) and method == "POST"):
                method, body, ctype = ("HEAD" if method == "HEAD" else "GET"), None, None
            if headers and _origin_of(url) != key:
                headers = {k: v for k, v in headers.items() if k.lower() not in ("authorization", "cookie")}
        raise HttpClientError(f"more than {self.max_redirects} redirects from {method} {url}", method=method, url=url)

    # -- the pool -----------------------------------------------------------------------------

    async def _exchange(self, key: Key, request: bytes, method: str, url: str, stream: bool) -> HttpResponse:
        for attempt in (0, 1):
            conn = await self._acquire(key, method, url)
            reused = conn.used > 0
            try:
                resp = await conn.exchange(request, method, url, self.max_response_size, stream)
            except (OSError, HttpProtocolError) as exc:
                self._discard(conn)
                # A kept-alive connection the server closed just as the request went out: the
                # server saw nothing, so a request that may be repeated is, once, on a new one.
                if attempt == 0 and reused and conn.received == 0 and method in _IDEMPOTENT:
                    continue
                if isinstance(exc, HttpClientError):
                    exc.method, exc.url = method, url
                    raise
                raise HttpProtocolError(f"{method} {url}: connection lost: {exc.strerror or exc}", method=method,
                                        url=url) from None
            except BaseException:
                self._discard(conn)
                raise
            if not stream:
                self._done_with(conn)
            return resp
        raise AssertionError("unreachable")

    async def _acquire(self, key: Key, method: str, url: str) -> Connection:
        idle = self._idle.get(key)
        if idle:
            now = time.monotonic()
            while idle:
                conn = idle.pop()
                if now - conn.idle_since < self.keepalive_expiry and conn.idle_and_open():
                    return conn
                conn.close()
                self._open -= 1
        while self._open >= self.max_connections:
            if not self._close_one_idle():
                await self._waiters.park()
            if self._closed:
                raise RuntimeError("this HttpClient is closed")
        self._open += 1
        try:
            if key[0] == "https" and self._ssl is None:
                self._ssl = _ssl_context(self._verify, self._cert)
            if self.connect_timeout is None:
                return await Connection.open(key, self._ssl)
            with trio.move_on_after(self.connect_timeout):
                return await Connection.open(key, self._ssl)
            raise HttpConnectTimeout(f"connecting to {key[1]}:{key[2]} took more than {self.connect_timeout:g} s",
                                     method=method, url=url)
        except HttpConnectError as exc:
            self._open -= 1
            self._waiters.unpark()
            exc.method, exc.url = method, url
            raise
        except BaseException:
            self._open -= 1
            self._waiters.unpark()
            raise

    def _close_one_idle(self) -> bool:
        for conns in self._idle.values():
            if conns:
                conns.pop(0).close()
                self._open -= 1
                return True
        return False

    def _done_with(self, conn: Connection) -> None:
        """A request is over: keep its connection for the next one, or close it."""
        if conn.reusable and conn.complete and not self._closed:
            idle = self._idle.setdefault(conn.key, [])
            if len(idle) < self.max_keepalive:
                conn.park()
                idle.append(conn)
                self._waiters.unpark()
                return
        self._discard(conn)

    def _discard(self, conn: Connection) -> None:
        conn.close()
        self._open -= 1
        self._waiters.unpark()


def _origin_of(url: str) -> Key | None:
    try:
        return _origin(url)[0]
    except ValueError:
        return None
