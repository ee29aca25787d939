"""stdio transport: newline-delimited JSON-RPC on stdin/stdout, requests served concurrently."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import stat
import sys
import functools
import time
from typing import Any, Awaitable, Callable

import trio

from ..protocol import jsonrpc
from ..protocol.framing import LineSplitter, Oversized
from ..protocol.jsonrpc import ProtocolError
from ..protocol.jsonrpc import Answer
from ..protocol.session import Run, ServerSession
from ..server.app import App
from ..server.context import STOP_BOUND_S
from ..server.dispatch import Dispatcher
from ..server.errors import shutting_down
from ..server.session_runner import SessionRunner

log = logging.getLogger("mcpkit.stdio")
READ_SIZE = 65536
#: seconds the requests still running at the end of input get to answer before they are stopped
EOF_GRACE_S = 2.0


class _Out:
    """Serialised writes of whole lines to stdout."""

    def __init__(self, stream: trio.abc.SendStream) -> None:
        self._stream = stream
        self._lock = trio.StrictFIFOLock()

    async def write(self, data: bytes) -> None:
        async with self._lock:
            await self._stream.send_all(data + b"\n")


class _FdOut(_Out):
    """Line writes straight to a non-blocking pipe: one write() when the pipe has room,
    waiting (in order, under the lock) only when it is full."""

    def __init__(self, fd: int) -> None:
        os.set_blocking(fd, False)
        self._fd = fd
        self._lock = trio.StrictFIFOLock()

    async def write(self, data: bytes) -> None:
        data += b"\n"
        if not self._lock.locked():
            try:
                sent = os.write(self._fd, data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from None
            if sent == len(data):
                return
            data = data[sent:]
        async with self._lock:
            view = memoryview(data)
            while view:
                await trio.lowlevel.wait_writable(self._fd)
                try:
                    view = view[os.write(self._fd, view):]
                except BlockingIOError:
                    continue
                except OSError as exc:
                    raise trio.BrokenResourceError(str(exc)) from None


class _StdoutOutlet:
    """stdio's outlet: every message of every request, and every answer, is a line on stdout."""

    can_ask = True

    def __init__(self, out: _Out) -> None:
        self.out = out

    def channel(self, run: Run) -> "_StdoutOutlet":
        return self  # one pipe carries everything

    async def message(self, data: bytes) -> None:
        await self.out.write(data)

    async def answer(self, answer: Answer) -> None:
        await self.out.write(answer.encode())

    async def reply(self, answer: Answer, origin: Any) -> None:
        await self.out.write(answer.encode())

    async def send_batch(self, answers: list[Answer], origin: Any) -> None:
        await self.out.write(jsonrpc.encode_batch([a.encode() for a in answers]))

    async def elsewhere(self, action: Any) -> None:
        return None  # one process, one client: nothing runs anywhere else

    def done(self) -> None:
        return None


class StdioSession:
    """One stdio process = one session; every request runs in its own task in ``nursery``."""

    def __init__(self, app: App, out: _Out, nursery: trio.Nursery) -> None:
        self.app = app
        self.out = out
        conn = app.new_connection()
        conn.owner = f"stdio:{secrets.token_hex(8)}"  # one process, one client: its tasks are its own
        self.core = ServerSession(conn, max_running=app.settings.max_concurrent_requests)
        self.runner = SessionRunner(self.core, Dispatcher(app), _StdoutOutlet(out), nursery, transport="stdio")

    async def take(self, line: bytes | Oversized) -> None:
        """One input line: answer it, or start serving it."""
        if isinstance(line, Oversized):
            limit = self.app.settings.max_message_bytes
            log.warning("dropped an input line of %d+ bytes (max_message_bytes is %d)", line.size, limit)
            err = ProtocolError(jsonrpc.INVALID_REQUEST, f"Invalid Request: the message is larger than the limit of {limit} bytes (max_message_bytes)")
            await self.out.write(jsonrpc.encode_error(None, err))
            return
        await self.runner.feed(line)

    async def forward_changes(self) -> None:
        """Handshake era: send list_changed / resources/updated to an initialized client."""
        with self.app.hub.listen() as events:
            async for event, arg in events:
                notice = self.core.conn.change_notice(event, arg)
                if notice is not None:
                    await self.out.write(notice)


def _fd_reader(fd: int) -> Callable[[], Awaitable[bytes]]:
    """Read from a non-blocking pipe or socket. After a short read the pipe is known to be
    empty, so the next read waits for it first (no EAGAIN round trip); full reads go on at
    once, with a scheduling point now and then so request tasks run even when input never
    runs dry."""
    os.set_blocking(fd, False)
    drained = False
    streak = 0

    async def read() -> bytes:
        nonlocal drained, streak
        while True:
            if drained:
                await trio.lowlevel.wait_readable(fd)
            try:
                data = os.read(fd, READ_SIZE)
            except BlockingIOError:
                drained = True
                continue
            drained = len(data) < READ_SIZE
            if drained:
                streak = 0
            else:
                streak += 1
                if streak % 8 == 0:
                    await trio.lowlevel.cancel_shielded_checkpoint()
            return data

    return read


