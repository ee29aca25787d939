"""The message flow of one MCP session, server side, as a state machine with no I/O.

Think of h11's ``Connection``: a transport feeds it what arrived (:meth:`ServerSession.receive`,
:meth:`ServerSession.finished` when a request's answer is ready, :meth:`ServerSession.close`
when the client is gone) and carries out the actions it returns:

- :class:`Run` — start serving a request (the server's dispatcher does that);
- :class:`Send` — send one answer (a finished request's, or one the session made at once:
  lifecycle answers, protocol errors, "server busy");
- :class:`SendBatch` — send the answers of a JSON-RPC batch as one array;
- :class:`Cancel` — stop a running request (the client cancelled it, or went away);
- :class:`Resolve` — the client answered a server-to-client request;
- :class:`Notified` — a client notification with nothing to do here (roots, progress).

Every transport (stdio, Streamable HTTP in both eras, legacy HTTP+SSE) goes through this one
implementation of batching, the in-flight limit, cancellation and the correlation of
server-to-client requests; what differs between them is only where bytes go. Lifecycle rules
(initialize, ping, versions, the stateless envelope) are :class:`ServerConnection`'s.

Each action carries the ``origin`` the transport passed with the bytes that caused it (an HTTP
exchange, say), so the transport knows where an answer belongs.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Union

from . import jsonrpc
from .connection import (
    Batch, CancelRequested, Event, NotificationReceived, Reply, RequestReceived, ResponseReceived,
    ServerConnection,
)
from .jsonrpc import Answer, ErrorObject, Invalid, Message, ProtocolError, RequestId


@dataclass(slots=True)
class Run:
    """Serve ``request``; report its answer with :meth:`ServerSession.finished`."""

    request: RequestReceived
    origin: Any = None
    #: the request is a member of a batch: its answer travels in the batch's array
    in_batch: bool = False


@dataclass(slots=True)
class Send:
    """Send ``answer``: the answer of ``request`` when it ran, else (None) one made at once."""

    answer: Answer
    request: RequestReceived | None = None
    origin: Any = None
    #: the request the protocol core answered itself (a Reply's: lifecycle or refused), for observers
    lifecycle: Any = None


@dataclass(slots=True)
class SendBatch:
    """Send the answers of one batch as one JSON array."""

    answers: list[Answer]
    origin: Any = None


@dataclass(slots=True)
class Cancel:
    """Stop the running request ``request_id``. ``here`` is False when no request of that id
    runs on this session (with shared state it may run in another process)."""

    request_id: RequestId
    reason: str | None = None
    here: bool = True


@dataclass(slots=True)
class Resolve:
    """The client's answer to the server-to-client request ``request_id``. ``here`` is False
    when this session did not ask it (with shared state another process may have)."""

    request_id: RequestId
    result: Any = None
    error: ErrorObject | None = None
    here: bool = True


@dataclass(slots=True)
class Notified:
    """A client notification the session has nothing to do about."""

    method: str
    params: Any


Action = Union[Run, Send, SendBatch, Cancel, Resolve, Notified]

#: The answer a server-to-client request gets when the session ends before the client answers.
CLOSED = ErrorObject(jsonrpc.INTERNAL_ERROR, "the connection closed before the client answered")


@dataclass(slots=True)
class _Batch:
    waiting: int
    answers: list[Answer]
    origin: Any


@dataclass
class ServerSession:
    """The flow of one session: which requests run, which batch each belongs to, which
    server-to-client requests wait for the client.

    ``max_running`` caps the requests running at once (the rest are answered "server busy").
    ``ask_prefix`` makes the ids of server-to-client requests unique across processes that
    share a session (with shared state the client's answer may reach another process).
    ``track`` is False for the stateless era's shared connection, where every HTTP exchange is
    its own request and ids are the clients' own business: nothing is tracked by id there.
    """

    conn: ServerConnection
    max_running: int = 1000
    ask_prefix: str = ""
    track: bool = True
    running: dict[RequestId, RequestReceived] = field(default_factory=dict)
    asked: set[RequestId] = field(default_factory=set)
    _batch_of: dict[int, _Batch] = field(default_factory=dict)
    _ask_ids: Any = field(default_factory=lambda: itertools.count(1))
    _count: int = 0

    # -- what arrived ------------------------------------------------------------------------------
    def receive(self, data: bytes, *, stateless: bool | None = None, origin: Any = None,
                headers: dict[str, str] | None = None) -> list[Action]:
        """Take one frame (a message or a batch) from the client. ``stateless`` and
        ``headers`` are the transport's word on the era and its HTTP headers (see
        :meth:`ServerConnection.receive_message`)."""
        return self._act(self.conn.receive(data, stateless=stateless, headers=headers), origin)

    def receive_message(self, msg: Message | Invalid, *, stateless: bool | None = None,
                        origin: Any = None, headers: dict[str, str] | None = None) -> list[Action]:
        """Like :meth:`receive` for a message the transport already decoded."""
        return self._act(self.conn.receive_message(msg, stateless=stateless, headers=headers), origin)

    def finished(self, request: RequestReceived, answer: Answer | None) -> list[Action]:
        """``request`` is done: its answer, or None when it was cancelled (nothing is sent)."""
        self._count -= 1
        if self.track and self.running.get(request.id) is request:
            del self.running[request.id]
        batch = self._batch_of.pop(id(request), None)
        if batch is None:
            return [Send(answer, request)] if answer is not None else []
        if answer is not None:
            batch.answers.append(answer)
        batch.waiting -= 1
        if batch.waiting == 0:
            return [SendBatch(batch.answers, batch.origin)] if batch.answers else []
        return []

    def close(self) -> list[Action]:
        """The client is gone: every running request stops, every question to it fails."""
        out: list[Action] = [Cancel(rid, "the connection closed") for rid in self.running]
        out += [Resolve(rid, None, CLOSED) for rid in self.asked]
        self.asked.clear()
        return out

    # -- server-to-client requests ------------------------------------------------------------------
    def ask(self, method: str, params: dict[str, Any]) -> tuple[RequestId, bytes]:
        """A new server-to-client request: its id (to wait on) and the frame to send."""
        n = next(self._ask_ids)
        rid: RequestId = f"{self.ask_prefix}{n}" if self.ask_prefix else n
        self.asked.add(rid)
        return rid, jsonrpc.encode_request(rid, method, params)

    def forget(self, request_id: RequestId) -> None:
        """The asker stopped waiting (it was cancelled): a late answer is not ours any more."""
        self.asked.discard(request_id)

    @property
    def load(self) -> int:
        """Requests running now."""
        return self._count

    # -- the rules ------------------------------------------------------------------------------------
    def _act(self, events: list[Event], origin: Any) -> list[Action]:
        out: list[Action] = []
        for ev in events:
            if isinstance(ev, Batch):
                out += self._batch(ev, origin)
            else:
                self._one(ev, origin, out, None)
        return out

    def _batch(self, batch: Batch, origin: Any) -> list[Action]:
        group = _Batch(0, [], origin)
        members: list[Action] = []
        for ev in batch.events:
            self._one(ev, origin, members, group)
        out: list[Action] = []
        for action in members:
            if isinstance(action, Run):
                group.waiting += 1
                self._batch_of[id(action.request)] = group
            elif isinstance(action, Send):
                group.answers.append(action.answer)
                continue
            out.append(action)
        if group.waiting == 0 and group.answers:
            out.append(SendBatch(group.answers, origin))
        return out

    def _one(self, ev: Event, origin: Any, out: list[Action], group: _Batch | None) -> None:
        if isinstance(ev, RequestReceived):
            refusal = self._admit(ev)
            if refusal is not None:
                out.append(Send(refusal, None, origin))
            else:
                out.append(Run(ev, origin, group is not None))
        elif isinstance(ev, Reply):
            out.append(Send(ev.answer, None, origin, ev.request))
        elif isinstance(ev, CancelRequested):
            out.append(Cancel(ev.request_id, ev.reason, ev.request_id in self.running))
        elif isinstance(ev, ResponseReceived):
            here = ev.id in self.asked
            self.asked.discard(ev.id)
            out.append(Resolve(ev.id, ev.result, ev.error, here))
        elif isinstance(ev, NotificationReceived):
            out.append(Notified(ev.method, ev.params))

    def _admit(self, req: RequestReceived) -> Answer | None:
        """Take a request into the running set, or the answer that refuses it."""
        if self._count >= self.max_running:
            return Answer.failure(req.id, busy(self.max_running))
        self._count += 1
        if self.track:
            # a client reusing the id of a running request breaks the spec's rule, but each
            # answer still reaches it (HTTP answers on the POST that asked); a cancellation of
            # that id reaches the newest one
            self.running[req.id] = req
        return None


def busy(limit: int) -> ProtocolError:
    """The answer to a request over the session's limit of requests in flight."""
    return ProtocolError(jsonrpc.SERVER_BUSY, f"Server busy: {limit} requests are already running on this connection "
                         "(max_concurrent_requests); retry when some have answered", {"limit": limit})


__all__ = [
    "Action", "Cancel", "CLOSED", "Notified", "Resolve", "Run", "Send", "SendBatch", "ServerSession", "busy",
]
