"""The per-request context a tool, resource or prompt can ask for with a typed parameter."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import trio

from ..protocol import jsonrpc
from ..protocol.connection import RequestReceived
from ..protocol.types import LOG_LEVELS
from .errors import InputRequired, MissingCapability
from .schema import Injected

if TYPE_CHECKING:
    from .mrtr import StateSealer
    from .changes import ChangeHub
    from .tasks.manager import TaskManager, TaskRun

_CAPABILITY_OF = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling", "roots/list": "roots"}
_RESPONSE_KEYS = {"elicitation/create": "action", "sampling/createMessage": "content", "roots/list": "roots"}


class PeerError(Exception):
    """The client answered a server request with an error, or could not be asked."""


class Peer(Protocol):
    """What a transport offers one request: a way back to the client."""

    async def notify(self, data: bytes) -> None:
        """Send a notification that belongs to this request (progress, log message)."""

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a server-to-client request and wait for its result (handshake era)."""


#: seconds the requests a shutdown stopped get to write their answers before the server stops
#: waiting for them
STOP_BOUND_S = 2.0


class RunningRequests:
    """Every request of an app still running (its cancel scope), so that a server that stops
    can end them all with an answer. After :meth:`stop`, a request that is cancelled, and one
    that starts, answers -32000 "server shutting down" (see ``Dispatcher.handle``); a
    stopped app stays stopped."""

    def __init__(self) -> None:
        self.scopes: set[trio.CancelScope] = set()
        self.stopped = False

    def add(self, scope: trio.CancelScope) -> None:
        self.scopes.add(scope)
        if self.stopped:
            scope.cancel()

    def stop(self) -> None:
        """Cancel every request still running, and each one that starts from now on."""
        self.stopped = True
        for scope in self.scopes:
            scope.cancel()


class ContextServices(Protocol):
    """What a context needs of the server: the task manager (progress, input and escalation
    of calls running as tasks), the sealer of multi-round-trip state, and the change hub. The
    application object offers all three."""

    tasks: "TaskManager"
    sealer: "StateSealer"
    hub: "ChangeHub"


