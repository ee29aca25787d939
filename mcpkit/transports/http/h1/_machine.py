"""HTTP/1.1 as a state machine without I/O: bytes in, requests (or a refusal) out, and the
framing of responses.

``H1Connection.feed(data)`` runs the httptools (llhttp) parser over what the socket gave;
complete requests queue up in ``ready`` in arrival order (pipelining), and a request the
server must refuse sets ``error`` to the status to answer with (400, 413, 414, 431, 505) —
after which the connection is to be closed. Limits are checked as bytes arrive, so
nothing over a limit is ever held: chunk framing (sizes, extensions, trailers) included.
llhttp is strict about framing (Content-Length with Transfer-Encoding, duplicate
Content-Length, obs-fold, bare LF are all refused); on top of it an HTTP/1.0 request with
Transfer-Encoding, a transfer coding other than ``chunked`` alone (RFC 9112 §6.1), and an
HTTP/1.1 request without exactly one valid Host (§3.2) are refused. A request in absolute
form (``GET http://host/path``) is served as ``/path`` with ``host`` as its Host (§3.2.2).
"""

from __future__ import annotations

import collections
import time
from dataclasses import dataclass
from email.utils import formatdate

import httptools

from ..request_host import split_absolute_form, valid_host

__all__ = ["H1Connection", "Limits", "Request", "response_head", "chunk", "LAST_CHUNK", "REASONS"]

REASONS: dict[int, bytes] = {
    100: b"Continue", 200: b"OK", 201: b"Created", 202: b"Accepted", 204: b"No Content",
    301: b"Moved Permanently", 302: b"Found", 304: b"Not Modified", 307: b"Temporary Redirect",
    400: b"Bad Request", 401: b"Unauthorized", 403: b"Forbidden", 404: b"Not Found",
    405: b"Method Not Allowed", 406: b"Not Acceptable", 408: b"Request Timeout", 409: b"Conflict",
    411: b"Length Required", 413: b"Content Too Large", 414: b"URI Too Long", 415: b"Unsupported Media Type",
    421: b"Misdirected Request", 422: b"Unprocessable Content", 429: b"Too Many Requests",
    431: b"Request Header Fields Too Large", 500: b"Internal Server Error", 501: b"Not Implemented",
    502: b"Bad Gateway", 503: b"Service Unavailable", 504: b"Gateway Timeout", 505: b"HTTP Version Not Supported",
}
LAST_CHUNK = b"0\r\n\r\n"
CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"
_H2_PREFACE = b"PRI * HTTP/2.0"
#: header field names as received -> lower-case text, for the names clients send (at most
#: _NAMES_MAX kept: a client inventing names cannot grow it)
_NAMES: dict[bytes, str] = {}
_NAMES_MAX = 512


@dataclass(frozen=True)
class Limits:
    max_url_bytes: int = 8 * 1024
    max_header_bytes: int = 32 * 1024  # request line and header fields together
    max_headers: int = 100
    max_body_bytes: int = 4 * 1024 * 1024
    #: pipelined requests waiting for their answers; past it the rest of the burst is dropped
    #: and the connection closes after answering these
    max_pipelined: int = 100


class Request:
    """One parsed request, its body complete."""

    __slots__ = ("method", "raw_path", "query", "headers", "http_version", "keep_alive",
                 "body", "upgrade", "_body_parts", "_body_size")

    def __init__(self) -> None:
        self.method = ""
        self.raw_path = b""
        self.query = b""
        self.headers: dict[str, str] = {}  # lower-case names; repeated fields joined with ", "
        self.http_version = "1.1"
        self.keep_alive = True
        self.body = b""
        self.upgrade = False
        self._body_parts: list[bytes] = []
        self._body_size = 0

    @property
    def path(self) -> str:
        return self.raw_path.decode("latin-1")


class _Refuse(Exception):
    """Raised inside a parser callback to stop parsing; the status is in ``H1Connection.error``."""


