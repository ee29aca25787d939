"""Where a request's messages go while it runs: the HTTP exchange itself (stateless era), the
session's resumable stream (handshake era), or nowhere (inside a batch)."""

from __future__ import annotations

from typing import Any, Callable

import trio

from .exchange import Exchange
from .sessions import Session, Stream
from .wire import RETRY_SOON, Headers, error_code, http_status_for, sse_event


class DirectPeer:
    """Stateless era: JSON answer unless something streams first, then SSE in this exchange."""

    def __init__(self, ex: Exchange, sse: bool, step_up: Callable[[Exchange, bytes], Headers | None] | None = None) -> None:
        self._ex = ex
        self._sse = sse
        self._step_up = step_up
        self._started = False
        self._lock = trio.StrictFIFOLock()

    async def _start(self) -> None:
        if not self._started:
            self._started = True
            await self._ex.start_stream()

    async def notify(self, data: bytes) -> None:
        async with self._lock:
            await self._start()
            await self._ex.send_chunk(sse_event(data))

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        raise RuntimeError("the stateless era has no server-to-client requests")

    async def heartbeat(self, every: float) -> None:
        while True:
            await trio.sleep(every)
            async with self._lock:
                await self._start()
                await self._ex.send_chunk(b": keep-alive\n\n")

    async def finish(self, data: bytes) -> None:
        async with self._lock:
            if self._started or self._sse:
                await self._start()
                await self._ex.send_chunk(sse_event(data))
                await self._ex.end_stream()
            else:
                status = http_status_for(error_code(data) or 0)
                headers = self._step_up(self._ex, data) if self._step_up is not None else None
                await self._ex.respond(status, data, RETRY_SOON if status == 503 else headers)


class SessionPeer:
    """Handshake era: messages go to the request's resumable stream."""

    def __init__(self, session: Session, stream: Stream, retry_ms: int) -> None:
        self.session = session
        self.stream = stream
        self.retry_ms = retry_ms
        self.wants_sse = False

    async def notify(self, data: bytes) -> None:
        self.wants_sse = True
        await self.stream.emit(data)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.wants_sse = True
        return await self.session.ask(self.stream, method, params)

    async def close_stream(self, retry_ms: int | None = None) -> None:
        self.wants_sse = True
        self.stream.close_reader()
        await trio.sleep(0)


class BufferPeer:
    """Batches answer in one JSON array: notifications have nowhere to go."""

    async def notify(self, data: bytes) -> None:
        return None

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        raise RuntimeError("server-to-client requests are not available inside a batch")
