"""A worker's lifeline to the process that supervises it: the read end of a pipe whose write
end only the supervisor holds (and never writes), or its ``multiprocessing`` sentinel. The
kernel ends it when the supervisor exits, however it exits, so a worker notices even a SIGKILL
of its parent."""

from __future__ import annotations

import os

import trio


async def until_parent_exits(fd: int) -> None:
    """Return when the supervising process is gone: ``fd`` is the read end of a pipe whose
    write end only that process holds (it never writes), so the end of the pipe means it exited."""
    os.set_blocking(fd, False)
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            if not os.read(fd, 4096):
                return
        except BlockingIOError:
            continue
