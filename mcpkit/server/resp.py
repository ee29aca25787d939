"""A lean Redis client for the scale-out link's own commands: RESP2 on one connection that
commands from concurrent requests share (auto-pipelining).

The session records of handshake-era sessions are written on every ``initialize`` and
``DELETE``: through coredis that is ~300 µs of CPU per round trip on trio (a writer task and a
reader task per command, anyio scopes at each step, pipeline objects), against ~20 µs for the
bytes themselves. This client writes the commands, reads the replies, and nothing else: the
link (``redis_link.py``) keeps deadlines, failure accounting and the bus.

Auto-pipelining (ioredis's autopipelining is the precedent). A round trip's cost on this side
is mostly system calls — a ``send`` that wakes redis-server, an ``epoll`` wait, a ``recv`` — so
commands that requests issue at the same time share them:

* writing: the task that queues a batch of commands on an idle writer yields once (a
  checkpoint, never a timer) and then writes everything queued meanwhile in one ``send``: every
  request the scheduler runs in the same pass joins it. A lone command pays that one
  checkpoint and nothing else.
* reading: replies come back in the order the commands went out. One task at a time reads —
  the oldest waiting caller, no task of our own — hands every batch whose replies are all there
  its replies, and wakes its caller; when its own batch is done it passes the reading on to the
  next caller still waiting.
* a caller that gives up (its deadline, a cancellation) leaves its batch behind: its replies
  are read and thrown away, the others' are not affected. Only a connection that sent nothing
  back for ``STALL_S`` is closed on giving up (Redis hung, not slow).
* a connection that fails (reset, closed, a write cut short) fails exactly the batches pending
  on it; the next command opens a new one. An error reply (``-ERR``, ``-OOM``) is a value in
  its own command's place and touches nothing else.
* bounded: one connection for commands (plus one per subscription); at most ``MAX_PENDING``
  batches in flight on it, later callers wait for room.

Plain TCP (``redis://``), Unix sockets (``unix://``) and TLS (``rediss://``, the system's
certificate store) are read from the same URL as coredis reads; ``AUTH`` and ``SELECT`` are
sent on each new connection.
"""

from __future__ import annotations

import socket
import ssl
import urllib.parse
from collections import deque
from typing import Any

import trio

from ..httpclient.sockio import READ_SIZE, PlainSocket, connect_socket

#: batches of commands in flight on the connection at most; past it callers wait for room
MAX_PENDING = 1024
#: a caller that gives up after the connection sent nothing back for this long closes it
STALL_S = 1.0


class RespError(Exception):
    """An error reply (``-ERR ...``, ``-OOM ...``): Redis is there and said no."""


class _Incomplete(Exception):
    pass


def encode(*commands: tuple[Any, ...]) -> bytes:
    parts: list[bytes] = []
    add = parts.append
    for command in commands:
        add(b"*%d\r\n" % len(command))
        for arg in command:
            kind = type(arg)
            if kind is str:
                arg = arg.encode()
            elif kind is int or kind is float:
                arg = repr(arg).encode()
            elif not isinstance(arg, (bytes, bytearray, memoryview)) or kind is bool:
                if isinstance(arg, (int, float)) and kind is not bool:
                    arg = repr(arg).encode()
                else:
                    raise TypeError(f"cannot send {kind.__name__} to Redis")
            add(b"$%d\r\n%b\r\n" % (len(arg), arg))
    return b"".join(parts)


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
    """RESP over TLS: the same calls as _PlainIo."""

    def __init__(self, stream: trio.SSLStream) -> None:
        self.stream = stream

    async def recv(self) -> bytes:
        try:
            return await self.stream.receive_some(READ_SIZE)
        except trio.BrokenResourceError as exc:
            raise ConnectionResetError(str(exc)) from None

    recv_more = recv

    async def send(self, data: bytes | bytearray) -> None:
        try:
            await self.stream.send_all(data)
        except trio.BrokenResourceError as exc:
            raise BrokenPipeError(str(exc)) from None

    def close(self) -> None:
        sock = self.stream.transport_stream.socket  # type: ignore[attr-defined]
        trio.lowlevel.notify_closing(sock)
        sock.close()


class _PlainIo(PlainSocket):
    __slots__ = ()

    async def send(self, data: bytes | bytearray) -> None:
        sent = self.send_now(data)
        if sent < len(data):
            await self.send_rest(memoryview(data)[sent:])

    #: bytes that were not there when last looked (replies just asked for): waited for first
    recv_more = PlainSocket.recv_waiting

    def close(self) -> None:
        trio.lowlevel.notify_closing(self.sock)
        self.sock.close()


class _Batch:
    """One caller's commands on a connection: how many replies it waits for, and those come."""

    __slots__ = ("count", "replies", "task", "done", "error", "queued_at")

    def __init__(self, count: int, now: float) -> None:
        self.count = count
        self.replies: list[Any] = []
        self.task: Any = None  # its caller, while parked
        self.done = False
        self.error: BaseException | None = None  # the connection failed before its replies came
        self.queued_at = now


