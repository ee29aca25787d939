"""One HTTP/1.1 connection to one origin: connect (TCP, TLS), write a request, read its answer.

A plain socket is driven with non-blocking calls, and trio's ``wait_readable`` /
``wait_writable`` run only when the kernel has nothing to give or no room: a request costs
one ``send``, one wait for the answer and one ``recv`` (two when the answer is long). TLS goes
through ``trio.SSLStream``. The answer is parsed by httptools (llhttp, the parser mcpkit's
server uses), whose callbacks fill this object's fields; nothing here knows about pools.
"""

from __future__ import annotations

import socket
import ssl
import time

import httptools
import trio

from .errors import HttpConnectError, HttpProtocolError, HttpResponseTooLarge
from .response import HttpResponse
from .sockio import READ_SIZE, PlainSocket, connect_socket
MAX_HEADER_BYTES = 64 * 1024
_NO_BODY = (204, 304)


async def _tcp_connect(host: str, port: int) -> socket.socket:
    """A connected non-blocking TCP socket, trying each address the name resolves to."""
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise HttpConnectError(f"cannot resolve {host}: {exc.strerror or exc}") from None
    last: OSError | None = None
    for family, kind, proto, _, addr in infos:
        sock = socket.socket(family, kind, proto)
        try:
            await connect_socket(sock, addr)
            return sock
        except OSError as exc:
            sock.close()
            last = exc
        except BaseException:
            sock.close()
            raise
    reason = (last.strerror or str(last)) if last else "no address"
    raise HttpConnectError(f"cannot connect to {host}:{port}: {reason}")


