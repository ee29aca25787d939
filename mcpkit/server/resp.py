"""A lean Redis client for the scale-out link's own commands: RESP2 over a few pooled
connections, several commands per round trip.

The session records of handshake-era sessions are written on every ``initialize`` and
``DELETE``: through coredis that is ~300 µs of CPU per round trip on trio (a writer task and a
reader task per command, anyio scopes at each step, pipeline objects), against ~20 µs for the
bytes themselves. This client writes the commands, reads the replies, and nothing else: the
link (``redis_link.py``) keeps deadlines, failure accounting and the bus (on coredis).

Plain TCP (``redis://``), Unix sockets (``unix://``) and TLS (``rediss://``, the system's
certificate store) are read from the same URL as coredis reads; ``AUTH`` and ``SELECT`` are
sent on each new connection.
"""

from __future__ import annotations

import socket
import ssl
import urllib.parse
from typing import Any

import trio

from ..httpclient.sockio import READ_SIZE, PlainSocket, connect_socket

#: idle connections kept for reuse (more are opened when more commands are in flight at once)
MAX_IDLE = 16
#: connections open at once, at most; past it commands wait for one (in order)
MAX_OPEN = 64


class RespError(Exception):
    """An error reply (``-ERR ...``, ``-OOM ...``): Redis is there and said no."""


class _Incomplete(Exception):
    pass


def encode(*commands: tuple[Any, ...]) -> bytes:
    out = bytearray()
    for command in commands:
        out += b"*%d\r\n" % len(command)
        for arg in command:
            if isinstance(arg, str):
                arg = arg.encode()
            elif isinstance(arg, (int, float)) and not isinstance(arg, bool):
                arg = repr(arg).encode()
            elif not isinstance(arg, (bytes, bytearray, memoryview)):
                raise TypeError(f"cannot send {type(arg).__name__} to Redis")
            out += b"$%d\r\n" % len(arg)
            out += arg
            out += b"\r\n"
    return bytes(out)


def _parse(buf: bytearray, pos: int) -> tuple[Any, int]:
    """One reply from ``buf`` at ``pos``: (value, position after it); _Incomplete if it is not all there."""
    end = buf.find(b"\r\n", pos)
    if end < 0:
        raise _Incomplete
    kind, line = buf[pos], bytes(buf[pos + 1:end])
    pos = end + 2
    if kind == 43:  # '+'
        return line, pos
    if kind == 45:  # '-'
        return RespError(line.decode(errors="replace")), pos
    if kind == 58:  # ':'
        return int(line), pos
    if kind == 36:  # '$'
        size = int(line)
        if size < 0:
            return None, pos
        if len(buf) < pos + size + 2:
            raise _Incomplete
        return bytes(buf[pos:pos + size]), pos + size + 2
    if kind == 42:  # '*'
        count = int(line)
        if count < 0:
            return None, pos
        items = []
        for _ in range(count):
            item, pos = _parse(buf, pos)
            items.append(item)
        return items, pos
    raise ConnectionError(f"not a RESP reply: {bytes(buf[pos - len(line) - 3:pos])!r}")


class _TlsIo:
    """RESP over TLS: the same two calls as PlainSocket."""

    def __init__(self, stream: trio.SSLStream) -> None:
        self.stream = stream

    async def recv(self) -> bytes:
        try:
            return await self.stream.receive_some(READ_SIZE)
        except trio.BrokenResourceError as exc:
            raise ConnectionResetError(str(exc)) from None

    async def send(self, data: bytes) -> None:
        try:
            await self.stream.send_all(data)
        except trio.BrokenResourceError as exc:
            raise BrokenPipeError(str(exc)) from None

    def close(self) -> None:
        self.stream.transport_stream.socket.close()  # type: ignore[attr-defined]


class _PlainIo(PlainSocket):
    __slots__ = ()

    async def send(self, data: bytes) -> None:
        sent = self.send_now(data)
        if sent < len(data):
            await self.send_rest(data[sent:])

    def close(self) -> None:
        trio.lowlevel.notify_closing(self.sock)
        self.sock.close()


