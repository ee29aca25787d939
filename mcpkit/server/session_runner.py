"""Running one session's requests with trio: the actions of the sans-IO session core carried out.

:class:`mcpkit.protocol.session.ServerSession` decides what happens to each message; this runner
does it, the same way for every transport: it serves each request under its own cancel scope
(registered by id, so the client can cancel it), answers through the request's channel, sends
batches as one array, and wakes the server-to-client requests the client answered. A transport
provides an :class:`Outlet` — where bytes go — and nothing else.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

import msgspec
import trio

from ..protocol.types import MetaOnly
from ..protocol.jsonrpc import Answer, ErrorObject, RequestId
from ..protocol.connection import RequestReceived
from ..protocol.session import Action, Cancel, Notified, Resolve, Run, Send, SendBatch, ServerSession
from .context import PeerError
from .observe import RequestRecord

if TYPE_CHECKING:
    from .dispatch import Dispatcher

log = logging.getLogger("mcpkit.server")
#: A fixed name for request tasks spares trio from formatting one per spawn.
_TASK_NAME = "mcpkit.request"


class Channel(Protocol):
    """Where one request's own messages go: its notifications (progress, logs), its questions
    to the client, and finally its answer."""

    #: whether server-to-client requests can travel here (not inside an HTTP batch)
    can_ask: bool

    async def message(self, data: bytes) -> None:
        """A notification or server-to-client request that belongs to this request."""

    async def answer(self, answer: Answer) -> None:
        """The request's answer (the last thing on the channel)."""

    def done(self) -> None:
        """The request is over (answered, cancelled or failed)."""


class Outlet(Protocol):
    """What a transport offers a session: channels for its requests, and a way to send what
    belongs to no running request."""

    def channel(self, run: Run) -> Channel:
        """The channel for a request about to run."""

    async def reply(self, answer: Answer, origin: Any) -> None:
        """An answer the session made at once (lifecycle, protocol errors, refusals)."""

    async def send_batch(self, answers: list[Answer], origin: Any) -> None:
        """A batch's answers, as one JSON array."""

    async def elsewhere(self, action: Cancel | Resolve) -> None:
        """A cancellation or client answer for a request this process does not run or did not
        send (with shared state another process may); dropped when there is no other."""


