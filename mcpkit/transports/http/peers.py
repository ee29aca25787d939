"""Where one HTTP request's messages go while it runs (its channel, for the session runner): the
HTTP exchange itself (stateless era), or the session's resumable stream (handshake era)."""

from __future__ import annotations

from typing import Any, Callable

import trio

from ...protocol import jsonrpc
from ...protocol.jsonrpc import Answer
from .exchange import Exchange
from .sessions import Stream
from .wire import RETRY_SOON, Headers, http_status_for, sse_event

#: the 403 challenge for an answer that refuses a token for lacking a scope, else None
StepUp = Callable[[Exchange, Answer], "Headers | None"]


class DirectChannel:
    """Stateless era: a JSON answer, unless something streams first (then SSE in this exchange)."""

    can_ask = False  # the stateless era asks the client through input-required results

    def __init__(self, ex: Exchange, sse: bool, step_up: StepUp | None = None) -> None:
        self._ex = ex
        self._sse = sse
        self._step_up = step_up
        self._started = False
        self._lock_: trio.StrictFIFOLock | None = None  # made when something streams
        #: told when the answer becomes an SSE stream (set only when something watches)
        self.observers: Any = None

    @property
    def _lock(self) -> trio.StrictFIFOLock:
        if self._lock_ is None:
            self._lock_ = trio.StrictFIFOLock()
        return self._lock_

    async def _start(self) -> None:
        if not self._started:
            self._started = True
            if self.observers is not None:
                self.observers.stream_opened("http")
            await self._ex.start_stream()

    async def message(self, data: bytes) -> None:
        async with self._lock:
            await self._start()
            await self._ex.send_chunk(sse_event(data))

    async def heartbeat(self, every: float) -> None:
        while True:
            await trio.sleep(every)
            async with self._lock:
                await self._start()
                await self._ex.send_chunk(b": keep-alive\n\n")

    async def answer(self, answer: Answer) -> None:
        if not (self._started or self._sse or (self._lock_ is not None and self._lock_.locked())):
            # nothing was sent and nothing is being sent: the answer is all there is (no lock:
            # nothing of this request can come after it)
            await respond_with(self._ex, answer, self._step_up)
            return
        async with self._lock:
            if self._started or self._sse:
                await self._start()
                await self._ex.send_chunk(sse_event(answer.encode()))
                await self._ex.end_stream()
            else:
                await respond_with(self._ex, answer, self._step_up)

    def done(self) -> None:
        return None

    @property
    def streamed(self) -> bool:
        """The answer went (or goes) out as an SSE stream."""
        return self._started


async def respond_with(ex: Exchange, answer: Answer, step_up: StepUp | None) -> None:
    """A JSON answer with the HTTP status its error travels with on the stateless wire (and
    the step-up challenge or Retry-After that goes with it)."""
    status = http_status_for(answer.code or 0)
    if status == 503:
        headers: Headers | None = RETRY_SOON
    else:
        headers = step_up(ex, answer) if step_up is not None and answer.code is not None else None
    await ex.respond(status, answer.encode(), headers)


class StreamChannel:
    """Handshake era: messages go to the request's resumable stream; the answer is its last."""

    can_ask = True

    def __init__(self, stream: Stream, on_done: Callable[[], None]) -> None:
        self.stream = stream
        self.wants_sse = False  # something besides the answer was sent: the response streams
        self.final: Answer | None = None
        self._on_done = on_done

    async def message(self, data: bytes) -> None:
        self.wants_sse = True
        await self.stream.emit(data)

    async def answer(self, answer: Answer) -> None:
        self.final = answer
        await self.stream.emit(answer.encode(), final=True)

    async def close_stream(self, retry_ms: int | None = None) -> None:
        self.wants_sse = True
        self.stream.close_reader()
        await trio.sleep(0)

    def done(self) -> None:
        self._on_done()


def busy_status(answer: Answer) -> bool:
    return answer.code == jsonrpc.SERVER_BUSY
