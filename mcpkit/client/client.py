"""The client: connect to any MCP server (a command line or a URL), find its era, then call it.

    async with mcpkit.client.connect("http://127.0.0.1:8000/mcp") as client:
        result = await client.call_tool("greet", {"name": "Ada"})

Era detection follows the spec's backward-compatibility rules: probe with ``server/discover``
(stateless era) and fall back to the ``initialize`` handshake, and on HTTP further to the legacy
HTTP+SSE transport. The answer is remembered per server for the life of the process.
"""

from __future__ import annotations

import logging
import shlex
import time
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Iterable, Sequence

import trio

from ..protocol.http_rules import mirrored_paths, request_headers
from .errors import BadResponse, HeaderMismatch, McpError, NotInitialized, UnsupportedVersion
from .results import CallResult, ServerDescription
from ._connecting import Connecting, forget_eras, is_url  # noqa: F401 (forget_eras, is_url: re-exported)
from ._schema_check import check_arguments
from .session import Callback, Handlers, Notification, Session
from .options import ClientSettings
from .task_handles import StatusCallback, TaskHandle, is_task

log = logging.getLogger("mcpkit.client")


@asynccontextmanager
async def connect(target: str | Sequence[str], settings: ClientSettings | None = None, *,
                  on_log: Callback | None = None, on_elicitation: Callback | None = None,
                  on_sampling: Callback | None = None, roots: list[dict[str, Any]] | None = None,
                  on_notification: Callback | None = None, on_request: Callback | None = None,
                  on_bad_message: Callback | None = None, **overrides: Any) -> AsyncIterator["Client"]:
    """Connect to ``target``: an ``http(s)://`` URL, or a command line run as a stdio server.

    ``overrides`` set :class:`ClientSettings` fields by name. The callbacks may be plain or async:
    ``on_elicitation(params) -> ElicitResult``, ``on_sampling(params) -> CreateMessageResult``,
    ``on_log(params)``, ``on_notification(method, params)``; ``on_request(method, params)``
    answers any request from the server before those (a gateway relays them); ``on_bad_message(error)``
    hears of messages from the server that could not be used.
    """
    base = settings or ClientSettings()
    settings = ClientSettings(**{**base.__dict__, **overrides}) if overrides else base
    handlers = Handlers(elicitation=on_elicitation, sampling=on_sampling, roots=roots, log=on_log,
                        notification=on_notification, request=on_request, bad_message=on_bad_message)
    try:
        async with trio.open_nursery() as nursery:
            client = Client(target, settings, handlers)
            try:
                await client._connect(nursery)
                yield client
            finally:
                with trio.CancelScope(shield=True):
                    await client.aclose()
                nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        leaf = _sole(group)
        if leaf is None:
            raise
        raise leaf from None


def _sole(group: BaseExceptionGroup) -> BaseException | None:
    """The one real exception inside nested single-member groups, if that is all there is."""
    found = [e for e in _leaves(group) if not isinstance(e, trio.Cancelled)]
    return found[0] if len(found) == 1 else None


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for sub in exc.exceptions for leaf in _leaves(sub)]
    return [exc]


