"""Moving bytes for one connection: a plain socket driven directly, or any trio stream (TLS).

A plain socket is read and written with non-blocking calls first (``mcpkit.httpclient.sockio``,
which the HTTP client shares), so a request that finds its bytes ready costs no extra trip
through the scheduler.
"""

from __future__ import annotations

import math
import socket
from typing import Protocol

import trio

from ....httpclient.sockio import READ_SIZE, PlainSocket


class Io(Protocol):
    peer: tuple[str, int] | None
    local: tuple[str, int] | None

    async def start(self) -> None:
        """Whatever must happen before the first request (the TLS handshake)."""

    async def recv(self) -> bytes:
        """Some bytes; b"" at end of input. Raises OSError / trio.BrokenResourceError when reset."""

    async def send(self, data: bytes, timeout: float = math.inf) -> None:
        """Write everything, in order with other sends; trio.TooSlowError when the peer took
        no byte for ``timeout`` seconds."""

    def shutdown_write(self) -> None: ...

    def peer_closed(self) -> bool:
        """Without reading anything: has the peer closed (or reset) the connection?"""

    async def aclose(self) -> None: ...


class SocketIo(PlainSocket):
    __slots__ = ("peer", "local", "_lock")

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(sock)
        try:
            self.peer = sock.getpeername()[:2]
            self.local = sock.getsockname()[:2]
        except OSError:
            self.peer = self.local = None
        self._lock = trio.StrictFIFOLock()  # taken only by a send that has to wait

    async def start(self) -> None:
        return None

    async def send(self, data: bytes, timeout: float = math.inf) -> None:
        if not self._lock.locked():
            sent = self.send_now(data)
            if sent == len(data):
                return
            data = data[sent:]
        async with self._lock:
            await self.send_rest(data, timeout)

    def shutdown_write(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass

    def peer_closed(self) -> bool:
        return _peek_closed(self.sock)

    async def aclose(self) -> None:
        trio.lowlevel.notify_closing(self.sock)
        self.sock.close()


class StreamIo:
    """Any trio stream; used for TLS (trio.SSLStream over the socket)."""

    def __init__(self, stream: trio.abc.Stream, sock: socket.socket) -> None:
        self.stream = stream
        self.sock = sock  # the TCP socket under the stream, to notice the peer leaving
        try:
            self.peer, self.local = sock.getpeername()[:2], sock.getsockname()[:2]
        except OSError:
            self.peer = self.local = None
        self._send_lock = trio.StrictFIFOLock()

    async def start(self) -> None:
        if isinstance(self.stream, trio.SSLStream):
            try:
                await self.stream.do_handshake()
            except trio.BrokenResourceError as exc:
                raise ConnectionResetError(f"TLS handshake failed: {exc}") from None

    async def recv(self) -> bytes:
        try:
            return await self.stream.receive_some(READ_SIZE)
        except trio.BrokenResourceError as exc:
            raise ConnectionResetError(str(exc)) from None

    async def send(self, data: bytes, timeout: float = math.inf) -> None:
        async with self._send_lock:
            try:
                with trio.fail_after(timeout):
                    await self.stream.send_all(data)
            except trio.BrokenResourceError as exc:
                raise BrokenPipeError(str(exc)) from None

    def shutdown_write(self) -> None:
        pass  # TLS has no half-close worth the round trip here; the close follows

    def peer_closed(self) -> bool:
        return _peek_closed(self.sock)

    async def aclose(self) -> None:
        with trio.move_on_after(1) as scope:
            scope.shield = True
            try:
                await self.stream.aclose()
            except (trio.BrokenResourceError, OSError):
                pass


def _peek_closed(sock: socket.socket) -> bool:
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