def _blocking_reader(fd: int) -> Callable[[], Awaitable[bytes]]:
    """Read what the event loop cannot poll (a regular file, /dev/null) in a worker thread."""

    async def read() -> bytes:
        return await trio.to_thread.run_sync(os.read, fd, READ_SIZE, abandon_on_cancel=True)

    return read


def _stdin_reader() -> Callable[[], Awaitable[bytes]]:
    fd = os.dup(0)
    if os.isatty(fd):  # a terminal: non-blocking mode would leak to the shell
        return functools.partial(_ThreadStream(sys.stdin.buffer, None).receive_some, READ_SIZE)
    mode = os.fstat(fd).st_mode
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        return _fd_reader(fd)
    return _blocking_reader(fd)  # epoll refuses regular files (EPERM)


def _stdout_writer() -> _Out:
    if os.isatty(1):
        return _Out(_ThreadStream(None, sys.stdout.buffer))
    return _FdOut(os.dup(1))


class _ThreadStream(trio.abc.HalfCloseableStream):
    """stdin/stdout through worker threads, for terminals (non-blocking mode would leak to the shell)."""

    def __init__(self, rfile: Any, wfile: Any) -> None:
        self._r, self._w = rfile, wfile

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        return await trio.to_thread.run_sync(self._r.read1, max_bytes or 65536, abandon_on_cancel=True)

    async def send_all(self, data: bytes) -> None:
        def write() -> None:
            self._w.write(data)
            self._w.flush()

        await trio.to_thread.run_sync(write)

    async def wait_send_all_might_not_block(self) -> None:
        return None

    async def send_eof(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


async def serve_stdio(app: App, stdin: trio.abc.ReceiveStream | None = None, stdout: trio.abc.SendStream | None = None) -> None:
    """Serve until stdin closes or SIGTERM/SIGINT arrives.

    At the end of input the requests still running get ``EOF_GRACE_S`` to answer; on a signal
    they get none. Then every request still running is stopped and answers -32000 "server
    shutting down". One that ignores the cancellation is answered the same after
    ``STOP_BOUND_S``; serving the process's own stdin/stdout, the process then exits (status 1)
    without waiting for it.
    """
    own = stdin is None or stdout is None
    if not own:
        out: _Out = _Out(stdout)
        read: Callable[[], Awaitable[bytes]] = functools.partial(stdin.receive_some, READ_SIZE)
    else:
        out, read = _stdout_writer(), _stdin_reader()
    try:
        observers = app.observers
        if observers:
            opened = time.perf_counter()
            observers.session_opened("stdio", None)
        async with trio.open_nursery() as nursery:
            session = StdioSession(app, out, nursery)
            nursery.start_soon(session.forward_changes)
            reading, grace = trio.CancelScope(), trio.CancelScope()  # a signal ends both
            await nursery.start(_on_signal, (reading, grace))  # before the first line is read
            with reading:
                lines = LineSplitter(app.settings.max_message_bytes)
                while chunk := await read():
                    for line in lines.feed(chunk):
                        await session.take(line)
                for line in lines.rest():
                    await session.take(line)
            app.hub.close()  # subscriptions end with their final answer
            with grace:
                grace.deadline = trio.current_time() + EOF_GRACE_S
                await session.runner.idle()
            await _stop_requests(app, session, own)
            nursery.cancel_scope.cancel()
    except* trio.BrokenResourceError:
        log.info("stdout closed; stopping")
    finally:
        if observers:
            observers.session_closed("stdio", None, time.perf_counter() - opened)


async def _stop_requests(app: App, session: StdioSession, own: bool) -> None:
    """Stop what still runs: each request answers "server shutting down" (within a bound)."""
    app.requests.stop()  # those not yet started are stopped as they start
    runner = session.runner
    if not runner.serving:
        return
    with trio.move_on_after(STOP_BOUND_S):
        await runner.idle()
    if not runner.serving:
        return
    with trio.move_on_after(STOP_BOUND_S):
        stuck = await runner.answer_stuck(lambda rid: Answer.failure(rid, shutting_down()))
    log.error("%d request(s) did not stop within %g s of being cancelled (a tool that ignores cancellation); "
              "answered them and left them behind", stuck, STOP_BOUND_S)
    if own:  # nothing else can end a task that ignores cancellation
        sys.stderr.flush()
        os._exit(1)


async def _on_signal(scopes: tuple[trio.CancelScope, ...], *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for signum in signals:
            log.info("received %s; stopping", signal.Signals(signum).name)
            for scope in scopes:
                scope.cancel()
            return