class Context(Injected):
    """Progress, logging, client input and identity for the request being served."""

    def __init__(
        self,
        app: ContextServices,
        request: RequestReceived,
        peer: Peer,
        *,
        progress_token: Any = None,
        input_responses: dict[str, Any] | None = None,
        request_state: Any = None,
        target: str = "",
    ) -> None:
        self._app = app
        self._request = request
        self._peer = peer
        self._progress_token = progress_token
        self._input_responses = input_responses or {}
        self.request_state: Any = request_state
        """The state this request's earlier round handed back (stateless era), else None."""
        self._target = target
        self._task: "TaskRun | None" = None  # set when this call may run as a task

    def _in_task(self) -> "TaskRun | None":
        """The task this call now runs as (after escalation), else None."""
        run = self._task
        return run if run is not None and run.escalating else None

    @property
    def sync(self) -> "SyncContext":
        """Blocking versions of the methods, for code running in a worker thread."""
        return SyncContext(self)

    # -- identity ----------------------------------------------------------------------------
    @property
    def request_id(self) -> int | str:
        return self._request.id

    @property
    def protocol_version(self) -> str:
        return self._request.features.version

    @property
    def stateless(self) -> bool:
        return self._request.features.stateless

    @property
    def client_info(self) -> dict[str, Any]:
        return self._request.client_info

    @property
    def client_capabilities(self) -> dict[str, Any]:
        return self._request.client_capabilities

    @property
    def progress_token(self) -> Any:
        return self._progress_token

    @property
    def log_level(self) -> str | None:
        """The least severe log level the client wants for this request (None: no log messages
        in the stateless era, every level in the handshake era until logging/setLevel)."""
        return self._request.log_level

    @property
    def connection(self) -> Any:
        """An object that is the same for every request of one client connection (a stdio
        process, an HTTP session) and different across them: to tell clients apart without
        knowing who they are. Each stateless-era request is a connection of its own."""
        return getattr(self._peer, "connection", self._peer)

    @property
    def principal(self) -> Any:
        """Who is asking, as the transport established it (None when nobody is identified)."""
        return self._request.principal

    # -- progress and logs -------------------------------------------------------------------
    async def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        """Send ``notifications/progress`` if the client asked for progress on this request;
        in a task, the message (or "progress/total") becomes the task's statusMessage."""
        run = self._in_task()
        if run is not None:
            text = message or (f"{progress:g}/{total:g}" if total is not None else f"{progress:g}")
            await self._app.tasks.progress(run, text)
            return
        if self._progress_token is None:
            return
        params: dict[str, Any] = {"progressToken": self._progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None and self._request.features.progress_message:
            params["message"] = message
        await self._peer.notify(jsonrpc.encode_notification("notifications/progress", params))

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send ``notifications/message`` when the client's level lets it through."""
        if level not in LOG_LEVELS:
            raise ValueError(f"unknown log level {level!r}; use one of {', '.join(LOG_LEVELS)}")
        if self._in_task() is not None:
            return  # tasks carry no log messages (the tasks extension); statusMessage is for progress
        threshold = self._request.log_level
        if threshold is None:
            if self.stateless:
                return  # stateless: no log messages unless the request asked for them
        elif LOG_LEVELS.index(level) < LOG_LEVELS.index(threshold):
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger:
            params["logger"] = logger
        await self._peer.notify(jsonrpc.encode_notification("notifications/message", params))

    async def debug(self, data: Any) -> None:
        await self.log("debug", data)

    async def info(self, data: Any) -> None:
        await self.log("info", data)

    async def warning(self, data: Any) -> None:
        await self.log("warning", data)

    async def error(self, data: Any) -> None:
        await self.log("error", data)

    # -- input from the client -----------------------------------------------------------------
    def require_capability(self, *names: str) -> None:
        """Raise (-> -32021 in the stateless era) unless the client declared these capabilities."""
        missing = {n: {} for n in names if n not in self.client_capabilities}
        if missing:
            raise MissingCapability(missing)

    async def request_input(self, requests: dict[str, tuple[str, dict[str, Any]]], *, state: Any = None) -> dict[str, Any]:
        """Ask the client for several inputs at once: ``{key: (method, params)}`` -> ``{key: result}``.

        Methods: ``elicitation/create``, ``sampling/createMessage``, ``roots/list``. In the
        handshake era each is sent to the client as a request; in the stateless era the missing
        ones end this round with an InputRequiredResult (and ``state`` sealed into
        ``requestState``), and the client's retry brings the answers back.
        """
        run = self._in_task()
        if run is not None:  # a task waits in input_required until tasks/update answers
            for method, _ in requests.values():
                self.require_capability(_CAPABILITY_OF.get(method, method))
            return await self._app.tasks.ask(run, requests)  # answers checked by tasks/update
        if self.stateless:
            answers: dict[str, Any] = {}
            missing: dict[str, Any] = {}
            for key, (method, params) in requests.items():
                if key in self._input_responses:
                    answers[key] = check_response(key, method, self._input_responses[key])
                else:
                    # The spec forbids input requests the client cannot answer: -32021 instead.
                    self.require_capability(_CAPABILITY_OF.get(method, method))
                    missing[key] = {"method": method, "params": params}
            if missing:
                raise InputRequired(missing, self._app.sealer.seal(self._request.method, self._target, state) if state is not None else None)
            return answers
        out: dict[str, Any] = {}
        for key, (method, params) in requests.items():
            self.require_capability(_CAPABILITY_OF.get(method, method))
            try:
                out[key] = await self._peer.request(method, params)
            except PeerError as exc:
                raise RuntimeError(f"the client could not answer {method}: {exc}") from None
        return out

    async def elicit(self, message: str, requested_schema: dict[str, Any], *, key: str = "elicitation") -> dict[str, Any]:
        """Ask the user for structured input; returns ``{"action": ..., "content": ...}``."""
        params: dict[str, Any] = {"message": message, "requestedSchema": requested_schema}
        if self.protocol_version >= "2025-11-25":
            params = {"mode": "form", **params}
        return (await self.request_input({key: ("elicitation/create", params)}))[key]

    async def sample(self, messages: list[dict[str, Any]] | str, *, max_tokens: int = 1000, key: str = "sampling", **extra: Any) -> dict[str, Any]:
        """Ask the client's model for a completion; returns the CreateMessageResult."""
        if isinstance(messages, str):
            messages = [{"role": "user", "content": {"type": "text", "text": messages}}]
        params = {"messages": messages, "maxTokens": max_tokens, **extra}
        return (await self.request_input({key: ("sampling/createMessage", params)}))[key]

    async def list_roots(self, *, key: str = "roots") -> list[dict[str, Any]]:
        """The client's roots (``[{"uri": ..., "name": ...}]``)."""
        return list((await self.request_input({key: ("roots/list", {})}))[key].get("roots", []))

    async def start_task(self) -> None:
        """Answer the client now with a task and go on as one (when this call may run as a task:
        the tool declares ``task=...`` and the client the tasks extension); a no-op otherwise.

        Without it a task-capable call becomes a task once it has run ``task_escalate_ms``. Code
        before it runs within the request, so input it asks for is gathered by multi round-trip
        requests; after it, input requests park the task in ``input_required``."""
        if self._task is not None:
            await self._app.tasks.escalate(self._task)

    async def close_stream(self, retry_ms: int | None = None) -> None:
        """HTTP (2025-11-25 SSE polling): close this request's SSE stream now; the client
        reconnects with ``Last-Event-ID`` and gets the rest, the result included. A no-op where
        there is no such stream (stdio, JSON responses)."""
        close = getattr(self._peer, "close_stream", None)
        if close is not None:
            await close(retry_ms)

    # -- change notifications ----------------------------------------------------------------------
    async def notify_list_changed(self, kind: str) -> None:
        """Tell listening clients that the ``tools``, ``prompts`` or ``resources`` list changed."""
        await self._app.hub.announce(f"{kind}/list_changed", None)

    async def notify_resource_updated(self, uri: str) -> None:
        await self._app.hub.announce("resources/updated", uri)


def check_response(key: str, method: str, value: Any) -> Any:
    need = _RESPONSE_KEYS.get(method)
    if not isinstance(value, dict) or (need is not None and need not in value):
        raise jsonrpc.ProtocolError(jsonrpc.INVALID_PARAMS, f"Invalid params: inputResponses[{key!r}] is not a valid {method} result")
    return value


class SyncContext:
    """Blocking twins of the context's methods, for code running in a worker thread."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx

    def report_progress(self, progress: float, total: float | None = None, message: str | None = None) -> None:
        trio.from_thread.run(self._ctx.report_progress, progress, total, message)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        trio.from_thread.run(self._ctx.log, level, data, logger)

    def start_task(self) -> None:
        """See :meth:`Context.start_task`."""
        trio.from_thread.run(self._ctx.start_task)

    def check_cancelled(self) -> None:
        """Raise (trio.Cancelled) if the call was cancelled: timed out, the client went away,
        or tasks/cancel. A thread cannot be stopped from outside; long work should call this
        now and then so cancelling it frees the thread, not just the caller."""
        trio.from_thread.check_cancelled()


__all__ = ["Context", "ContextServices", "Peer", "PeerError", "RunningRequests", "SyncContext"]
