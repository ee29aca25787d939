"""A plain connected socket driven with non-blocking calls first: shared by mcpkit's HTTP
client and its HTTP server (``transports/http/h1/_io.py``).

trio's ``wait_readable`` / ``wait_writable`` run only when the kernel has nothing to give or no
room, so bytes that are already there cost no trip through the scheduler. Every read that did
not wait is counted, and every 16th yields, so a peer that keeps the socket full cannot starve
the other tasks.
"""

from __future__ import annotations

import errno
import math
import socket
from typing import Any

import trio

READ_SIZE = 65536


async def connect_socket(sock: socket.socket, addr: Any) -> None:
    """Connect ``sock`` (made non-blocking here) to ``addr`` without blocking the loop; raises
    OSError with the kernel's reason when it cannot. TCP sockets get TCP_NODELAY."""
    sock.setblocking(False)
    err = sock.connect_ex(addr)
    if err in (errno.EINPROGRESS, errno.EAGAIN):
        await trio.lowlevel.wait_writable(sock)
        err = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if err:
        raise OSError(err, errno.errorcode.get(err, str(err)))
    if sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class PlainSocket:
    __slots__ = ("sock", "_streak")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._streak = 0

    async def recv(self) -> bytes:
        """Some bytes; b"" at end of input. Raises OSError when the connection is reset."""
        sock = self.sock
        try:
            data = sock.recv(READ_SIZE)
        except BlockingIOError:
            self._streak = 0
            return await self.recv_waiting()
        self._streak += 1
        if self._streak % 16 == 0:
            await trio.lowlevel.cancel_shielded_checkpoint()
        return data

    async def recv_waiting(self) -> bytes:
        """Wait until the socket has bytes, then read them: for bytes known not to be there yet
        (an answer just asked for), without a read that would find nothing first."""
        sock = self.sock
        while True:
            await trio.lowlevel.wait_readable(sock)
            try:
                return sock.recv(READ_SIZE)
            except BlockingIOError:
                continue

    def send_now(self, data: bytes) -> int:
        """As much of ``data`` as the kernel takes without waiting; how many bytes that was."""
        try:
            return self.sock.send(data)
        except BlockingIOError:
            return 0

    async def send_rest(self, data: bytes | memoryview, timeout: float = math.inf) -> None:
        """Write all of ``data``, waiting for room; trio.TooSlowError when the peer took no
        byte for ``timeout`` seconds."""
        view = memoryview(data)
        while view:
            try:
                view = view[self.sock.send(view):]
            except BlockingIOError:
                with trio.fail_after(timeout):
                    await trio.lowlevel.wait_writable(self.sock)
