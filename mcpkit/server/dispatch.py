"""Request -> handler dispatch: one path from a decoded request to the encoded answer."""

from __future__ import annotations

import base64
import functools
import logging
import math
from typing import Any, Awaitable, Callable, Iterable, Protocol

import msgspec
import trio

from ..protocol import http_rules, jsonrpc
from ..protocol.connection import RequestReceived
from ..protocol.jsonrpc import Answer, ProtocolError, RequestId
from ..protocol.types import (
    META_SERVER_INFO,
    META_SUBSCRIPTION_ID,
    CallToolParams,
    CompleteParams,
    GetPromptParams,
    ListenParams,
    TaskParams,
    UpdateTaskParams,
    PaginatedParams,
    ReadResourceParams,
    ResourceLink,
    AudioContent,
    TextContent,
)
from ..protocol.versions import STATELESS_VERSIONS, Features
from .app import App
from .auth import check_scopes, may_use
from .context import Context, Peer, check_response as _check_response
from .errors import InputRequired, MissingCapability, ResourceNotFound, ToolError, shutting_down
from .middleware import Call, describe_call
from .tasks.manager import TaskRun, declared, missing_extension
from .tools import ToolDef

log = logging.getLogger("mcpkit.server")

Handler = Callable[[RequestReceived, Peer], Awaitable[Any]]
Work = Callable[[], Awaitable[dict[str, Any]]]


class ScopeRegistry(Protocol):
    """Where a running request's cancel scope is registered by its id: a session's dict, or a
    stateless exchange's own registry (``streamable._Watched``, cancelled if the client leaves)."""

    def __setitem__(self, request_id: RequestId, scope: trio.CancelScope) -> None: ...

    def get(self, request_id: RequestId) -> trio.CancelScope | None: ...

    def __delitem__(self, request_id: RequestId) -> None: ...


_STATELESS_METHODS = frozenset({"server/discover", "subscriptions/listen", "tasks/get", "tasks/update", "tasks/cancel"})
_CACHEABLE = frozenset({"tools/list", "prompts/list", "resources/list", "resources/templates/list", "resources/read", "server/discover"})