class _EndOfPass(trio.abc.Instrument):
    """Writes what connections queued during a scheduler pass just before trio waits for I/O:
    requests that the scheduler runs in one pass share one ``send``, and a lone one is not
    delayed at all."""

    def __init__(self) -> None:
        self.due: list[RespConnection] = []

    def before_io_wait(self, timeout: float) -> None:
        if self.due:
            due, self.due = self.due, []
            for conn in due:
                conn.write_now()


_END_OF_PASS: trio.lowlevel.RunVar[_EndOfPass] = trio.lowlevel.RunVar("mcpkit_resp_end_of_pass")


def _end_of_pass() -> _EndOfPass:
    try:
        return _END_OF_PASS.get()
    except LookupError:
        hook = _EndOfPass()
        trio.lowlevel.add_instrument(hook)
        _END_OF_PASS.set(hook)
        return hook


def _wake(batch: _Batch) -> None:
    task = batch.task
    if task is not None:
        batch.task = None
        trio.lowlevel.reschedule(task)


def _abort(batch: _Batch) -> Any:
    def abort(_: Any) -> trio.lowlevel.Abort:
        batch.task = None
        return trio.lowlevel.Abort.SUCCEEDED
    return abort


class _Closed(Exception):
    """The connection failed before this batch was queued on it: use a new one."""


