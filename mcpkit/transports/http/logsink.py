"""Log lines to stderr that never make the server wait.

A blocking write to stderr stalls the whole event loop once stderr is a pipe nobody reads (a
log shipper that died, a terminal scrolled back with ^S): the kernel's pipe buffer fills and
the next line waits for ever. Here every line is written with a call that cannot block:

- on a pipe, FIFO or terminal, through a file description of our own opened with
  ``O_NONBLOCK`` (``/proc/self/fd/2``), so the flag never touches the description the parent
  shell or the other workers share;
- on a socket (systemd's journal), with ``MSG_DONTWAIT``;
- on a regular file, plainly (a file does not fill up the way a pipe does).

What the kernel will not take now waits in a small buffer (``MAX_PENDING`` bytes); past it
whole lines are dropped and counted, and once stderr drains a line says how many were lost.
``flush`` runs every second while the HTTP application runs, so held lines and that count come
out even when nothing else is logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
import stat
import sys
import threading
from typing import AsyncIterator, Callable

import trio

MAX_PENDING = 64 * 1024
FLUSH_S = 1.0


class StderrSink:
    def __init__(self, fd: int = 2, max_pending: int = MAX_PENDING) -> None:
        self.max_pending = max_pending
        self.dropped = 0  # lines dropped since the last report
        self.dropped_total = 0
        self._pending = bytearray()  # starts with the rest of a line the kernel took part of
        self._lock = threading.Lock()  # the access log writes from the event loop, logging from any thread
        self._send = _nonblocking_writer(fd)

    def write(self, line: bytes, lines: int = 1) -> None:
        """Write one line (with its newline; or ``lines`` of them together) now, hold it, or
        drop and count it."""
        with self._lock:
            if self._drain():
                sent = self._send(line)
                if sent == len(line):
                    return
                if sent:  # the kernel took the start of it: the rest must follow before anything else
                    rest = line[sent:]
                    self._pending += rest if len(rest) <= self.max_pending else rest[: self.max_pending] + b" [cut]\n"
                    return
            if len(self._pending) + len(line) <= self.max_pending:
                self._pending += line
            else:
                self.dropped += lines
                self.dropped_total += lines

    def flush(self) -> None:
        with self._lock:
            self._drain()

    async def flush_forever(self) -> None:
        while True:
            await trio.sleep(FLUSH_S)
            self.flush()

    def _drain(self) -> bool:
        """Write what is held (and the count of dropped lines); True when nothing is left."""
        if self._pending:
            del self._pending[: self._send(bytes(self._pending))]
            if self._pending:
                return False
        if self.dropped:
            note = (f"mcpkit: {self.dropped} log lines were dropped: stderr was not being read "
                    f"({self.dropped_total} in all)\n").encode()
            self.dropped = 0
            sent = self._send(note)
            self._pending += note[sent:]
            return not self._pending
        return True


def _nonblocking_writer(fd: int) -> Callable[[bytes], int]:
    """A function writing bytes to ``fd`` without blocking: how many it took (0 when full).
    When ``fd`` is gone for good (closed, no reader) everything counts as written."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return len
    if stat.S_ISREG(mode):
        return _writer(fd)
    if stat.S_ISSOCK(mode):
        sock = socket.socket(fileno=os.dup(fd))

        def send(data: bytes) -> int:
            try:
                return sock.send(data, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return 0
            except OSError:
                return len(data)

        return send
    try:
        own = os.open(f"/proc/self/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:  # no /proc, or a pipe without a reader: ask poll before each write
        return _polled_writer(fd)
    return _writer(own)


def _writer(fd: int) -> Callable[[bytes], int]:
    def write(data: bytes) -> int:
        try:
            return os.write(fd, data)
        except BlockingIOError:
            return 0
        except OSError:  # stderr is gone: the request is served all the same
            return len(data)

    return write


def _polled_writer(fd: int) -> Callable[[bytes], int]:
    """Last resort: write only what poll says fits now (a line at most ``PIPE_BUF``)."""
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    write = _writer(fd)

    def polled(data: bytes) -> int:
        if not poller.poll(0):
            return 0
        return write(data[: select.PIPE_BUF])

    return polled


_sink: tuple[int, StderrSink] | None = None


def stderr_sink() -> StderrSink:
    """This process's sink (a forked worker makes its own)."""
    global _sink
    if _sink is None or _sink[0] != os.getpid():
        _sink = (os.getpid(), StderrSink())
    return _sink[1]


class SinkHandler(logging.Handler):
    """A logging handler writing formatted records through the sink."""

    def __init__(self, sink: StderrSink, formatter: logging.Formatter | None) -> None:
        super().__init__()
        self.sink = sink
        self.setFormatter(formatter)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.sink.write((self.format(record) + "\n").encode("utf-8", "replace"))
        except Exception:
            self.handleError(record)


@contextlib.asynccontextmanager
async def logging_through(sink: StderrSink) -> AsyncIterator[None]:
    """While inside: the root logger's handlers that write to stderr write through ``sink``."""
    root = logging.getLogger()
    swapped = []
    for handler in list(root.handlers):
        if isinstance(handler, logging.StreamHandler) and _is_stderr(handler.stream):
            replacement = SinkHandler(sink, handler.formatter)
            replacement.setLevel(handler.level)
            root.removeHandler(handler)
            root.addHandler(replacement)
            swapped.append((handler, replacement))
    try:
        yield
    finally:
        for handler, replacement in swapped:
            root.removeHandler(replacement)
            root.addHandler(handler)


def _is_stderr(stream: object) -> bool:
    if stream is sys.stderr or stream is sys.__stderr__:
        return True
    try:
        return stream.fileno() == 2  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False