class Connection:
    """A keep-alive HTTP/1.1 connection; one request at a time."""

    __slots__ = ("key", "sock", "tls", "parser", "used", "idle_since", "reusable", "_status", "_reason", "_headers",
                 "_header_bytes", "_chunks", "_body_bytes", "_max_body", "_head_done", "_complete", "_head_only",
                 "_framed", "_error", "_plain", "received")

    def __init__(self, key: tuple[str, str, int], sock: socket.socket, tls: trio.SSLStream | None) -> None:
        self.key = key
        self.sock = sock
        self.tls = tls
        self.parser = httptools.HttpResponseParser(self)
        self.used = 0  # requests sent on it
        self.idle_since = 0.0
        self.reusable = True
        self._plain = PlainSocket(sock) if tls is None else None
        self._reset(0, False)

    @classmethod
    async def open(cls, key: tuple[str, str, int], ssl_context: ssl.SSLContext | None) -> "Connection":
        scheme, host, port = key
        sock = await _tcp_connect(host, port)
        if scheme != "https":
            return cls(key, sock, None)
        assert ssl_context is not None
        tls = trio.SSLStream(trio.SocketStream(trio.socket.from_stdlib_socket(sock)), ssl_context,
                             server_hostname=host, https_compatible=True)
        try:
            await tls.do_handshake()
        except (trio.BrokenResourceError, ssl.SSLError, OSError) as exc:
            sock.close()
            cause = exc.__cause__ if isinstance(exc, trio.BrokenResourceError) and exc.__cause__ else exc
            raise HttpConnectError(f"TLS handshake with {host}:{port} failed: {cause}") from None
        except BaseException:
            sock.close()
            raise
        return cls(key, sock, tls)

    # -- the state the parser's callbacks fill ------------------------------------------------

    def _reset(self, max_body: int, head_only: bool) -> None:
        self._status = 0
        self._reason = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._header_bytes = 0
        self._chunks: list[bytes] = []
        self._body_bytes = 0
        self._max_body = max_body
        self._head_done = False
        self._complete = False
        self._head_only = head_only
        self._framed = False  # a Content-Length or chunked body (else it ends when the server closes)
        self._error: Exception | None = None
        self.received = 0

    def on_status(self, reason: bytes) -> None:
        self._reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_bytes += len(name) + len(value)
        if self._header_bytes > MAX_HEADER_BYTES:
            self._error = HttpProtocolError(f"response headers larger than {MAX_HEADER_BYTES} bytes")
        self._headers.append((name, value))

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # an interim answer (100 Continue, 103): the real one follows
            self._reason, self._headers, self._header_bytes = b"", [], 0
            return
        self._status = status
        self._head_done = True
        for name, value in self._headers:
            low = name.lower()
            if low == b"content-length" or (low == b"transfer-encoding" and b"chunked" in value.lower()):
                self._framed = True
        if self._head_only:  # HEAD: no body follows, whatever Content-Length says
            self._complete = True
            self.reusable = False  # the parser still expects that body: start afresh next time
        elif not self.parser.should_keep_alive():
            self.reusable = False

    def on_body(self, body: bytes) -> None:
        if self._head_only:
            return  # a body after a HEAD answer is the server's mistake; the connection is dropped
        self._body_bytes += len(body)
        if self._max_body and self._body_bytes > self._max_body:
            self._error = HttpResponseTooLarge(f"response body larger than max_response_size ({self._max_body} bytes)")
            return
        self._chunks.append(body)

    def on_message_complete(self) -> None:
        if self._head_done:
            self._complete = True

    # -- moving bytes -------------------------------------------------------------------------

    async def send(self, data: bytes) -> None:
        self.used += 1
        plain = self._plain
        if plain is not None:
            sent = plain.send_now(data)
            if sent < len(data):
                await plain.send_rest(memoryview(data)[sent:])
            return
        assert self.tls is not None
        try:
            await self.tls.send_all(data)
        except trio.BrokenResourceError as exc:
            raise BrokenPipeError(str(exc)) from None

    async def _recv(self) -> bytes:
        if self._plain is not None:
            return await self._plain.recv()
        assert self.tls is not None
        try:
            return await self.tls.receive_some(READ_SIZE)
        except trio.BrokenResourceError as exc:
            raise ConnectionResetError(str(exc)) from None

    async def _feed_once(self) -> None:
        data = await self._recv()
        if not data:
            self.reusable = False
            if self._head_done and not self._framed and self._status not in _NO_BODY:
                self._complete = True  # a body that ends when the server closes
                return
            raise HttpProtocolError("the server closed the connection before the answer was complete")
        self.received += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.reusable = False
            raise HttpProtocolError("the server switched protocols, which this client does not support") from None
        except httptools.HttpParserError as exc:
            self.reusable = False
            raise HttpProtocolError(f"malformed HTTP answer: {exc}") from None
        if self._error is not None:
            self.reusable = False
            raise self._error

    async def exchange(self, request: bytes, method: str, url: str, max_body: int, stream: bool) -> HttpResponse:
        """Write ``request`` and read the answer: all of it, or (``stream``) up to its headers."""
        self._reset(0 if stream else max_body, method == "HEAD")
        await self.send(request)
        while not (self._complete or (stream and self._head_done)):
            await self._feed_once()
        resp = HttpResponse(method, url, self._status, self._reason.decode("latin-1"), self._headers)
        if stream:
            resp._stream = self
        else:
            resp.content = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        return resp

    async def next_chunk(self) -> bytes | None:
        """The next piece of a streamed body; None once it is complete."""
        while not self._chunks:
            if self._complete:
                return None
            await self._feed_once()
        chunk = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks = []
        return chunk

    @property
    def complete(self) -> bool:
        return self._complete

    # -- life in the pool ---------------------------------------------------------------------

    def idle_and_open(self) -> bool:
        """Without reading anything: is this idle connection still good (not closed by the
        server, no stray bytes waiting)?"""
        try:
            self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
        except BlockingIOError:
            return True
        except OSError:
            return False
        return False  # closed (b"") or bytes nobody asked for

    def park(self) -> None:
        self.idle_since = time.monotonic()

    def close(self) -> None:
        self.reusable = False
        try:
            trio.lowlevel.notify_closing(self.sock)
        except RuntimeError:
            pass  # outside trio: nobody can be waiting on it
        self.sock.close()