class SessionRunner:
    """Serves the requests of one session (a stdio process, a legacy SSE stream, an HTTP
    session, or the stateless era's shared connection).

    ``nursery`` runs the requests that outlive the code that received them (stdio, legacy SSE,
    handshake-era HTTP); stateless HTTP requests run inline in their exchange instead.
    """

    def __init__(self, core: ServerSession, dispatcher: "Dispatcher", outlet: Outlet,
                 nursery: trio.Nursery | None = None, *, transport: str = "stdio",
                 session_id: str | None = None) -> None:
        self.core = core
        #: what observers are told this session is: ``stdio``, ``http`` or ``sse``, and its id
        self.transport = transport
        self.session_id = session_id
        self.dispatcher = dispatcher
        self.outlet = outlet
        self.nursery = nursery
        #: the cancel scope of each running request, by id
        self.scopes: dict[RequestId, trio.CancelScope] = {}
        self._waiting: dict[RequestId, tuple[trio.Event, list[Any]]] = {}
        #: requests being served, answers not yet sent (a batch's members until its array is out)
        self.serving = 0
        #: set when ``serving`` falls to 0; made only while someone waits in :meth:`idle` (a
        #: stateless server passes 0 -> 1 -> 0 on every request: no Event made and set for each)
        self._idle: trio.Event | None = None

    # -- what arrives ---------------------------------------------------------------------------
    async def feed(self, data: bytes, origin: Any = None, *, stateless: bool | None = None) -> None:
        """One frame from the client: act on it (requests start in the background)."""
        await self.execute(self.core.receive(data, stateless=stateless, origin=origin))

    async def execute(self, actions: list[Action], *, inline: bool = False, scopes: Any = None) -> None:
        """Carry out the core's actions. ``inline`` serves requests in this task (stateless
        HTTP) instead of starting them in the nursery; ``scopes`` is where an inline request's
        cancel scope is registered (by default the session's, by id)."""
        for action in actions:
            if isinstance(action, Run):
                self.serving += 1  # counted from now, so idle() never misses a request about to start
                if inline:
                    await self.serve(action, scopes)
                else:
                    assert self.nursery is not None, "a session that spawns requests needs a nursery"
                    self.nursery.start_soon(self.serve, action, name=_TASK_NAME)
            elif isinstance(action, Send):
                if action.lifecycle is not None and self.dispatcher.app.observers:
                    await self.reply_observed(action, functools.partial(self.outlet.reply, action.answer, action.origin),
                                              getattr(action.origin, "headers", None))
                else:
                    await self.outlet.reply(action.answer, action.origin)
            elif isinstance(action, SendBatch):
                await self.outlet.send_batch(action.answers, action.origin)
            elif isinstance(action, Cancel):
                scope = self.scopes.get(action.request_id) if action.here else None
                if scope is not None:
                    scope.cancel()
                else:
                    await self.outlet.elsewhere(action)
            elif isinstance(action, Resolve):
                if not self.resolve(action):
                    await self.outlet.elsewhere(action)
            elif isinstance(action, Notified):  # roots/list_changed, progress: nothing to do but tell
                observers = self.dispatcher.app.observers
                if observers:
                    observers.notification(action.method, self.transport, self.session_id, _meta_of(action.params))

    async def reply_observed(self, action: Send, send: Callable[[], Awaitable[Any]],
                             headers: dict[str, str] | None) -> None:
        """Send (``send``) the protocol core's own answer to a request (initialize, ping, a
        refusal) inside what observers make of it: a span and a duration like any other
        request's; ``headers`` those of the HTTP request that carried it (its trace context)."""
        conn = self.core.conn
        rec = RequestRecord.answered(action.lifecycle, action.answer, self.transport, self.session_id, conn.version,
                                     conn.client_info, headers)
        try:
            with self.dispatcher.app.observers.request(rec):
                await send()
                rec.finish(action.answer)
        finally:
            if not rec.duration:
                rec.finish(None)
            self.dispatcher.app.observers.ended(rec)

    def resolve(self, action: Resolve) -> bool:
        """Wake the server-to-client request the client answered; False if none waits here."""
        waiter = self._waiting.get(action.request_id)
        if waiter is None:
            return False
        waiter[1].append(action)
        waiter[0].set()
        return True

    def close(self) -> None:
        """The client is gone: cancel what runs, fail what waits for it."""
        for action in self.core.close():
            if isinstance(action, Cancel):
                scope = self.scopes.get(action.request_id)
                if scope is not None:
                    scope.cancel()
            elif isinstance(action, Resolve):
                self.resolve(action)

    async def idle(self) -> None:
        """Wait until no request is being served (every answer sent)."""
        if not self.serving:
            await trio.lowlevel.checkpoint()
            return
        while self.serving:
            if self._idle is None:
                self._idle = trio.Event()
            await self._idle.wait()

    async def answer_stuck(self, answer_for: Callable[[RequestId], Answer]) -> int:
        """Answer each request still inside its handler after it was stopped (it ignores
        cancellation) with ``answer_for(id)``; how many there were."""
        stuck = list(self.core.running)
        for request_id in stuck:
            await self.outlet.reply(answer_for(request_id), None)
        return len(stuck)

    # -- one request ------------------------------------------------------------------------------
    async def serve(self, run: Run, scopes: Any = None) -> None:
        """Serve one request (counted in ``serving`` by :meth:`execute`) and send its answer (or,
        in a batch, hand it to the batch)."""
        req = run.request
        channel: Channel | None = None
        try:
            channel = self.outlet.channel(run)
            answer: Answer | None = None
            try:
                if scopes is None and self.core.track:
                    scopes = self.scopes
                observers = self.dispatcher.app.observers
                if not observers:
                    answer = await self.dispatcher.answer(req, _RequestPeer(self, channel), scopes)
                else:  # inline, not a helper coroutine: what watching costs is counted per request
                    # an HTTP session's POST carries its headers (trace context) when observers watch
                    rec = RequestRecord.of(req, self.transport, self.session_id, getattr(run.origin, "headers", None))
                    try:
                        with observers.request(rec):
                            answer = await self.dispatcher.answer(req, _RequestPeer(self, channel), scopes)
                            rec.finish(answer)
                    finally:
                        if not rec.duration:  # left by a cancellation from outside (a shutdown, a lost client)
                            rec.finish(None)
                        observers.ended(rec)
            finally:
                actions = self.core.finished(req, answer)
            for action in actions:
                if isinstance(action, Send):
                    await channel.answer(action.answer)
                else:
                    await self.execute([action])
        finally:
            if channel is not None:
                channel.done()
            self.serving -= 1
            if self.serving == 0 and self._idle is not None:
                self._idle.set()
                self._idle = None

    async def ask(self, channel: Channel, method: str, params: dict[str, Any]) -> Any:
        """Send a server-to-client request on ``channel`` and wait for the client's answer."""
        if not channel.can_ask:
            raise PeerError(f"{method} cannot be sent here (server-to-client requests do not travel inside a batch)")
        observers = self.dispatcher.app.observers
        if not observers:
            return await self._ask(channel, method, params)
        with observers.asking(method, params, self.transport, self.session_id) as sent:  # a tracer's CLIENT span
            return await self._ask(channel, method, sent)

    async def _ask(self, channel: Channel, method: str, params: dict[str, Any]) -> Any:
        rid, frame = self.core.ask(method, params)
        done = trio.Event()
        box: list[Resolve] = []  # the client's answer, put there when it arrives
        self._waiting[rid] = (done, box)
        try:
            await channel.message(frame)
            await done.wait()
        finally:
            self._waiting.pop(rid, None)
            self.core.forget(rid)
        answer: Resolve = box[0]
        if answer.error is not None:
            raise PeerError(_describe(answer.error))
        return answer.result


class _RequestPeer:
    """The :class:`~mcpkit.server.context.Peer` one request's context talks through."""

    __slots__ = ("_runner", "channel")

    def __init__(self, runner: SessionRunner, channel: Channel) -> None:
        self._runner = runner
        self.channel = channel

    @property
    def connection(self) -> Any:
        """What identifies the client connection this request came on: its session's runner,
        or (stateless era, where every request stands alone) the request itself."""
        return self._runner if self._runner.core.track else self

    async def notify(self, data: bytes) -> None:
        await self.channel.message(data)

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        return await self._runner.ask(self.channel, method, params)

    async def close_stream(self, retry_ms: int | None = None) -> None:
        close = getattr(self.channel, "close_stream", None)
        if close is not None:
            await close(retry_ms)


def _meta_of(params: Any) -> dict[str, Any] | None:
    """``params._meta`` of a notification, for observers (None when absent or malformed)."""
    if not isinstance(params, msgspec.Raw):
        return None
    try:
        return msgspec.json.decode(params, type=MetaOnly).meta or None  # type: ignore[return-value]
    except msgspec.MsgspecError:
        return None


def _describe(error: ErrorObject) -> str:
    return f"{error.message} ({error.code})"


__all__ = ["Channel", "Outlet", "SessionRunner"]