class H1Connection:
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.ready: collections.deque[Request] = collections.deque()
        self.error: tuple[int, str] | None = None
        #: set when a request's headers asked for ``Expect: 100-continue``; the I/O loop sends
        #: CONTINUE and clears it
        self.continue_wanted = False
        #: no more requests after the ready ones: an upgrade request, or bytes after an error
        self.closed_to_new = False
        #: the path of the request that was refused, when its request line had arrived
        self.refused_path: str | None = None
        #: the limits every header field is checked against, read once
        self._max_headers, self._max_head = limits.max_headers, limits.max_header_bytes
        self._parser = httptools.HttpRequestParser(self)
        self._current: Request | None = None
        self._in_headers = False
        self._header_bytes = 0
        self._header_count = 0
        self._head_size = 0  # request target and header fields of the request being parsed
        self._started = False  # bytes of a request not yet complete have arrived
        self._hosts = 0  # Host fields of the request being parsed
        self._chunked = False  # its body is chunked
        self._framing = 0  # bytes of its chunked body that were not body: sizes, extensions, trailers

    # -- what the I/O loop asks -------------------------------------------------------------
    @property
    def in_message(self) -> bool:
        """Part of a request has arrived (its headers or body are not complete yet)."""
        return self._started

    @property
    def reading_body(self) -> bool:
        return self._current is not None and not self._in_headers

    @property
    def body_received(self) -> int:
        """Bytes of the body of the request being read."""
        return self._current._body_size if self._current is not None else 0

    def feed(self, data: bytes) -> None:
        if self.error is not None or self.closed_to_new:
            return
        if self._in_headers or not self._started:
            if not self._started and data.startswith(_H2_PREFACE):
                self._refuse(505, "HTTP/2 is not served on this port without TLS; use HTTP/1.1")
                return
            self._header_bytes += len(data)
        elif self._chunked:
            self._framing += len(data)  # on_body takes the body bytes back out
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.closed_to_new = True  # answered as plain HTTP/1.1, then the connection closes
        except httptools.HttpParserCallbackError:
            pass  # a limit refused the request: self.error says how
        except httptools.HttpParserError as exc:
            if self.error is None:
                self._refuse(400, f"malformed HTTP request: {exc}")
        if self.error is None and self._in_headers and self._header_bytes > self.limits.max_header_bytes:
            self._refuse(431, f"the request head is larger than {self.limits.max_header_bytes} bytes")
        if self.error is None and self.reading_body and self._chunked and (
                self._framing > self.limits.max_header_bytes + self.body_received):
            self._refuse(400, "the chunk framing (sizes, extensions, trailers) is larger than the body it carries")

    def _refuse(self, status: int, message: str) -> None:
        self.error = (status, message)
        self.closed_to_new = True
        if self._current is not None and self._current.raw_path:
            self.refused_path = self._current.raw_path.partition(b"?")[0].decode("latin-1")

    # -- parser callbacks -------------------------------------------------------------------------
    def on_message_begin(self) -> None:
        self._current = Request()
        self._in_headers = True
        self._started = True
        self._header_count = 0
        self._head_size = 0
        self._hosts = 0
        self._chunked = False
        self._framing = 0

    def on_url(self, url: bytes) -> None:
        req = self._current
        assert req is not None
        req.raw_path += url
        self._head_size += len(url)
        if len(req.raw_path) > self.limits.max_url_bytes:
            self._refuse(414, f"the request target is longer than {self.limits.max_url_bytes} bytes")
            raise _Refuse

    def on_header(self, name: bytes, value: bytes) -> None:
        count = self._header_count = self._header_count + 1
        size = self._head_size = self._head_size + len(name) + len(value) + 4
        if count > self._max_headers or size > self._max_head:  # one test on the way of every field
            limits = self.limits
            if count > limits.max_headers:
                self._refuse(431, f"more than {limits.max_headers} header fields")
            else:
                self._refuse(431, f"the request head is larger than {limits.max_header_bytes} bytes")
            raise _Refuse
        if not self._in_headers:
            return  # a trailer field: counted, never merged into the request's header fields
        key = _NAMES.get(name)
        if key is None:
            key = name.decode("latin-1").lower()
            if len(_NAMES) < _NAMES_MAX:
                _NAMES[name] = key
        if key == "host":
            self._hosts += 1
            if self._hosts > 1 or not valid_host(value):
                self._refuse(400, "a request must have exactly one valid Host header field")
                raise _Refuse
        headers = self._current.headers  # type: ignore[union-attr]  # set by on_message_begin
        text = value.decode("latin-1")
        if key in headers:  # a repeated field: joined, as RFC 9110 §5.3 allows for list fields
            headers[key] = f"{headers[key]}, {text}"
        else:
            headers[key] = text

    def on_headers_complete(self) -> None:
        req = self._current
        assert req is not None
        parser = self._parser
        self._in_headers = False
        self._header_bytes = 0
        req.method = parser.get_method().decode("ascii")
        req.http_version = parser.get_http_version()
        req.keep_alive = parser.should_keep_alive()
        req.upgrade = parser.should_upgrade()
        path, sep, query = req.raw_path.partition(b"?")
        if sep:
            req.raw_path, req.query = path, query
        headers = req.headers
        if req.http_version == "1.0" and "transfer-encoding" in headers:
            self._refuse(400, "Transfer-Encoding is not allowed in HTTP/1.0")
            raise _Refuse
        coding = headers.get("transfer-encoding")
        if coding is not None:
            codings = [c.strip().lower() for c in coding.split(",")]
            if codings != ["chunked"]:  # 400, not 501: the server answers nothing a client did with a 5xx
                self._refuse(400, f"Transfer-Encoding {coding!r} is not served: only chunked alone is")
                raise _Refuse
            self._chunked = True
        if req.http_version != "1.0" and self._hosts == 0:
            self._refuse(400, "an HTTP/1.1 request must have a Host header field")
            raise _Refuse
        try:
            absolute = split_absolute_form(req.raw_path)
        except ValueError as exc:
            self._refuse(400, str(exc))
            raise _Refuse from None
        if absolute is not None:  # served as its path, with the target's authority as the Host
            authority, req.raw_path = absolute
            req.headers["host"] = authority.decode("latin-1")
        length = headers.get("content-length")
        if length is not None and int(length) > self.limits.max_body_bytes:  # llhttp checked the digits
            self._refuse(413, f"the request body is larger than {self.limits.max_body_bytes} bytes")
            raise _Refuse
        if headers.get("expect", "").lower() == "100-continue" and req.http_version != "1.0":
            self.continue_wanted = True

    def on_body(self, body: bytes) -> None:
        req = self._current
        assert req is not None
        self._framing -= len(body)
        req._body_size += len(body)
        if req._body_size > self.limits.max_body_bytes:
            self._refuse(413, f"the request body is larger than {self.limits.max_body_bytes} bytes")
            raise _Refuse
        req._body_parts.append(body)

    def on_message_complete(self) -> None:
        req = self._current
        assert req is not None
        parts = req._body_parts
        req.body = parts[0] if len(parts) == 1 else b"".join(parts)
        req._body_parts = []
        self._current = None
        self._started = False
        self.continue_wanted = False
        self.ready.append(req)
        if len(self.ready) >= self.limits.max_pipelined:
            self.closed_to_new = True  # answer these, then close: no unbounded queue
            raise _Refuse


# -- responses --------------------------------------------------------------------------------------

_date_cache: list[object] = [0, b""]


def http_date() -> bytes:
    """The Date header value, formatted once a second."""
    now = int(time.time())
    if _date_cache[0] != now:
        _date_cache[0] = now
        _date_cache[1] = formatdate(now, usegmt=True).encode("ascii")
    return _date_cache[1]  # type: ignore[return-value]


def response_head(status: int, headers: list[tuple[bytes, bytes]], *, length: int | None, chunked: bool = False,
                  close: bool = False) -> bytes:
    """Status line and header block. ``length`` None without ``chunked`` means the body runs
    to the end of the connection (HTTP/1.0 streaming), so ``close`` must be set."""
    parts = [b"HTTP/1.1 %d %s\r\ndate: %s\r\nserver: mcpkit\r\n" % (status, REASONS.get(status, b""), http_date())]
    for name, value in headers:
        parts.append(b"%s: %s\r\n" % (name, value))
    if length is not None:
        parts.append(b"content-length: %d\r\n" % length)
    elif chunked:
        parts.append(b"transfer-encoding: chunked\r\n")
    if close:
        parts.append(b"connection: close\r\n")
    parts.append(b"\r\n")
    return b"".join(parts)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data) if data else b""
