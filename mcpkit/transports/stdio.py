"""stdio transport: newline-delimited JSON-RPC on stdin/stdout, requests served concurrently."""

from __future__ import annotations

import logging
import os
import secrets
import signal
import stat
import sys
import functools
from typing import Any, Awaitable, Callable

import trio

from ..protocol import jsonrpc
from ..protocol.framing import LineSplitter, Oversized
from ..protocol.jsonrpc import ProtocolError
from ..protocol.connection import (
    Batch, CancelRequested, Event, NotificationReceived, Reply, RequestReceived, ResponseReceived, ServerConnection,
)
from ..server.app import App
from ..server.context import STOP_BOUND_S, InFlight, PendingRequests
from ..server.dispatch import Dispatcher
from ..server.errors import busy, shutting_down

log = logging.getLogger("mcpkit.stdio")
READ_SIZE = 65536
#: seconds the requests still running at the end of input get to answer before they are stopped
EOF_GRACE_S = 2.0
#: A fixed name for request tasks spares trio from formatting one per spawn.
_TASK_NAME = "mcpkit.stdio.request"


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


class StdioSession:
    """One stdio process = one connection; every request runs in its own task."""

    def __init__(self, app: App, out: _Out) -> None:
        self.app = app
        self.out = out
        self.conn: ServerConnection = app.new_connection()
        self.conn.owner = f"stdio:{secrets.token_hex(8)}"  # one process, one client: its tasks are its own
        self.dispatcher = Dispatcher(app)
        self.in_flight = InFlight()
        self.pending = PendingRequests()
        self.running = 0  # requests (and batches) being served
        self._idle = trio.Event()  # set while none is
        self._idle.set()

    # Peer protocol (one peer serves every request on stdio)
    async def notify(self, data: bytes) -> None:
        await self.out.write(data)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        return await self.pending.ask(self.conn.next_request_id(), self.out.write, method, params)

    async def take(self, line: bytes | Oversized, nursery: trio.Nursery) -> None:
        """One input line: answer it, or start serving it."""
        if isinstance(line, Oversized):
            limit = self.app.settings.max_message_bytes
            log.warning("dropped an input line of %d+ bytes (max_message_bytes is %d)", line.size, limit)
            err = ProtocolError(jsonrpc.INVALID_REQUEST, f"Invalid Request: the message is larger than the limit of {limit} bytes (max_message_bytes)")
            await self.out.write(jsonrpc.encode_error(None, err))
            return
        await self.handle(self.conn.receive(line), nursery)

    async def handle(self, events: list[Event], nursery: trio.Nursery) -> None:
        for ev in events:
            if isinstance(ev, RequestReceived):
                if self.running >= self.app.settings.max_concurrent_requests:
                    await self.out.write(jsonrpc.encode_error(ev.id, busy(self.app.settings.max_concurrent_requests)))
                    continue
                self._started()
                nursery.start_soon(self._serve, ev, name=_TASK_NAME)
            elif isinstance(ev, Reply):
                await self.out.write(ev.data)
            elif isinstance(ev, CancelRequested):
                self.in_flight.cancel(ev.request_id)
            elif isinstance(ev, ResponseReceived):
                self.pending.deliver(ev)
            elif isinstance(ev, Batch):
                self._started()
                nursery.start_soon(self._serve_batch, ev)
            elif isinstance(ev, NotificationReceived):
                pass  # roots/list_changed, progress from the client: nothing to do

    async def _serve(self, req: RequestReceived) -> None:
        try:
            data = await self.dispatcher.handle(req, self, self.in_flight)
            if data is not None:
                await self.out.write(data)
        finally:
            self._finished()

    async def _serve_batch(self, batch: Batch) -> None:
        answers: list[bytes] = []

        async def one(req: RequestReceived) -> None:
            data = await self.dispatcher.handle(req, self, self.in_flight)
            if data is not None:
                answers.append(data)

        try:
            async with trio.open_nursery() as nursery:
                for ev in batch.events:
                    if isinstance(ev, RequestReceived):
                        nursery.start_soon(one, ev)
                    elif isinstance(ev, Reply):
                        answers.append(ev.data)
                    else:
                        await self.handle([ev], nursery)
            if answers:
                await self.out.write(jsonrpc.encode_batch(answers))
        finally:
            self._finished()

    def _started(self) -> None:
        if self.running == 0:
            self._idle = trio.Event()
        self.running += 1

    def _finished(self) -> None:
        self.running -= 1
        if self.running == 0:
            self._idle.set()

    async def idle(self) -> None:
        """Wait until no request is being served."""
        await self._idle.wait()

    async def answer_stuck(self) -> int:
        """Answer "server shutting down" for each request still inside its handler (after it
        was stopped: it ignores cancellation); how many there were."""
        stuck = list(self.in_flight.scopes)
        with trio.move_on_after(STOP_BOUND_S):
            for request_id in stuck:
                await self.out.write(jsonrpc.encode_error(request_id, shutting_down()))
        return len(stuck)

    async def forward_changes(self) -> None:
        """Handshake era: send list_changed / resources/updated to an initialized client."""
        with self.app.hub.listen() as events:
            async for event, arg in events:
                notice = self.conn.change_notice(event, arg)
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
    session = StdioSession(app, out)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.forward_changes)
            reading, grace = trio.CancelScope(), trio.CancelScope()  # a signal ends both
            await nursery.start(_on_signal, (reading, grace))  # before the first line is read
            with reading:
                lines = LineSplitter(app.settings.max_message_bytes)
                while chunk := await read():
                    for line in lines.feed(chunk):
                        await session.take(line, nursery)
                for line in lines.rest():
                    await session.take(line, nursery)
            app.hub.close()  # subscriptions end with their final answer
            with grace:
                grace.deadline = trio.current_time() + EOF_GRACE_S
                await session.idle()
            await _stop_requests(app, session, own)
            nursery.cancel_scope.cancel()
    except* trio.BrokenResourceError:
        log.info("stdout closed; stopping")


async def _stop_requests(app: App, session: StdioSession, own: bool) -> None:
    """Stop what still runs: each request answers "server shutting down" (within a bound)."""
    app.requests.stop()  # those not yet started are stopped as they start
    if not session.running:
        return
    with trio.move_on_after(STOP_BOUND_S):
        await session.idle()
    if not session.running:
        return
    stuck = await session.answer_stuck()
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
