"""The access log: one line per HTTP request on stderr, cheap enough to leave on.

Going through ``logging`` costs ~35 µs a line here (a record, a formatter, a lock, a flush):
a fifth of a whole request. This writes the same line, in the server log's format, with a
timestamp formatted once a second and one non-blocking write to stderr (``logsink.py``: when
nobody reads stderr, lines are dropped and counted, the server never waits). It is on when the
``access_log`` setting is and the ``mcpkit.http.access`` logger lets INFO through (so logging
configuration can still silence it); when off it costs one attribute test per request.

Lines are gathered for a few milliseconds and written together (one write for a burst of
requests instead of one each: under load that is most of what the log costs); a task of the
running app writes them, woken only when a line is waiting, so an idle server never wakes.
"""

from __future__ import annotations

import logging
import time

import trio

from .logsink import StderrSink, stderr_sink

LOGGER = "mcpkit.http.access"
#: how long a line may wait for others to go out with it, and how much may wait at most
GATHER_S = 0.005
GATHER_BYTES = 16 * 1024


class AccessLog:
    def __init__(self, enabled: bool, sink: StderrSink | None = None) -> None:
        self.enabled = enabled and logging.getLogger(LOGGER).isEnabledFor(logging.INFO)
        self._sink = (sink or stderr_sink()) if self.enabled else None
        self._second = -1
        self._stamp = ""
        self._lines: list[str] = []
        self._size = 0
        self._waiting = trio.Event()
        self._gathering = False  # a writer task runs (else every line is written at once)

    async def write_forever(self) -> None:
        """Write gathered lines shortly after the first of them arrives (run by the app)."""
        self._gathering = True
        try:
            while True:
                await self._waiting.wait()
                await trio.sleep(GATHER_S)
                self._waiting = trio.Event()
                self.flush()
        finally:
            self._gathering = False
            self.flush()

    def flush(self) -> None:
        if self._lines:
            lines, self._lines, self._size = self._lines, [], 0
            assert self._sink is not None
            self._sink.write("".join(lines).encode("utf-8", "replace"), len(lines))

    def write(self, client: str, method: str, path: str, status: int, started: float, request_id: str) -> None:
        now = time.time()
        second = int(now)
        if second != self._second:
            self._second = second
            self._stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(second))
        ms = (time.perf_counter() - started) * 1000
        line = (f'{self._stamp},{int((now - second) * 1000):03d} INFO {LOGGER}: {client} "{method} {path}" '
                f"{status or '-'} {ms:.1f}ms request_id={request_id}\n")
        self._lines.append(line)
        self._size += len(line)
        if not self._gathering or self._size >= GATHER_BYTES:
            self.flush()
        elif not self._waiting.is_set():
            self._waiting.set()
