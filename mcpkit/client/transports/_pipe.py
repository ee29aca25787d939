"""A subprocess's pipe driven with non-blocking calls first (the stdio transport's I/O).

trio's ``FdStream`` passes through the scheduler on every call (a checkpoint before each read
and each write), and lets only one writer in at a time. A stdio upstream gets one small message
per request and one per answer, so those passes are most of what moving a message costs. Here
``os.read`` / ``os.write`` go first; ``wait_readable`` / ``wait_writable`` run only when the pipe
has nothing to give or no room. Reads that did not wait are counted and every 16th yields, so a
server that keeps the pipe full cannot starve the other tasks (as ``httpclient.sockio`` does
for sockets).
"""

from __future__ import annotations

import errno
import os
from collections import deque

import trio

READ_SIZE = 1 << 16


class PipeClosed(Exception):
    """The pipe is closed, or the process at its other end is gone."""


class PipeReader:
    __slots__ = ("fd", "closed", "_streak")

    def __init__(self, fd: int) -> None:
        self.fd = fd  # non-blocking (trio's FdStream made it so)
        #: set before the fd is closed: no read is tried on it after (its number may be reused)
        self.closed = False
        self._streak = 0

    async def read(self) -> bytes:
        """Some bytes; b"" at end of input (or once :attr:`closed` is set)."""
        if self.closed:
            return b""
        try:
            data = os.read(self.fd, READ_SIZE)
        except BlockingIOError:
            self._streak = 0
            while True:
                await trio.lowlevel.wait_readable(self.fd)
                if self.closed:
                    return b""
                try:
                    return os.read(self.fd, READ_SIZE)
                except BlockingIOError:
                    continue
                except OSError as exc:
                    raise PipeClosed(exc.strerror) from None
        except OSError as exc:
            raise PipeClosed(exc.strerror) from None
        self._streak += 1
        if self._streak % 16 == 0:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return data


class PipeWriter:
    """Whole frames in order, from any number of tasks. A frame the pipe takes at once costs
    one ``os.write`` and no pass through the scheduler; the rest waits in a queue that the task
    which found the pipe full writes out (frames are never interleaved)."""

    __slots__ = ("fd", "_queue", "_flushing", "_idle", "_broken")

    def __init__(self, fd: int) -> None:
        self.fd = fd  # non-blocking (trio's FdStream made it so)
        self._queue: deque[memoryview] = deque()
        self._flushing = False
        self._idle: trio.Event | None = None
        self._broken: str | None = None

    async def write(self, data: bytes) -> None:
        """Write ``data``; returns once the pipe has all of it. Raises :class:`PipeClosed`."""
        if self._broken is not None:
            raise PipeClosed(self._broken)
        if not self._flushing and not self._queue:  # the common case: nobody else is writing
            try:
                sent = os.write(self.fd, data)
            except BlockingIOError:
                sent = 0
            except OSError as exc:
                self._broken = _why(exc)
                raise PipeClosed(self._broken) from None
            if sent == len(data):
                return
            data = memoryview(data)[sent:]  # type: ignore[assignment]
        self._queue.append(memoryview(data))
        # whoever writes finds the pipe full writes the queue out; the others wait for it (a
        # writer that was cancelled leaves the rest, a frame half written included, to them)
        while self._queue:
            if not self._flushing:
                await self._flush()
                return
            if self._idle is None:
                self._idle = trio.Event()
            await self._idle.wait()
        if self._broken is not None:
            raise PipeClosed(self._broken)

    def close(self) -> None:
        """Called before the fd is closed: no write is tried on it after."""
        self._broken = "closed"

    async def _flush(self) -> None:
        self._flushing = True
        try:
            while self._queue:
                view = self._queue[0]
                try:
                    sent = os.write(self.fd, view)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(self.fd)
                    if self._broken is not None:  # closed meanwhile: the fd is no longer ours
                        self._queue.clear()
                        raise PipeClosed(self._broken) from None
                    continue
                except OSError as exc:
                    self._queue.clear()
                    self._broken = _why(exc)
                    raise PipeClosed(self._broken) from None
                if sent == len(view):
                    self._queue.popleft()
                else:
                    self._queue[0] = view[sent:]
        finally:
            self._flushing = False
            if self._idle is not None:
                self._idle.set()
                self._idle = None


def _why(exc: OSError) -> str:
    return "closed" if exc.errno == errno.EBADF else (exc.strerror or str(exc))
