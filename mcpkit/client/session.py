"""One JSON-RPC conversation with a server: ids, pending requests, timeouts, cancellation, and
the requests and notifications the server sends back. The era rules (what goes in ``_meta``,
whether the handshake is done) live here too; connecting and probing live in ``client.py``.
"""

from __future__ import annotations

import inspect
import itertools
import logging
import sys
import uuid
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Union

import msgspec
import trio

from ..protocol import jsonrpc
from ..protocol.jsonrpc import Message, RequestId
from ..protocol.types import (
    META_CLIENT_CAPABILITIES,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROTOCOL_VERSION,
    TASKS_EXTENSION,
)
from ._otel import client_span
from .errors import (
    BadResponse,
    ConnectionClosed,
    McpError,
    NotInitialized,
    RequestTimeout,
    RpcError,
    from_rpc,
)
from .transports import Failure, Incoming, Transport

log = logging.getLogger("mcpkit.client")

Callback = Callable[..., Union[Awaitable[Any], Any]]
#: Methods a handshake-era client may send before the handshake completes.
_BEFORE_READY = frozenset({"initialize", "ping", "server/discover"})
#: the module whose presence means OpenTelemetry is in use in this process (see _otel.py)
_OTEL = "opentelemetry.trace"
#: notification callbacks waiting to run; beyond this they are dropped (a flooding server)
_CALLBACK_QUEUE = 4096


@dataclass(slots=True)
class Notification:
    method: str
    params: dict[str, Any]


@dataclass(slots=True)
class Handlers:
    """The application's answers to what the server asks and says. Any may be async."""

    #: elicitation/create params -> ElicitResult ({"action": ..., "content": ...})
    elicitation: Callback | None = None
    #: sampling/createMessage params -> CreateMessageResult
    sampling: Callback | None = None
    #: the client's roots, as Root objects ({"uri": "file:///...", "name": ...})
    roots: list[dict[str, Any]] | None = None
    #: notifications/message params
    log: Callback | None = None
    #: every notification, (method, params), after the built-in handling
    notification: Callback | None = None
    #: any request from the server, (method, params) -> result, before the built-in answers
    #: (a gateway relays them); raise ``RpcError`` to answer with an error
    request: Callback | None = None
    #: a message from the server that could not be used (garbage, oversized), after the session
    #: started: called with the error (the session goes on)
    bad_message: Callable[[McpError], Any] | None = None


class _Slot:
    """One request waiting for its answer: the task that waits is woken directly (no Event,
    no parking lot: a forwarded call pays for one wake-up and nothing around it)."""

    __slots__ = ("result", "error", "raw", "finished", "_task")

    def __init__(self, raw: bool = False) -> None:
        self.result: Any = None
        self.error: McpError | None = None
        #: keep the result as the server's bytes (msgspec.Raw), undecoded
        self.raw = raw
        self.finished = False
        self._task: Any = None

    def finish(self) -> None:
        self.finished = True
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    async def wait(self) -> None:
        if self.finished:
            await trio.lowlevel.checkpoint()
            return
        self._task = trio.lowlevel.current_task()
        await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, _: Any) -> Any:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED


class Session:
    def __init__(self, transport: Transport, handlers: Handlers, *, client_info: dict[str, Any],
                 uuid_ids: bool = False, request_timeout: float | None = 60.0,
                 log_level: str | None = None, tasks: bool = False) -> None:
        self.transport = transport
        #: declare the tasks extension (stateless era): servers may answer tools/call with tasks
        self.declare_tasks = tasks
        self.handlers = handlers
        self.client_info = client_info
        self.request_timeout = request_timeout
        self.log_level = log_level
        self.era: str | None = None  # "handshake" | "stateless"
        self.version: str | None = None
        self.ready = False
        self.header_source: Callable[[str, dict[str, Any]], dict[str, str]] | None = None
        self.on_list_changed: Callable[[str], None] | None = None
        self._ids = (lambda: str(uuid.uuid4())) if uuid_ids else itertools.count(1).__next__
        self._tokens = itertools.count(1)
        self._pending: dict[RequestId, _Slot] = {}
        self._progress: dict[Any, Callback] = {}
        self._serving: dict[RequestId, trio.CancelScope] = {}
        self._listeners: list[trio.MemorySendChannel[Notification]] = []
        self._closed: McpError | None = None
        self._seen_valid = False
        self._garbage: BadResponse | None = None
        self._nursery: trio.Nursery | None = None
        self._meta: dict[str, Any] = {}
        self._meta_key: tuple[Any, ...] | None = None
        # bounded: a server that floods notifications loses some, never grows our memory
        self._events_in, self._events_out = trio.open_memory_channel[tuple[Callback, tuple[Any, ...]]](_CALLBACK_QUEUE)

    # --- lifecycle ---------------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        nursery.start_soon(self._run_callbacks)
        await self.transport.start(nursery, self._on_incoming)

    @property
    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {}
        if self.handlers.roots is not None:
            caps["roots"] = {"listChanged": False}
        if self.handlers.sampling is not None:
            caps["sampling"] = {}
        if self.handlers.elicitation is not None:
            caps["elicitation"] = {"form": {}} if self.version and self.version >= "2025-11-25" else {}
        if self.declare_tasks and self.era == "stateless":
            caps["extensions"] = {TASKS_EXTENSION: {}}
        return caps

    def stateless_meta(self) -> dict[str, Any]:
        """The stateless era's envelope (a fresh dict; built once per version and log level)."""
        key = (self.version, self.log_level, self.declare_tasks)
        if self._meta_key != key:
            meta = {META_PROTOCOL_VERSION: self.version, META_CLIENT_INFO: self.client_info,
                    META_CLIENT_CAPABILITIES: self.capabilities}
            if self.log_level:
                meta[META_LOG_LEVEL] = self.log_level
            self._meta, self._meta_key = meta, key
        return dict(self._meta)

    # --- sending ---------------------------------------------------------------------------

    async def request(self, method: str, params: dict[str, Any] | None = None, *,
                      timeout: float | None | object = ..., progress: Callback | None = None,
                      cancel_on_timeout: bool = True, raw: bool = False) -> Any:
        """Send a request and wait for its result; JSON-RPC errors raise :class:`RpcError`s.

        ``timeout`` defaults to the session's; ``None`` waits for ever. On timeout or when the
        caller is cancelled, the server is told (``notifications/cancelled``, or the request's
        stream is closed on stateless HTTP). ``raw``: the result as the server's bytes
        (``msgspec.Raw``, valid JSON, not decoded), for a caller that passes it on (a gateway).
        """
        if self._closed is not None:
            raise self._closed
        if self.era is None or (self.era == "handshake" and not self.ready and method not in _BEFORE_READY):
            raise NotInitialized(f"cannot send {method}: the connection is not initialized "
                                 "(connect first, and wait for the handshake to finish)")
        params = dict(params or {})
        token = None
        if progress is not None:
            token = next(self._tokens)
            params["_meta"] = {**params.get("_meta", {}), "progressToken": token}
            self._progress[token] = progress
        if self.era == "stateless":
            meta = self.stateless_meta()
            given = params.get("_meta")
            if given:
                meta.update(given)
            params["_meta"] = meta
        stateless_http = self.era == "stateless" and self.transport.kind == "http"
        headers = self.header_source(method, params) if stateless_http and self.header_source else None
        rid = self._ids()
        traced = client_span(self, method, params, rid) if _OTEL in sys.modules else None
        if traced is None:
            return await self._exchange(rid, method, params, headers, stateless_http, timeout, token, progress,
                                        cancel_on_timeout, raw)
        with traced:  # a CLIENT span, its context in params._meta
            result = await self._exchange(rid, method, params, headers, stateless_http, timeout, token, progress,
                                          cancel_on_timeout, raw)
            traced.result(result)
            return result

    async def _exchange(self, rid: RequestId, method: str, params: dict[str, Any], headers: dict[str, str] | None,
                        stateless_http: bool, timeout: float | None | object, token: Any, progress: Callback | None,
                        cancel_on_timeout: bool, raw: bool = False) -> Any:
        """Send one request and wait for its answer (see :meth:`request`)."""
        slot = self._pending[rid] = _Slot(raw)
        wait = self.request_timeout if timeout is ... else timeout
        try:
            try:
                await self.transport.send(jsonrpc.encode_request(rid, method, params or msgspec.UNSET),
                                          request_id=rid, headers=headers, stateless=stateless_http)
                if wait is None:  # no scope of its own: the caller's scope is the deadline (a gateway)
                    await slot.wait()
                    timed_out = False
                else:
                    with trio.move_on_after(float(wait)) as scope:  # type: ignore[arg-type]
                        await slot.wait()
                    timed_out = scope.cancelled_caught
            except trio.Cancelled:
                with trio.CancelScope(shield=True):
                    await self._cancel_on_wire(rid, method, "the client cancelled the request")
                raise
            if timed_out:
                if cancel_on_timeout:
                    await self._cancel_on_wire(rid, method, f"timed out after {wait:g}s")
                raise RequestTimeout(f"{method}: no answer within {wait:g}s")
        finally:
            self._pending.pop(rid, None)
            if token is not None:
                self._progress.pop(token, None)
        if progress is not None and slot.error is None:
            # Progress callbacks run on the callback queue: let the ones queued before the answer
            # finish, so the caller never sees a late progress update after the call returned.
            await self.drain()
        if slot.error is not None:
            raise slot.error
        return slot.result

    async def drain(self) -> None:
        """Wait until the notification callbacks queued so far (progress, log messages) have run."""
        drained = trio.Event()
        while True:
            try:
                self._events_in.send_nowait((drained.set, ()))
            except trio.ClosedResourceError:
                return
            except trio.WouldBlock:
                await trio.sleep(0.001)  # the queue is full (a flood): wait for room
                continue
            break
        await drained.wait()

    async def _cancel_on_wire(self, rid: RequestId, method: str, reason: str) -> None:
        if self.transport.kind == "http" and self.era == "stateless":
            self.transport.abort(rid)
            return
        if method == "initialize" or self._closed is not None:
            return  # the spec forbids cancelling initialize
        try:
            await self.notify("notifications/cancelled", {"requestId": rid, "reason": reason})
        except McpError as exc:
            log.debug("could not send the cancellation of %s: %s", rid, exc)

    async def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        if self._closed is not None:
            raise self._closed
        await self.transport.send(jsonrpc.encode_notification(method, params if params else msgspec.UNSET))

    # --- receiving ---------------------------------------------------------------------------

    def _on_incoming(self, item: Incoming) -> None:
        if isinstance(item, Failure):
            self._on_failure(item)
            return
        self._seen_valid = True
        if item.is_response:
            self._on_response(item)
        elif item.is_request:
            assert self._nursery is not None
            self._nursery.start_soon(self._serve, item)
        else:
            self._on_notification(item)

    def _on_failure(self, failure: Failure) -> None:
        if failure.request_id is not None:
            slot = self._pending.get(failure.request_id)
            if slot is not None and not slot.finished:
                slot.error = failure.error
                slot.finish()
            return
        if isinstance(failure.error, BadResponse):
            if self._seen_valid:
                log.warning("ignoring a bad message from the server: %s", failure.error.message)
                if self.handlers.bad_message is not None:
                    self.handlers.bad_message(failure.error)
                return
            self._garbage = failure.error
        elif isinstance(failure.error, ConnectionClosed) and self._garbage is not None:
            failure.error.message += f", after sending garbage ({self._garbage.message})"
        self._closed = failure.error if isinstance(failure.error, ConnectionClosed) else self._closed
        for slot in self._pending.values():
            if not slot.finished:
                slot.error = failure.error
                slot.finish()
        for listener in self._listeners:
            listener.close()

    def _on_response(self, msg: Message) -> None:
        slot = self._pending.get(msg.id)  # type: ignore[arg-type]
        if slot is None or slot.finished:
            log.debug("dropping an answer to unknown or finished request %r", msg.id)
            return
        if msg.error is not msgspec.UNSET:
            data = None if msg.error.data is msgspec.UNSET else msg.error.data
            slot.error = from_rpc(msg.error.code, msg.error.message, data)
        elif slot.raw:  # valid JSON already (the frame was parsed to split it)
            slot.result = msg.result if msg.result is not msgspec.UNSET else msgspec.Raw(b"null")
        else:
            try:
                slot.result = msgspec.json.decode(msg.result) if msg.result is not msgspec.UNSET else None
            except msgspec.DecodeError:
                slot.error = BadResponse("the result is not valid JSON")
        slot.finish()

    def _on_notification(self, msg: Message) -> None:
        try:
            params = msgspec.json.decode(msg.params) if msg.params is not msgspec.UNSET else {}
        except msgspec.DecodeError:
            return
        params = params if isinstance(params, dict) else {}
        method = str(msg.method)
        if method == "notifications/progress":
            callback = self._progress.get(params.get("progressToken"))
            if callback is not None:
                self._queue(callback, (params.get("progress"), params.get("total"), params.get("message")))
        elif method == "notifications/message" and self.handlers.log is not None:
            self._queue(self.handlers.log, (params,))
        elif method == "notifications/cancelled":
            scope = self._serving.get(params.get("requestId"))  # type: ignore[arg-type]
            if scope is not None:
                scope.cancel()
        if method.endswith("/list_changed") and self.on_list_changed is not None:
            self.on_list_changed(method)
        note = Notification(method, params)
        for listener in list(self._listeners):
            try:
                listener.send_nowait(note)
            except trio.WouldBlock:
                log.warning("a notification listener is full; dropping %s", method)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._listeners.remove(listener)
        if self.handlers.notification is not None:
            self._queue(self.handlers.notification, (method, params))

    def _queue(self, callback: Callback, args: tuple[Any, ...]) -> None:
        try:
            self._events_in.send_nowait((callback, args))
        except trio.WouldBlock:
            log.warning("the server sends notifications faster than they are handled; dropping one")
        except trio.ClosedResourceError:
            pass

    async def _run_callbacks(self) -> None:
        """Run notification callbacks one at a time, in arrival order, off the reading path."""
        async for callback, args in self._events_out:
            try:
                value = callback(*args)
                if inspect.isawaitable(value):
                    await value
            except Exception:  # a broken callback must not end the session
                log.exception("a notification callback failed")

    def listen(self, buffer: int = 256) -> tuple[trio.MemorySendChannel[Notification],
                                                  trio.MemoryReceiveChannel[Notification]]:
        """A channel pair that sees every notification; close the send end to stop."""
        send, receive = trio.open_memory_channel[Notification](buffer)
        self._listeners.append(send)
        return send, receive

    # --- requests from the server (handshake era) and MRTR input requests ------------------

    async def _serve(self, msg: Message) -> None:
        rid = msg.id
        assert rid is not None and not isinstance(rid, msgspec.UnsetType)
        try:
            params = msgspec.json.decode(msg.params) if msg.params is not msgspec.UNSET else {}
        except msgspec.DecodeError:
            params = {}
        with trio.CancelScope() as scope:
            self._serving[rid] = scope
            try:
                result = await self.answer(str(msg.method), params if isinstance(params, dict) else {})
                frame = jsonrpc.encode_result(rid, result)
            except RpcError as exc:
                frame = jsonrpc.encode_error(rid, jsonrpc.ErrorObject(exc.rpc_code or -32603, exc.message))
            except Exception as exc:
                log.exception("answering the server's %s failed", msg.method)
                frame = jsonrpc.encode_error(rid, jsonrpc.ErrorObject(-32603, f"client error: {exc}"))
            finally:
                self._serving.pop(rid, None)
        if scope.cancelled_caught:
            return  # the server cancelled its request: no answer
        try:
            await self.transport.send(frame)
        except McpError as exc:
            log.warning("could not answer the server's %s: %s", msg.method, exc)

    async def answer(self, method: str, params: dict[str, Any]) -> Any:
        """The client's result for a server request (a live one, or an MRTR input request)."""
        if self.handlers.request is not None:
            value = self.handlers.request(method, params)
            return await value if inspect.isawaitable(value) else value
        if method == "ping":
            return {}
        if method == "roots/list" and self.handlers.roots is not None:
            return {"roots": list(self.handlers.roots)}
        callback = {"sampling/createMessage": self.handlers.sampling,
                    "elicitation/create": self.handlers.elicitation}.get(method)
        if callback is None:
            raise RpcError(f"this client does not handle {method}", -32601)
        value = callback(params)
        if inspect.isawaitable(value):
            value = await value
        return value

    async def answer_requests(self, requests: Any, *, skip: Any = (), kind: str = "input request") -> dict[str, Any]:
        """Answers to a map of input requests (MRTR or a task's), keyed as asked; keys in
        ``skip`` were answered before."""
        responses: dict[str, Any] = {}
        for key, req in (requests if isinstance(requests, dict) else {}).items():
            if key in skip:
                continue
            if not isinstance(req, dict) or not isinstance(req.get("method"), str):
                raise BadResponse(f"{kind} {key!r} is not a request object")
            params = req.get("params") if isinstance(req.get("params"), dict) else {}
            responses[key] = await self.answer(req["method"], params)
        return responses

    async def aclose(self) -> None:
        # requests still waiting get an answer now: the connection is going away under them
        self._on_failure(Failure(None, ConnectionClosed("the connection was closed while the request was waiting")))
        await self.transport.aclose()
        self._events_in.close()