class RespConnection:
    def __init__(self, io: Any) -> None:
        self.io = io
        self.buf = bytearray()

    async def roundtrip(self, payload: bytes, replies: int) -> list[Any]:
        await self.io.send(payload)
        out: list[Any] = []
        buf, pos = self.buf, 0
        while len(out) < replies:
            try:
                item, pos = _parse(buf, pos)
            except _Incomplete:
                del buf[:pos]
                pos = 0
                data = await self.io.recv()
                if not data:
                    raise ConnectionResetError("Redis closed the connection")
                buf += data
                continue
            out.append(item)
        del buf[:pos]
        return out

    async def replies(self) -> Any:
        """Every reply that arrives, as it arrives (a subscribed connection's messages)."""
        buf = self.buf
        while True:
            pos = 0
            try:
                while True:
                    item, pos = _parse(buf, pos)
                    yield item
            except _Incomplete:
                del buf[:pos]
            data = await self.io.recv()
            if not data:
                raise ConnectionResetError("Redis closed the connection")
            buf += data

    def close(self) -> None:
        self.io.close()

    def alive(self) -> bool:
        """Without reading anything: is this idle connection still open (Redis did not restart
        or drop it meanwhile)? A closed one is not reused, so no command is sent into it."""
        sock = getattr(self.io, "sock", None)
        if sock is None:
            return True
        try:
            return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) != b""
        except BlockingIOError:
            return True
        except OSError:
            return False


class RespPool:
    """Connections to one Redis, each carrying one batch of commands at a time."""

    def __init__(self, url: str) -> None:
        parts = urllib.parse.urlsplit(url)
        query = urllib.parse.parse_qs(parts.query)
        self.scheme = parts.scheme
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 6379
        self.path = urllib.parse.unquote(parts.path) if parts.scheme == "unix" else ""
        db = query.get("db", [""])[0] if parts.scheme == "unix" else parts.path.lstrip("/")
        self.db = int(db) if db.isdigit() else 0
        self.username = urllib.parse.unquote(parts.username) if parts.username else None
        self.password = urllib.parse.unquote(parts.password) if parts.password else None
        self._idle: list[RespConnection] = []
        self._open = 0  # connections in use or idle
        self._waiters = trio.lowlevel.ParkingLot()

    async def _connect(self) -> RespConnection:
        if self.scheme == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            addr: Any = self.path
        else:
            infos = await trio.socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
            family, kind, proto, _, addr = infos[0]
            sock = socket.socket(family, kind, proto)
        try:
            await connect_socket(sock, addr)
            if self.scheme == "rediss":
                stream = trio.SSLStream(trio.SocketStream(trio.socket.from_stdlib_socket(sock)),
                                        ssl.create_default_context(), server_hostname=self.host)
                await stream.do_handshake()
                conn = RespConnection(_TlsIo(stream))
            else:
                conn = RespConnection(_PlainIo(sock))
        except BaseException:
            sock.close()
            raise
        hello: list[tuple[Any, ...]] = []
        if self.password is not None:
            hello.append(("AUTH", self.username, self.password) if self.username else ("AUTH", self.password))
        if self.db:
            hello.append(("SELECT", self.db))
        if hello:
            await _set_up(conn, hello)
        return conn

    async def execute(self, *commands: tuple[Any, ...]) -> list[Any]:
        """The replies to ``commands``, sent in one write; an error reply is a RespError in its
        place. OSError when Redis is out of reach; a connection that failed or was cancelled
        mid-way is closed, never reused."""
        conn = await self._acquire()
        try:
            replies = await conn.roundtrip(encode(*commands), len(commands))
        except BaseException:
            self._release(conn, keep=False)
            raise
        self._release(conn, keep=True)
        return replies

    async def _acquire(self) -> RespConnection:
        while True:
            while self._idle:
                conn = self._idle.pop()
                if conn.alive():
                    return conn
                conn.close()
                self._open -= 1
            if self._open < MAX_OPEN:
                break
            await self._waiters.park()
        self._open += 1
        try:
            return await self._connect()
        except BaseException:
            self._open -= 1
            self._waiters.unpark()
            raise

    def _release(self, conn: RespConnection, *, keep: bool) -> None:
        if keep and len(self._idle) < MAX_IDLE:
            self._idle.append(conn)
        else:
            conn.close()
            self._open -= 1
        self._waiters.unpark()

    async def subscribe(self, channel: str) -> RespConnection:
        """A new connection subscribed to ``channel``: read its messages with ``replies()``
        (``[b"message", channel, data]`` each)."""
        conn = await self._connect()
        await _set_up(conn, [("SUBSCRIBE", channel)])
        return conn

    def close(self) -> None:
        while self._idle:
            self._idle.pop().close()
            self._open -= 1


async def _set_up(conn: RespConnection, commands: list[tuple[Any, ...]]) -> None:
    """Send the commands that set a new connection up (AUTH, SELECT, SUBSCRIBE); an error reply
    or a failure closes it and raises."""
    try:
        for reply in await conn.roundtrip(encode(*commands), len(commands)):
            if isinstance(reply, RespError):
                raise reply
    except BaseException:
        conn.close()
        raise


__all__ = ["RespError", "RespPool", "encode"]