class Dispatcher:
    def __init__(self, app: App) -> None:
        self.app = app
        self.handlers: dict[str, Handler] = {
            "tools/list": self.list_tools,
            "resources/list": self.list_resources,
            "resources/templates/list": self.list_templates,
            "resources/read": self.read_resource,
            "prompts/list": self.list_prompts,
            "prompts/get": self.get_prompt,
            "completion/complete": self.complete,
            "server/discover": self.discover,
            "subscriptions/listen": self.listen,
            "tasks/get": self.get_task,
            "tasks/update": self.update_task,
            "tasks/cancel": self.cancel_task,
        }

    async def answer(self, req: RequestReceived, peer: Peer,
                     scopes: ScopeRegistry | None = None) -> Answer | None:
        """Answer one request. Errors become JSON-RPC errors; nothing internal leaks out.

        The request runs in one cancel scope, registered in ``scopes`` by its id so the client
        can cancel it (it then answers None: no response is sent) and in the app's running
        requests so a server that stops can end it (it then answers -32000, "server shutting
        down"). The scope carries the request's deadline from the start (the tool's timeout,
        else ``default_timeout``): a tool that runs out answers an isError result, anything
        else -32001.
        """
        running = self.app.requests
        if running.stopped:  # nothing starts once the server stops (not even work that never yields)
            return Answer.failure(req.id, shutting_down())
        try:
            work, deadline = self._plan(req, peer)
            with trio.CancelScope(deadline=deadline) as scope:
                running.add(scope)
                if scopes is not None:
                    scopes[req.id] = scope
                try:
                    return Answer(req.id, self._finish(req, await work()))
                finally:
                    running.scopes.discard(scope)
                    if scopes is not None and scopes.get(req.id) is scope:
                        del scopes[req.id]
            if running.stopped:
                return Answer.failure(req.id, shutting_down())
            if trio.current_time() >= deadline:  # not a cancel from the client or a shutdown
                timeout = self.app.settings.default_timeout
                return Answer.failure(req.id, ProtocolError(jsonrpc.REQUEST_TIMEOUT, f"Request timed out after {timeout:g} s"))
            return None
        except ProtocolError as exc:
            return Answer.failure(req.id, exc)
        except MissingCapability as exc:
            return Answer.failure(req.id, ProtocolError(jsonrpc.MISSING_CLIENT_CAPABILITY, str(exc), {"requiredCapabilities": exc.required}))
        except Exception:
            log.exception("internal error while serving %s", req.method)
            return Answer.failure(req.id, ProtocolError(jsonrpc.INTERNAL_ERROR, "Internal error"))

    def _plan(self, req: RequestReceived, peer: Peer) -> tuple[Work, float]:
        """The handler call that answers ``req`` (not started yet), inside the middleware that
        wrap its method, and its deadline."""
        if self.app.middleware and self.app.middleware.for_method(req.method):
            return self._plan_wrapped(req, peer)
        return self._plan_plain(req, peer)

    def _plan_plain(self, req: RequestReceived, peer: Peer, call: Call | None = None) -> tuple[Work, float]:
        if req.method == "tools/call":
            params = req.params_as(CallToolParams)
            tool = self.app.registry.tools.get(params.name)
            if tool is None:
                raise ProtocolError(jsonrpc.INVALID_PARAMS, f"Unknown tool: {jsonrpc.clip(params.name)}")
            if req.headers is not None and tool.header_params:
                http_rules.check_param_headers(req.headers, tool.header_params, params.arguments)
            check_scopes(req.principal, tool.scopes, f"tool {tool.name}")
            deadline = trio.current_time() + self._timeout(tool)
            if call is None:
                return functools.partial(self.call_tool, req, peer, params, tool, deadline), deadline

            async def work() -> dict[str, Any]:  # with the arguments as the middleware left them
                given = msgspec.structs.replace(params, arguments=call.arguments)
                return await self.call_tool(req, peer, given, tool, deadline)

            return work, deadline
        handler = self.handlers.get(req.method)
        if handler is None or (req.method in _STATELESS_METHODS and not req.features.stateless):
            raise ProtocolError(jsonrpc.METHOD_NOT_FOUND, f"Method not found: {jsonrpc.clip(req.method)}")
        if req.method == "subscriptions/listen":  # held open until the client or a shutdown ends it
            return functools.partial(handler, req, peer), math.inf
        return functools.partial(handler, req, peer), trio.current_time() + self.app.settings.default_timeout

    def _plan_wrapped(self, req: RequestReceived, peer: Peer) -> tuple[Work, float]:
        """Through the middleware: they see every request of their methods, refused ones
        (unknown tool, bad params) included, and may change a tool's arguments."""
        call = describe_call(self.app.registry, req)
        try:
            work, deadline = self._plan_plain(req, peer, call)
        except ProtocolError as exc:
            work, deadline = functools.partial(_raise, exc), math.inf
        return functools.partial(self._through_middleware, call, work), deadline

    async def _through_middleware(self, call: Call, work: Work) -> dict[str, Any]:
        try:
            observers = self.app.observers
            return await self.app.middleware.run(call, work, observers if observers else None)
        except ToolError as exc:  # a middleware's refusal (the tool's own are answered inside)
            if call.method == "tools/call":
                return _error_result(str(exc))
            raise ProtocolError(jsonrpc.INTERNAL_ERROR, str(exc)) from None

    def _timeout(self, tool: ToolDef) -> float:
        return tool.timeout or self.app.settings.default_timeout

    def _finish(self, req: RequestReceived, result: dict[str, Any]) -> dict[str, Any]:
        """Add the stateless era's result fields."""
        if not req.features.result_type:
            return result
        result.setdefault("resultType", "complete")
        meta = result.setdefault("_meta", {})
        meta[META_SERVER_INFO] = self.app.server_info
        if req.method in _CACHEABLE:
            result["ttlMs"] = self.app.settings.cache_ttl_ms
            result["cacheScope"] = self.app.settings.cache_scope
        return result

    # -- lists ---------------------------------------------------------------------------------
    def _page(self, req: RequestReceived, items: list[Any], key: str, describe: Callable[[Any], dict[str, Any]]) -> dict[str, Any]:
        params = req.params_as(PaginatedParams)
        start = 0
        if isinstance(params.cursor, str):
            try:
                start = int(base64.urlsafe_b64decode(params.cursor.encode()).decode())
                assert 0 <= start <= len(items)
            except Exception:
                raise ProtocolError(jsonrpc.INVALID_PARAMS, "Invalid params: unknown cursor") from None
        size = self.app.settings.page_size
        out: dict[str, Any] = {key: [describe(i) for i in items[start : start + size]]}
        if start + size < len(items):
            out["nextCursor"] = base64.urlsafe_b64encode(str(start + size).encode()).decode()
        return out

    async def list_tools(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        f = req.features
        describe = functools.partial(_describe_tool, f)
        return self._page(req, _visible(req, self.app.registry.tools.values()), "tools", describe)

    async def list_resources(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        listed = [r for r in _visible(req, self.app.registry.resources) if r.listed]
        return self._page(req, listed, "resources", lambda r: r.describe(titles=req.features.titles))

    async def list_templates(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        return self._page(req, _visible(req, self.app.registry.templates), "resourceTemplates", lambda r: r.describe(titles=req.features.titles))

    async def list_prompts(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        return self._page(req, _visible(req, self.app.registry.prompts.values()), "prompts", lambda p: p.describe(titles=req.features.titles))

    # -- tools ---------------------------------------------------------------------------------
    async def call_tool(self, req: RequestReceived, peer: Peer, params: CallToolParams, tool: ToolDef,
                        deadline: float) -> dict[str, Any]:
        ctx = self._context(req, peer, params, params.name) if (tool.context_param or params.requestState) else None
        try:
            kwargs = tool.parse_arguments(params.arguments)
        except ValueError as exc:
            message = f"Invalid arguments for tool {tool.name}: {exc}"
            if req.features.input_errors_as_results:
                return _error_result(message)
            raise ProtocolError(jsonrpc.INVALID_PARAMS, message) from None
        if tool.context_param:
            kwargs[tool.context_param] = ctx
        if tool.task and req.features.stateless:
            if declared(req.client_capabilities):
                return await self.app.tasks.start(req, tool.name, functools.partial(_bind, ctx),
                                                  functools.partial(self._run_tool, req, tool, kwargs, deadline), deadline)
            if tool.task == "required":
                raise missing_extension()
        return await self._run_tool(req, tool, kwargs, deadline)

    async def _run_tool(self, req: RequestReceived, tool: ToolDef, kwargs: dict[str, Any], deadline: float) -> dict[str, Any]:
        """Call the tool and shape its answer (its errors become isError results)."""
        # The request's scope ends at ``deadline`` (see handle): a cancellation after it is the
        # timeout, answered with an error result; a cancel() from the client or a shutdown
        # comes before it and propagates (no answer is sent).
        try:
            value = await self._invoke(tool, kwargs)
            out = tool.to_result(value)
        except trio.Cancelled:
            if trio.current_time() < deadline:
                raise
            return _error_result(f"Tool {tool.name} timed out after {self._timeout(tool):g} s")
        except InputRequired as exc:
            return _input_required(req, exc)
        except ProtocolError:
            raise  # a JSON-RPC error for the request (a task: failed with it)
        except MissingCapability:
            if req.features.stateless:
                raise
            return _error_result(f"Tool {tool.name} needs a client capability the client did not declare")
        except ToolError as exc:
            return _error_result(str(exc))
        except Exception as exc:
            log.warning("tool %s raised %s: %s", tool.name, type(exc).__name__, exc)
            return _error_result(str(exc) or type(exc).__name__)
        if out.raw is not None:
            return out.raw
        result: dict[str, Any] = {"content": _content_for(req.features, out.content)}
        if out.structured is not msgspec.UNSET and req.features.structured_output:
            result["structuredContent"] = out.structured
        result["isError"] = out.is_error
        if out.meta:
            result["_meta"] = dict(out.meta)
        return result

    async def _invoke(self, item: Any, kwargs: dict[str, Any]) -> Any:
        """Call a tool, resource reader, prompt or completion function.

        A plain ``def`` runs in a worker thread under the item's own limiter: a thread that
        never returns keeps only that item's slots, and the caller's scope (the timeout)
        still ends the wait on time, whatever the thread does.
        """
        if item.is_async:
            return await item.fn(**kwargs)
        return await trio.to_thread.run_sync(functools.partial(item.fn, **kwargs), abandon_on_cancel=True,
                                             limiter=self.app.thread_limiter(item))

    def _context(self, req: RequestReceived, peer: Peer, params: Any, target: str) -> Context:
        meta = params.meta if isinstance(params.meta, dict) else {}
        responses = params.inputResponses if isinstance(params.inputResponses, dict) else None
        state = None
        if isinstance(params.requestState, str) and req.features.stateless:
            try:
                state = self.app.sealer.open(req.method, target, params.requestState)
            except ValueError as exc:
                raise ProtocolError(jsonrpc.INVALID_PARAMS, str(exc)) from None
        return Context(
            self.app, req, peer, progress_token=meta.get("progressToken"),
            input_responses=responses, request_state=state, target=target,
        )

    # -- resources -----------------------------------------------------------------------------
    async def read_resource(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        params = req.params_as(ReadResourceParams)
        found = self.app.registry.find_resource(params.uri)
        shown = jsonrpc.clip(params.uri)  # errors echo the URI once, bounded (data.uri when not found)
        if found is not None:
            check_scopes(req.principal, found[0].scopes, f"resource {shown}")
        try:
            if found is None:
                raise ResourceNotFound(params.uri)
            res, variables = found
            value = await self._invoke(res, variables)
        except ResourceNotFound as exc:
            code = jsonrpc.INVALID_PARAMS if req.features.stateless else jsonrpc.RESOURCE_NOT_FOUND_LEGACY
            raise ProtocolError(code, jsonrpc.clip(str(exc), 1000), {"uri": shown}) from None
        except Exception as exc:
            log.warning("resource reader for %s raised %s: %s", shown, type(exc).__name__, exc)
            raise ProtocolError(jsonrpc.INTERNAL_ERROR, f"Could not read {shown}: {jsonrpc.clip(str(exc), 1000)}") from None
        return {"contents": res.to_contents(params.uri, value)}

    # -- prompts -------------------------------------------------------------------------------
    async def get_prompt(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        params = req.params_as(GetPromptParams)
        prompt = self.app.registry.prompts.get(params.name)
        if prompt is None:
            raise ProtocolError(jsonrpc.INVALID_PARAMS, f"Unknown prompt: {jsonrpc.clip(params.name)}")
        check_scopes(req.principal, prompt.scopes, f"prompt {prompt.name}")
        try:
            kwargs = prompt.parse_arguments(params.arguments)
        except ValueError as exc:
            raise ProtocolError(jsonrpc.INVALID_PARAMS, f"Invalid arguments for prompt {prompt.name}: {exc}") from None
        if prompt.context_param:
            kwargs[prompt.context_param] = self._context(req, peer, params, params.name)
        try:
            value = await self._invoke(prompt, kwargs)
        except InputRequired as exc:
            return _input_required(req, exc)
        except (ProtocolError, MissingCapability):
            raise
        except Exception as exc:
            log.warning("prompt %s raised %s: %s", prompt.name, type(exc).__name__, exc)
            raise ProtocolError(jsonrpc.INTERNAL_ERROR, f"Prompt {prompt.name} failed: {exc}") from None
        messages, description = prompt.to_messages(value)
        for m in messages:
            m.content = _content_for(req.features, [m.content])[0]
        result: dict[str, Any] = {"messages": messages}
        if description or prompt.description:
            result["description"] = description or prompt.description
        return result

    async def complete(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        params = req.params_as(CompleteParams)
        ref = params.ref.name if params.ref.type == "ref/prompt" else params.ref.uri
        context = params.context.arguments if not isinstance(params.context, msgspec.UnsetType) else {}
        values: list[str] = []
        for comp in self.app.registry.completions:
            if isinstance(ref, str) and comp.matches(params.ref.type, ref, params.argument.name):
                try:
                    values = list(await self._invoke(comp, {"argument": params.argument.name, "value": params.argument.value, "context": context}))
                except Exception as exc:
                    log.warning("completion for %s raised %s: %s", ref, type(exc).__name__, exc)
                    raise ProtocolError(jsonrpc.INTERNAL_ERROR, f"Completion failed: {exc}") from None
                break
        return {"completion": {"values": values[:100], "total": len(values), "hasMore": len(values) > 100}}

    # -- stateless era -------------------------------------------------------------------------
    async def discover(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        out: dict[str, Any] = {"supportedVersions": list(STATELESS_VERSIONS), "capabilities": self.app.capabilities()}
        if self.app.settings.instructions:
            out["instructions"] = self.app.settings.instructions
        return out

    async def listen(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        """Hold a subscription open, forwarding the change events the client opted in to."""
        wanted = req.params_as(ListenParams).notifications
        tag = {META_SUBSCRIPTION_ID: req.id}
        honored = msgspec.to_builtins(wanted)
        task_ids: set[str] = set()
        if isinstance(wanted.taskIds, list):
            if not declared(req.client_capabilities):
                raise missing_extension()
            task_ids = set(await self.app.tasks.subscribable(req, wanted.taskIds))
            honored["taskIds"] = sorted(task_ids)
        await peer.notify(jsonrpc.encode_notification("notifications/subscriptions/acknowledged", {"_meta": tag, "notifications": honored}))
        uris = set(honored.get("resourceSubscriptions", []))
        with self.app.hub.listen() as events:
            async for event, arg in events:
                if event == "task":
                    owner, task_id, detailed = arg
                    if task_id in task_ids:
                        await peer.notify(jsonrpc.encode_notification("notifications/tasks", {"_meta": tag, **detailed}))
                    continue
                if event == "resources/updated":
                    if arg in uris:
                        await peer.notify(jsonrpc.encode_notification("notifications/resources/updated", {"_meta": tag, "uri": arg}))
                    continue
                kind = event.split("/", 1)[0]
                if honored.get(f"{kind}ListChanged"):
                    await peer.notify(jsonrpc.encode_notification(f"notifications/{event}", {"_meta": tag}))
        return {"_meta": dict(tag)}  # the server ended the subscription (shutdown)

    # -- tasks (the io.modelcontextprotocol/tasks extension) -------------------------------------
    async def get_task(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        params = req.params_as(TaskParams)
        return await self.app.tasks.get(req, params.taskId)

    async def update_task(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        params = req.params_as(UpdateTaskParams)
        return await self.app.tasks.update(req, params.taskId, params.inputResponses, _check_response)

    async def cancel_task(self, req: RequestReceived, peer: Peer) -> dict[str, Any]:
        params = req.params_as(TaskParams)
        return await self.app.tasks.cancel(req, params.taskId)




def _bind(ctx: Context | None, run: TaskRun) -> None:
    """Let the call's context know it may run as a task."""
    if ctx is not None:
        ctx._task = run


async def _raise(exc: Exception) -> dict[str, Any]:
    raise exc


def _visible(req: RequestReceived, items: Iterable[Any]) -> list[Any]:
    """The items the caller holds the scopes for (all of them where nobody is identified)."""
    return [i for i in items if not i.scopes or may_use(req.principal, i.scopes)]


def _error_result(message: str) -> dict[str, Any]:
    return {"content": [TextContent(text=message)], "isError": True}


def _input_required(req: RequestReceived, exc: InputRequired) -> dict[str, Any]:
    if not req.features.stateless:
        raise RuntimeError("input can only be requested this way in the stateless era")
    out: dict[str, Any] = {"resultType": "input_required", "inputRequests": exc.requests}
    if exc.state is not None:
        out["requestState"] = exc.state
    return out


def _describe_tool(f: Features, tool: Any) -> dict[str, Any]:
    return tool.describe(titles=f.titles, annotations=f.tool_annotations, structured=f.structured_output)


def _content_for(f: Features, content: list[Any]) -> list[Any]:
    """Replace content blocks the revision cannot carry with a text stand-in."""
    if f.resource_links and f.audio:
        return content
    out: list[Any] = []
    for block in content:
        if isinstance(block, ResourceLink) and not f.resource_links:
            out.append(TextContent(text=f"Resource: {block.uri}"))
        elif isinstance(block, AudioContent) and not f.audio:
            out.append(TextContent(text=f"[audio content ({block.mimeType}) not supported by protocol {f.version}]"))
        else:
            out.append(block)
    return out