class RespConnection:
    """One connection; batches from concurrent callers pipelined on it (see the module text)."""

    def __init__(self, io: Any) -> None:
        self.io = io
        self.buf = bytearray()  # read, not yet parsed
        self.out = bytearray()  # queued, not yet written
        self.pending: deque[_Batch] = deque()  # written or queued, in order, waiting for replies
        self.writing = False
        self.reading = False
        self.broken: BaseException | None = None
        self.received_at = -1.0  # trio clock of the latest bytes read
        self.room = trio.lowlevel.ParkingLot()  # callers waiting for fewer batches in flight

    async def call(self, payload: bytes, count: int) -> list[Any]:
        """The ``count`` replies to ``payload`` (encoded commands), sent with whatever other
        callers queue in the same scheduler pass. OSError when the connection fails first."""
        while len(self.pending) >= MAX_PENDING and self.broken is None:
            await self.room.park()
        if self.broken is not None:
            raise _Closed
        batch = _Batch(count, trio.current_time())
        self.pending.append(batch)
        self.out += payload
        if not self.writing:
            self.writing = True
            if isinstance(self.io, _PlainIo):  # written when this scheduler pass ends, with what joins it
                _end_of_pass().due.append(self)
            else:
                await self._write()
        try:
            while not batch.done:
                if self.reading:  # another caller reads; it wakes this one when the replies are here
                    batch.task = trio.lowlevel.current_task()
                    await trio.lowlevel.wait_task_rescheduled(_abort(batch))
                else:
                    await self._read_for(batch)
        except BaseException:
            if not batch.done and self.received_at < batch.queued_at \
                    and trio.current_time() - batch.queued_at >= STALL_S:
                self._fail(ConnectionResetError(f"Redis sent nothing back for {STALL_S:g} s"))
            raise  # its replies, when they come, are read and thrown away
        if batch.error is not None:
            raise ConnectionResetError(f"connection to Redis lost: {batch.error}")
        return batch.replies

    def write_now(self) -> None:
        """Write what was queued (called once the scheduler pass ends); what the kernel does not
        take at once is written by a task of its own, and nothing queued meanwhile overtakes it."""
        if self.broken is not None or not self.out:
            self.writing = False
            return
        data, self.out = self.out, bytearray()
        try:
            sent = self.io.send_now(data)
        except OSError as exc:
            self.writing = False
            self._fail(exc)
            return
        if sent < len(data):
            trio.lowlevel.spawn_system_task(self._write, memoryview(data)[sent:], name="resp write")
        else:
            self.writing = False

    async def _write(self, rest: Any = b"") -> None:
        """Write ``rest``, then whatever is queued, waiting for room (TLS, or a full kernel buffer)."""
        try:
            if rest:
                await self.io.send(rest)
            else:  # every task that runs in this scheduler pass may queue commands: one send for all
                await trio.lowlevel.cancel_shielded_checkpoint()
            while self.out and self.broken is None:
                data, self.out = self.out, bytearray()
                await self.io.send(data)
        except BaseException as exc:  # a write cut short: the bytes on the wire make no sense now
            self._fail(exc if isinstance(exc, OSError) else ConnectionResetError("a write to Redis was cut short"))
            if not rest:
                raise  # a caller's task (TLS); a task of our own just ends
        finally:
            self.writing = False

    async def _read_for(self, mine: _Batch) -> None:
        """Read and hand out replies until ``mine``'s are all there; then let the next waiting
        caller read."""
        self.reading = True
        try:
            while not mine.done:
                data = await self.io.recv_more()
                if not data:
                    raise ConnectionResetError("Redis closed the connection")
                self.received_at = trio.current_time()
                self.buf += data
                self._deliver()
        except trio.Cancelled:
            raise
        except Exception as exc:  # reset, closed, not RESP: fails every batch pending here
            self._fail(exc)
        finally:
            self.reading = False
            for batch in self.pending:
                if batch.task is not None:  # the oldest caller still waiting reads next
                    _wake(batch)
                    break

    def _deliver(self) -> None:
        buf, pos, pending = self.buf, 0, self.pending
        try:
            while pending:
                item, pos = _parse(buf, pos)
                batch = pending[0]
                batch.replies.append(item)
                if len(batch.replies) == batch.count:
                    pending.popleft()
                    batch.done = True
                    _wake(batch)
                    if self.room:
                        self.room.unpark()
        except _Incomplete:
            pass
        del buf[:pos]

    def _fail(self, exc: BaseException) -> None:
        """The connection is lost: close it, fail exactly the batches pending on it."""
        if self.broken is None:
            self.broken = exc
            self.io.close()
        pending, self.pending = self.pending, deque()
        for batch in pending:
            batch.done, batch.error = True, exc
            _wake(batch)
        self.room.unpark_all()

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
        self._fail(ConnectionResetError("closed"))

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
    """Commands to one Redis, pipelined on one connection (made again when it fails), and
    subscriptions on connections of their own."""

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
        self._conn: RespConnection | None = None
        self._lock = trio.Lock()  # one connect at a time
        self.connections = 0  # made so far (tests, stats)

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
                try:
                    await stream.do_handshake()
                except trio.BrokenResourceError as exc:  # an OSError, as every other way Redis is out of reach
                    raise ConnectionError(f"TLS handshake with Redis at {self.host}:{self.port} failed: "
                                          f"{exc.__cause__ or exc}") from None
                conn = RespConnection(_TlsIo(stream))
            else:
                conn = RespConnection(_PlainIo(sock))
        except BaseException:
            sock.close()
            raise
        self.connections += 1
        hello: list[tuple[Any, ...]] = []
        if self.password is not None:
            hello.append(("AUTH", self.username, self.password) if self.username else ("AUTH", self.password))
        if self.db:
            hello.append(("SELECT", self.db))
        if hello:
            await _set_up(conn, encode(*hello), len(hello))
        return conn

    def _usable(self, conn: RespConnection | None) -> bool:
        # a connection with nothing pending is looked at (one non-blocking peek) before reuse
        return conn is not None and conn.broken is None and (bool(conn.pending) or conn.alive())

    async def execute(self, *commands: tuple[Any, ...]) -> list[Any]:
        """The replies to ``commands``, in one batch (sent with those of concurrent callers);
        an error reply is a RespError in its place. OSError when Redis is out of reach or the
        connection failed before the replies came."""
        payload = encode(*commands)
        for _ in range(2):
            conn = self._conn
            if not self._usable(conn):
                conn = await self._connection()
            try:
                return await conn.call(payload, len(commands))  # type: ignore[union-attr]
            except _Closed:
                continue  # it failed while this caller waited for room: not sent, so a new one
        raise ConnectionResetError("connection to Redis lost")

    async def _connection(self) -> RespConnection:
        async with self._lock:
            conn = self._conn
            if self._usable(conn):
                return conn  # type: ignore[return-value]
            if conn is not None:
                conn.close()
            self._conn = None
            self._conn = await self._connect()
            return self._conn

    async def subscribe(self, channel: str) -> RespConnection:
        """A new connection subscribed to ``channel``: read its messages with ``replies()``
        (``[b"message", channel, data]`` each)."""
        return await self._subscribed("SUBSCRIBE", [channel])

    async def psubscribe(self, *patterns: str) -> RespConnection:
        """A new connection subscribed to channels matching ``patterns``; messages are
        ``[b"pmessage", pattern, channel, data]``."""
        return await self._subscribed("PSUBSCRIBE", list(patterns))

    async def _subscribed(self, command: str, names: list[str]) -> RespConnection:
        conn = await self._connect()
        await _set_up(conn, encode((command, *names)), len(names))  # one confirmation per name
        return conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

async def _set_up(conn: RespConnection, payload: bytes, count: int) -> None:
    """Send the commands that set a new connection up (AUTH, SELECT, SUBSCRIBE: ``count``
    replies); an error reply or a failure closes it and raises."""
    try:
        for reply in await conn.call(payload, count):
            if isinstance(reply, RespError):
                raise reply
    except BaseException:
        conn.close()
        raise


__all__ = ["RespError", "RespPool", "encode"]