class Client(Connecting):
    """A connected MCP client; make one with :func:`connect`."""

    def __init__(self, target: str | Sequence[str], settings: ClientSettings, handlers: Handlers) -> None:
        self.target = target
        self.settings = settings
        self.handlers = handlers
        self.session: Session | None = None
        self.description: ServerDescription | None = None
        self._tools: dict[str, dict[str, Any]] = {}
        self._mirrored: dict[str, dict[tuple[str, ...], str]] = {}
        self._tools_expire = 0.0
        self._tools_invalidations = 0
        self._tools_lock = trio.Lock()
        self._key = target if isinstance(target, str) else shlex.join(target)

    async def aclose(self) -> None:
        if self.session is not None:
            await self.session.aclose()

    # --- plain requests ----------------------------------------------------------------------

    def _ready_session(self) -> Session:
        if self.session is None or self.description is None:
            raise NotInitialized()
        return self.session

    async def request(self, method: str, params: dict[str, Any] | None = None, *,
                      timeout: float | None | object = ..., progress: Callback | None = None) -> Any:
        """Send any request; answers that ask for input (MRTR) are answered and retried."""
        session = self._ready_session()
        params = dict(params or {})
        version_retried = False
        for _ in range(self.settings.max_input_rounds + 1):
            try:
                result = await session.request(method, params, timeout=timeout, progress=progress)
            except UnsupportedVersion as exc:
                # Stateless era: the server refused our version before running anything; switch
                # to one it lists (once) and send the request again.
                retry = self._retry_version(exc) if session.era == "stateless" and not version_retried else None
                if retry is None:
                    raise
                version_retried = True
                session.version = session.transport.protocol_version = retry
                if self.description is not None:
                    self.description.protocol_version = retry
                result = await session.request(method, params, timeout=timeout, progress=progress)
            if not (isinstance(result, dict) and result.get("resultType") == "input_required"):
                return result
            params = await self._answer_inputs(session, params, result)
        raise BadResponse(f"the server still wanted input after {self.settings.max_input_rounds} rounds")

    async def answer_requests(self, requests: Any, *, skip: Iterable[str] = (), kind: str = "input request") -> dict[str, Any]:
        """Answers to a map of input requests (multi round-trip, or a task's), through this
        client's callbacks (elicitation, sampling, roots); keys in ``skip`` were answered before."""
        return await self._ready_session().answer_requests(requests, skip=skip, kind=kind)

    async def _answer_inputs(self, session: Session, params: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        responses = await session.answer_requests(result.get("inputRequests"))
        retry = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState", "_meta")}
        if responses:
            retry["inputResponses"] = responses
        if isinstance(result.get("requestState"), str):
            retry["requestState"] = result["requestState"]
        return retry

    async def ping(self, *, timeout: float | None | object = ...) -> None:
        """Check that the server answers. The stateless era removed ``ping``: ``server/discover`` then."""
        session = self._ready_session()
        await session.request("server/discover" if session.era == "stateless" else "ping", timeout=timeout)

    async def discover(self) -> ServerDescription:
        self._ready_session()
        assert self.description is not None
        return self.description

    async def _list(self, method: str, key: str, params: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        items: list[dict[str, Any]] = []
        cursor = None
        last: dict[str, Any] = {}
        for _ in range(10_000):
            page_params = dict(params or {})
            if cursor:
                page_params["cursor"] = cursor
            last = await self.request(method, page_params)
            if not isinstance(last, dict) or not isinstance(last.get(key), list):
                raise BadResponse(f"{method} returned no {key} list")
            items.extend(x for x in last[key] if isinstance(x, dict))
            cursor = last.get("nextCursor")
            if not isinstance(cursor, str) or not cursor:
                break
        return items, last

    async def list_resources(self) -> list[dict[str, Any]]:
        return (await self._list("resources/list", "resources"))[0]

    async def list_resource_templates(self) -> list[dict[str, Any]]:
        return (await self._list("resources/templates/list", "resourceTemplates"))[0]

    async def read_resource(self, uri: str) -> list[dict[str, Any]]:
        result = await self.request("resources/read", {"uri": uri})
        return result.get("contents", []) if isinstance(result, dict) else []

    async def list_prompts(self) -> list[dict[str, Any]]:
        return (await self._list("prompts/list", "prompts"))[0]

    async def get_prompt(self, name: str, arguments: dict[str, str] | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"name": name}
        if arguments:
            params["arguments"] = arguments
        return await self.request("prompts/get", params)

    async def complete(self, ref: dict[str, Any], argument: str, value: str,
                       context: dict[str, str] | None = None) -> list[str]:
        params: dict[str, Any] = {"ref": ref, "argument": {"name": argument, "value": value}}
        if context:
            params["context"] = {"arguments": context}
        result = await self.request("completion/complete", params)
        values = (result.get("completion") or {}).get("values") if isinstance(result, dict) else None
        return [v for v in values or [] if isinstance(v, str)]

    # --- tools, with a cache ---------------------------------------------------------------

    async def list_tools(self, *, refresh: bool = False) -> list[dict[str, Any]]:
        """The server's tools, from the cache while it is fresh."""
        async with self._tools_lock:
            if refresh or time.monotonic() >= self._tools_expire:
                invalidations = self._tools_invalidations
                tools, last = await self._list("tools/list", "tools")
                self._fill_tools(tools, last.get("ttlMs"))
                if self._tools_invalidations != invalidations:
                    self._tools_expire = 0.0  # list_changed while fetching: this list may be stale already
            return list(self._tools.values())

    def invalidate_tools(self) -> None:
        """Forget the cached tool list; the next use fetches it again."""
        self._tools_expire = 0.0
        self._tools_invalidations += 1

    def _fill_tools(self, tools: list[dict[str, Any]], ttl_ms: Any) -> None:
        stateless_http = self.description is not None and self.description.era == "stateless" \
            and self.description.transport == "http"
        self._tools, self._mirrored = {}, {}
        for tool in tools:
            name = tool.get("name")
            if not isinstance(name, str):
                continue
            if stateless_http:
                try:
                    self._mirrored[name] = mirrored_paths(tool.get("inputSchema") or {})
                except ValueError as exc:
                    log.warning("leaving out tool %r: %s", name, exc)
                    continue
            self._tools[name] = tool
        ttl = ttl_ms / 1000 if isinstance(ttl_ms, (int, float)) and not isinstance(ttl_ms, bool) else self.settings.tools_ttl
        self._tools_expire = time.monotonic() + max(0.0, ttl)

    def _list_changed(self, method: str) -> None:
        if method == "notifications/tools/list_changed":
            self.invalidate_tools()

    def _headers_for(self, method: str, params: dict[str, Any]) -> dict[str, str]:
        mirrored = self._mirrored.get(params.get("name", "")) if method == "tools/call" else None
        return request_headers(method, params, mirrored)

    async def tool(self, name: str) -> dict[str, Any] | None:
        """The cached definition of ``name`` (fetching the list when stale or when it is unknown)."""
        tools = {t["name"]: t for t in await self.list_tools()}
        if name not in tools:
            tools = {t["name"]: t for t in await self.list_tools(refresh=True)}
        return tools.get(name)

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None, *,
                        timeout: float | None | object = ..., progress: Callback | None = None,
                        validate: bool = True, on_status: StatusCallback | None = None) -> CallResult:
        """Call a tool. Arguments are checked against its cached input schema first.

        A result with ``isError`` comes back as a :class:`CallResult` with ``is_error`` set. When
        the server answers with a task (``settings.tasks``), this waits for it, polling;
        ``on_status`` sees each state. :meth:`start_tool` hands the task back instead.
        """
        started = await self.start_tool(name, arguments, timeout=timeout, progress=progress, validate=validate)
        if isinstance(started, TaskHandle):
            return await started.wait(on_status=on_status)
        return started

    async def start_tool(self, name: str, arguments: dict[str, Any] | None = None, *,
                         timeout: float | None | object = ..., progress: Callback | None = None,
                         validate: bool = True) -> "CallResult | TaskHandle":
        """Call a tool; a :class:`TaskHandle` when the server answered with a task, else the result."""
        arguments = dict(arguments or {})
        definition = await self.tool(name) if validate else None
        if definition is not None:
            check_arguments(definition.get("inputSchema"), arguments)
        params = {"name": name, "arguments": arguments}
        try:
            result = await self.request("tools/call", params, timeout=timeout, progress=progress)
        except HeaderMismatch:
            if self.description is None or self.description.era != "stateless" \
                    or self.description.transport != "http":
                raise
            # The server rejected the headers before running anything: refresh the schema, retry once.
            await self.list_tools(refresh=True)
            result = await self.request("tools/call", params, timeout=timeout, progress=progress)
        if not isinstance(result, dict):
            raise BadResponse("tools/call returned something that is not an object")
        if is_task(result):
            return TaskHandle(self, result["taskId"], result)
        return CallResult.from_raw(result)

    def task(self, task_id: str) -> TaskHandle:
        """A handle on a task created earlier (by this connection or another one)."""
        return TaskHandle(self, task_id)

    # --- notifications -----------------------------------------------------------------------

    @asynccontextmanager
    async def listen(self, *, tools: bool = False, resources: bool = False, prompts: bool = False,
                     resource_uris: Sequence[str] = ()) -> AsyncIterator[trio.MemoryReceiveChannel[Notification]]:
        """Receive change notifications while the block runs.

        Stateless era: one ``subscriptions/listen`` stream with the chosen filter. Handshake era:
        ``resources/subscribe`` for each URI; list changes arrive on the connection anyway.
        """
        session = self._ready_session()
        send, receive = session.listen()
        async with trio.open_nursery() as nursery:
            if session.era == "stateless":
                spec: dict[str, Any] = {}
                if tools:
                    spec["toolsListChanged"] = True
                if resources:
                    spec["resourcesListChanged"] = True
                if prompts:
                    spec["promptsListChanged"] = True
                if resource_uris:
                    spec["resourceSubscriptions"] = list(resource_uris)
                nursery.start_soon(self._listen_stream, session, spec)
            else:
                for uri in resource_uris:
                    await session.request("resources/subscribe", {"uri": uri})
            try:
                yield receive
            finally:
                nursery.cancel_scope.cancel()
                send.close()
                if session.era == "handshake":
                    with trio.CancelScope(shield=True), trio.move_on_after(5):
                        for uri in resource_uris:
                            try:
                                await session.request("resources/unsubscribe", {"uri": uri})
                            except McpError:
                                pass

    async def _listen_stream(self, session: Session, spec: dict[str, Any]) -> None:
        try:
            await session.request("subscriptions/listen", {"notifications": spec}, timeout=None)
        except McpError as exc:
            log.warning("subscriptions/listen ended: %s", exc)
