"""Era translation for live requests: a handshake-era upstream that asks its client (elicitation,
sampling, roots) in the middle of a call, while the caller speaks the stateless era, which has no
live requests.

The upstream request then runs in the gateway's nursery, not in the caller's request. When the
upstream asks, the caller's round ends with an InputRequiredResult carrying the questions and a
``requestState`` that names the parked call; the caller's retry brings the answers, which go to
the upstream's waiting requests, and waits on for the result (or the next question). A parked
call lives in this process only, at most :data:`PARK_TTL_S`; a retry that finds it gone (expired,
or served by another worker) is told to call again.
"""

from __future__ import annotations

import itertools
import secrets
from typing import Any, Awaitable, Callable

import trio

from ..client.errors import RpcError
from ..protocol import jsonrpc
from ..protocol.jsonrpc import ProtocolError
from ..server.context import Context

#: seconds a parked upstream call may wait for the caller's next round
PARK_TTL_S = 300.0
#: parked calls per upstream at once; beyond it new calls run unparked (live requests refused)
MAX_PARKED = 256


class Ask:
    """One question of the upstream, waiting for the caller's answer."""

    def __init__(self, method: str, params: dict[str, Any]) -> None:
        self.method, self.params = method, params
        self.answered = trio.Event()
        self.answer: Any = None
        self.error: str | None = None


class ParkedCall:
    """An upstream request that outlives the caller's rounds."""

    def __init__(self, ctx: Context, token: str) -> None:
        self.ctx = ctx
        self.connection = getattr(ctx, "connection", None)  # Calls.target() groups calls by client connection
        self.token = token
        self.changed = trio.Event()
        self.asks: dict[str, Ask] = {}
        self._keys = itertools.count(1)
        self.done = False
        self.collected = trio.Event()  # the caller took the outcome
        self.result: Any = None
        self.error: BaseException | None = None
        self.scope = trio.CancelScope(deadline=trio.current_time() + PARK_TTL_S)

    def pending(self) -> dict[str, Ask]:
        return {key: ask for key, ask in self.asks.items() if not ask.answered.is_set()}

    async def run(self, send: Callable[[], Awaitable[Any]]) -> None:
        with self.scope:
            try:
                self.result = await send()
            except Exception as exc:  # given to the caller's round as it is
                self.error = exc
        if self.scope.cancelled_caught:
            self.error = ProtocolError(jsonrpc.INTERNAL_ERROR, "the call ended while it waited for input")
        self.done = True
        for ask in self.pending().values():
            ask.error = "the call ended"
            ask.answered.set()
        self.changed.set()

    async def ask(self, method: str, params: dict[str, Any]) -> Any:
        """The upstream's live request: wait for the caller's next round to answer it."""
        if self.done:
            raise RpcError("the call has ended", jsonrpc.INTERNAL_ERROR)
        ask = Ask(method, params)
        self.asks[f"{method.split('/')[0]}-{next(self._keys)}"] = ask
        self.changed.set()
        with trio.move_on_after(PARK_TTL_S):
            await ask.answered.wait()
        if ask.error is not None or not ask.answered.is_set():
            raise RpcError(ask.error or "the client did not answer in time", jsonrpc.INTERNAL_ERROR)
        return ask.answer


class Parking:
    """The parked calls of one upstream."""

    def __init__(self, nursery: Callable[[], "trio.Nursery | None"]) -> None:
        self._nursery = nursery
        self._parked: dict[str, ParkedCall] = {}
        # tokens: unguessable per process, then a counter (they travel sealed in requestState)
        self._prefix = secrets.token_urlsafe(12)
        self._count = itertools.count(1)

    def can_park(self) -> bool:
        return self._nursery() is not None and len(self._parked) < MAX_PARKED

    async def forward(self, ctx: Context, state: dict[str, Any], start: Callable[[ParkedCall], Awaitable[Any]]) -> Any:
        """Run (or, on a retry, resume) the call; ends the caller's round with its questions."""
        token = state.get("p")
        if isinstance(token, str):
            parked = self._parked.get(token)
            if parked is None:
                raise ProtocolError(jsonrpc.INVALID_PARAMS, "this call's earlier round is gone (it expired, or another "
                                    "server process served it): call again without requestState")
            parked.ctx = ctx
        else:
            parked = ParkedCall(ctx, f"{self._prefix}.{next(self._count)}")
            self._parked[parked.token] = parked
            nursery = self._nursery()
            assert nursery is not None
            nursery.start_soon(self._run, parked, start)
        try:
            while True:
                parked.changed = trio.Event()
                if parked.done:
                    self._parked.pop(parked.token, None)
                    parked.collected.set()
                    if parked.error is not None:
                        raise parked.error
                    return parked.result
                pending = parked.pending()
                if pending:  # answers from this round, or the round ends with the questions
                    answers = await ctx.request_input({k: (a.method, a.params) for k, a in pending.items()},
                                                      state={"p": parked.token})
                    for key, ask in pending.items():
                        ask.answer = answers[key]
                        ask.answered.set()
                    continue
                await parked.changed.wait()
        except trio.Cancelled:  # the caller went away (a round that ends with questions raises, not this)
            parked.scope.cancel()
            raise

    async def _run(self, parked: ParkedCall, start: Callable[[ParkedCall], Awaitable[Any]]) -> None:
        await parked.run(lambda: start(parked))
        with trio.move_on_at(parked.scope.deadline):  # the outcome waits for a last retry until the deadline
            await parked.collected.wait()
        self._parked.pop(parked.token, None)
