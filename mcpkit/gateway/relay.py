"""Forwarding one request to an upstream, and everything that flows while it runs.

* progress: the downstream token is mapped to one of the upstream session's own (the client
  session hands out a token per request and routes it back here);
* input: an upstream of the stateless era answers ``input_required``; the requests go to the
  downstream client through the calling Context (a live request in the handshake era, an
  InputRequiredResult in the stateless era, with the upstream's ``requestState`` sealed inside
  ours) and the answers go back upstream. A handshake-era upstream asks with live requests:
  :class:`Calls` relays them to the call they belong to;
* cancellation: the downstream cancel (or disconnect, or deadline) cancels the wait, and the
  client session tells the upstream (``notifications/cancelled``, or the stream closed);
* tasks: an upstream that answers with a task is followed (``tasks/get``) as an mcpkit task of
  our own, its input requests relayed and a cancel passed on (``tasks/cancel``).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from typing import Any

import msgspec
import trio

from ..client.errors import ConnectionClosed, McpError, RequestTimeout, RpcError
from ..protocol import jsonrpc
from ..protocol.jsonrpc import ProtocolError
from ..protocol.types import META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_SERVER_INFO, TASKS_EXTENSION
from ..protocol.versions import features
from ..server.context import Context
from ..server.errors import MissingCapability, ToolError
from .link import Link, Unavailable
from .parking import ParkedCall, Parking

log = logging.getLogger("mcpkit.gateway")

#: rounds of input one forwarded request may go through
MAX_INPUT_ROUNDS = 8
#: seconds a relayed progress or log message may wait for a slow downstream client
RELAY_WAIT_S = 1.0
_RELAYABLE = ("elicitation", "sampling", "roots")
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "notice": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR, "critical": logging.CRITICAL, "alert": logging.CRITICAL, "emergency": logging.CRITICAL}


class Calls:
    """The downstream calls in flight on one upstream: where the upstream's messages that carry
    no request id (log messages, and a handshake-era upstream's requests) are relayed to."""

    def __init__(self, name: str, parking: Parking | None = None) -> None:
        self.name = name
        self._live: dict[int, Any] = {}  # Context, or ParkedCall
        self._ids = itertools.count()
        #: where calls of stateless callers to a handshake-era upstream wait between rounds
        self.parking = parking

    def enter(self, ctx: Any) -> int:
        """Track a call in flight until :meth:`leave` (its key); None is not tracked."""
        key = next(self._ids)
        if ctx is not None:
            self._live[key] = ctx
        return key

    def leave(self, key: int) -> None:
        self._live.pop(key, None)

    def target(self) -> Any:
        """The call an unaddressed message belongs to: the only one in flight, or the oldest
        when every call in flight came from one downstream client. Several clients: nobody
        (a message for one user must never reach another)."""
        live = list(self._live.values())
        if len(live) <= 1:
            return live[0] if live else None
        peers = {id(getattr(c, "connection", None)) for c in live}
        return live[0] if len(peers) == 1 else None

    # -- the client session's handlers --------------------------------------------------------------
    async def on_log(self, params: dict[str, Any]) -> None:
        level = params.get("level") if params.get("level") in _LEVELS else "info"
        ctx = self.target()
        if isinstance(ctx, ParkedCall):
            ctx = ctx.ctx
        if ctx is None:
            log.log(_LEVELS[level], "upstream %s: %s", self.name, jsonrpc.clip(str(params.get("data")), 500))
            return
        with trio.move_on_after(RELAY_WAIT_S):
            logger = params.get("logger") if isinstance(params.get("logger"), str) else None
            await ctx.log(level, params.get("data"), logger)

    async def on_request(self, method: str, params: dict[str, Any]) -> Any:
        """A handshake-era upstream asks its client (us) for something: ask the caller's client."""
        if method == "ping":
            return {}
        ctx = self.target()
        if ctx is None:
            if method == "roots/list":
                return {"roots": []}
            raise RpcError(f"no call in flight that {method} could be relayed to", jsonrpc.INTERNAL_ERROR)
        if isinstance(ctx, ParkedCall):  # a stateless caller: its next round answers
            return await ctx.ask(method, params)
        if ctx.stateless:
            raise RpcError(f"the client of this call speaks the stateless era ({ctx.protocol_version}), which has "
                           f"no live {method} requests; the gateway cannot relay this one", jsonrpc.INTERNAL_ERROR)
        try:
            return (await ctx.request_input({"relay": (method, params)}))["relay"]
        except MissingCapability:
            raise RpcError(f"the client of this call does not support {method}", jsonrpc.METHOD_NOT_FOUND) from None
        except RuntimeError as exc:
            raise RpcError(str(exc), jsonrpc.INTERNAL_ERROR) from None


async def forward(link: Link, calls: Calls, method: str, params: dict[str, Any], ctx: Context | None,
                  raw: bool = False) -> dict[str, Any]:
    """Send ``method`` upstream for the call ``ctx`` serves and return the upstream's result,
    after as many rounds of input as it asks for. Raises ProtocolError for the upstream's
    JSON-RPC errors, :class:`Unavailable` when there is no session, McpError for the rest.

    ``raw``: a final result comes back as its top-level members, each still the upstream's
    bytes (``msgspec.Raw``), for a caller that passes them on without looking inside
    (:func:`call_result`); a result that asks for input or made a task is decoded and
    followed as always."""
    state = ctx.request_state if ctx is not None and isinstance(ctx.request_state, dict) else {}
    upstream_state = state.get("u") if isinstance(state.get("u"), str) else None
    responses: dict[str, Any] | None = None
    asked = state.get("r") if isinstance(state.get("r"), dict) else None
    if asked and ctx is not None:  # the retry of a round we ended: the answers it carries
        responses = await ctx.request_input(_asks(asked), state=state)
    for _ in range(MAX_INPUT_ROUNDS + 1):
        sent = dict(params)
        if responses:
            sent["inputResponses"] = responses
        if upstream_state is not None:
            sent["requestState"] = upstream_state
        result = await _request(link, calls, method, sent, ctx, raw)
        if isinstance(result, msgspec.Raw):
            top = _members(result)
            if top is None:
                raise ProtocolError(jsonrpc.INTERNAL_ERROR, f"upstream {link.settings.name} answered {method} with a non-object")
            kind_raw = top.get("resultType")
            if kind_raw is None or kind_raw == _COMPLETE:
                return top
            result = msgspec.json.decode(result)  # input or a task: looked at below
        kind = result.get("resultType") if isinstance(result, dict) else None
        if kind == "input_required" and ctx is not None:
            requests = result.get("inputRequests") if isinstance(result.get("inputRequests"), dict) else {}
            upstream_state = result.get("requestState") if isinstance(result.get("requestState"), str) else None
            asks = _asks(requests)
            if not asks:
                if upstream_state is None:
                    raise ProtocolError(jsonrpc.INTERNAL_ERROR, f"upstream {link.settings.name} asked for input without saying what")
                responses = None
                continue
            responses = await ctx.request_input(asks, state={"u": upstream_state, "r": requests})
            continue
        if kind == "task" and ctx is not None and isinstance(result.get("taskId"), str):
            return await _follow_task(link, calls, result["taskId"], result, ctx)
        if not isinstance(result, dict):
            raise ProtocolError(jsonrpc.INTERNAL_ERROR, f"upstream {link.settings.name} answered {method} with a non-object")
        return result
    raise ProtocolError(jsonrpc.INTERNAL_ERROR, f"upstream {link.settings.name} still wanted input after {MAX_INPUT_ROUNDS} rounds")


def _asks(requests: dict[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for key, req in requests.items():
        if isinstance(req, dict) and isinstance(req.get("method"), str):
            params = req.get("params") if isinstance(req.get("params"), dict) else {}
            out[key] = (req["method"], params)
    return out


_decode_members = msgspec.json.Decoder(dict[str, msgspec.Raw]).decode
_COMPLETE = msgspec.Raw(b'"complete"')
_ABSENT = object()
_OPEN_LIST = ord("[")  # a Raw value's first byte (no whitespace before it)
#: an upstream's result fields that belong to its era (ours are the dispatcher's to add)
_ERA_FIELDS = frozenset({"resultType", "ttlMs", "cacheScope"})


def _members(raw: msgspec.Raw) -> dict[str, msgspec.Raw] | None:
    """A JSON object's members, their values undecoded; None for anything but an object."""
    try:
        return _decode_members(raw)
    except (msgspec.ValidationError, msgspec.DecodeError):
        return None


def _plain(value: Any) -> Any:
    return msgspec.json.decode(value) if isinstance(value, msgspec.Raw) else value


async def _request(link: Link, calls: Calls, method: str, params: dict[str, Any], ctx: Context | None,
                   raw: bool = False) -> Any:
    client = link.client
    if client is None or client.session is None:
        raise link.unavailable()
    session = client.session
    if session.era == "stateless" and ctx is not None:
        meta: dict[str, Any] = {META_CLIENT_CAPABILITIES: relayable(ctx.client_capabilities, link)}
        if ctx.log_level is not None:
            meta[META_LOG_LEVEL] = ctx.log_level
        params["_meta"] = meta
    progress = _progress_relay(ctx) if ctx is not None and ctx.progress_token is not None else None
    parking = calls.parking
    # a stateless caller that could answer a live request of a handshake-era upstream: the call
    # may need to outlive the caller's round (a caller that declared none of them is refused)
    parked = ctx is not None and ctx.stateless and session.era == "handshake" and parking is not None \
        and any(k in ctx.client_capabilities for k in _RELAYABLE) and parking.can_park()
    key = None if parked else calls.enter(ctx)
    try:
        if parked:
            assert ctx is not None
            return await _parked_request(calls, session, method, params, ctx)
        result = await session.request(method, params, timeout=None, progress=progress, raw=raw)
        if progress is None and ctx is not None and (ctx.log_level is not None or not ctx.stateless):
            await session.drain()  # log messages sent before the answer reach the caller before it
        return result
    except RpcError as exc:
        raise ProtocolError(exc.rpc_code if exc.rpc_code is not None else jsonrpc.INTERNAL_ERROR, exc.message,
                            exc.data if exc.data is not None else msgspec.UNSET) from None
    except McpError as exc:
        link.call_failed(exc)
        raise
    finally:
        if key is not None:
            calls.leave(key)


async def _parked_request(calls: Calls, session: Any, method: str, params: dict[str, Any], ctx: Context) -> Any:
    """The upstream request runs parked (see :mod:`.parking`), answered by the caller's next rounds."""
    assert calls.parking is not None
    state = ctx.request_state if isinstance(ctx.request_state, dict) else {}

    async def start(parked: ParkedCall) -> Any:
        async def progress(p: Any, total: Any = None, message: Any = None) -> None:
            if parked.ctx.progress_token is not None:
                await _progress_relay(parked.ctx)(p, total, message)

        key = calls.enter(parked)
        try:
            return await session.request(method, params, timeout=None, progress=progress)
        finally:
            calls.leave(key)

    return await calls.parking.forward(ctx, state, start)


def relayable(caps: dict[str, Any], link: Link) -> dict[str, Any]:
    """The downstream client's capabilities the gateway can stand in for upstream."""
    out = {k: caps[k] for k in _RELAYABLE if k in caps}
    exts = caps.get("extensions")
    upstream_exts = link.listing.capabilities.get("extensions") or {}
    if isinstance(exts, dict) and TASKS_EXTENSION in exts and TASKS_EXTENSION in upstream_exts:
        out["extensions"] = {TASKS_EXTENSION: {}}
    return out


def _progress_relay(ctx: Context) -> Any:
    async def relay(progress: Any, total: Any = None, message: Any = None) -> None:
        if not isinstance(progress, (int, float)):
            return
        with trio.move_on_after(RELAY_WAIT_S):
            await ctx.report_progress(progress, total if isinstance(total, (int, float)) else None,
                                      message if isinstance(message, str) else None)
    return relay


async def _follow_task(link: Link, calls: Calls, task_id: str, created: dict[str, Any], ctx: Context) -> dict[str, Any]:
    """The upstream made a task of the call: so do we, and we follow theirs to its end."""
    await ctx.start_task()
    answered: set[str] = set()
    status_message: str | None = None
    state = created
    try:
        while True:
            status = state.get("status")
            message = state.get("statusMessage")
            if isinstance(message, str) and message != status_message:
                status_message = message
                await ctx.report_progress(0, None, message)
            if status == "completed":
                result = state.get("result")
                if not isinstance(result, dict):
                    raise ProtocolError(jsonrpc.INTERNAL_ERROR, f"upstream {link.settings.name}: a completed task carried no result")
                return result
            if status == "failed":
                err = state.get("error") if isinstance(state.get("error"), dict) else {}
                code = err.get("code") if isinstance(err.get("code"), int) else jsonrpc.INTERNAL_ERROR
                raise ProtocolError(code, str(err.get("message") or message or "the upstream task failed"),
                                    err.get("data", msgspec.UNSET))
            if status == "cancelled":
                raise ToolError(f"upstream {link.settings.name} cancelled the task")
            requests = state.get("inputRequests") if status == "input_required" else None
            asks = {k: v for k, v in _asks(requests).items() if k not in answered} if isinstance(requests, dict) else {}
            if asks:
                answers = await ctx.request_input(asks)
                await _request(link, calls, "tasks/update", {"taskId": task_id, "inputResponses": answers}, ctx)
                answered.update(answers)
            else:
                interval = state.get("pollIntervalMs")
                wait = interval / 1000 if isinstance(interval, (int, float)) and interval > 0 else 0.5
                await trio.sleep(min(max(wait, 0.05), 5.0))
            state = await _request(link, calls, "tasks/get", {"taskId": task_id}, ctx)
            if not isinstance(state, dict):
                raise ProtocolError(jsonrpc.INTERNAL_ERROR, f"upstream {link.settings.name}: tasks/get answered a non-object")
    except trio.Cancelled:
        with trio.CancelScope(shield=True), trio.move_on_after(5):
            with contextlib.suppress(McpError, ProtocolError, Unavailable):
                await _request(link, calls, "tasks/cancel", {"taskId": task_id}, None)
        raise


def call_result(result: dict[str, Any], version: str) -> dict[str, Any]:
    """An upstream's CallToolResult as the downstream revision carries it (the era's own
    fields are the dispatcher's to add). Members may still be the upstream's bytes
    (``msgspec.Raw``, from ``forward(raw=True)``): ``content`` and ``structuredContent`` stay
    so unless the downstream revision needs them changed, and go out as they came; ``_meta`` is
    split into its members (the upstream's server info taken out, the dispatcher adds ours; one
    that is not an object, which the schema forbids, is dropped) and ``isError`` decoded (the
    observers read it; bytes would always be true)."""
    f = features(version)
    meta = result.get("_meta")
    if isinstance(meta, msgspec.Raw):  # its members stay bytes; only the keys are read (None: not an object)
        result = {**result, "_meta": _members(meta)}
    out = _without_era_fields(result)
    content = out.get("content")
    if isinstance(content, msgspec.Raw) and (not (f.resource_links and f.audio) or memoryview(content)[0] != _OPEN_LIST):
        content = _plain(content)  # blocks the revision cannot carry, or not a list
    if not isinstance(content, msgspec.Raw):
        content = content_for(content, version) if isinstance(content, list) else []
    out["content"] = content
    if not f.structured_output:
        out.pop("structuredContent", None)
    is_error = out.get("isError", False)
    out["isError"] = _plain(is_error) if isinstance(is_error, msgspec.Raw) else is_error
    return out


def _without_era_fields(result: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in result.items() if k not in _ERA_FIELDS}
    meta = out.get("_meta", _ABSENT)
    if meta is not _ABSENT and not isinstance(meta, dict):  # the schema allows only an object
        del out["_meta"]
    elif isinstance(meta, dict) and META_SERVER_INFO in meta:
        meta = {k: v for k, v in meta.items() if k != META_SERVER_INFO}
        if meta:
            out["_meta"] = meta
        else:
            del out["_meta"]
    return out


def plain_result(result: dict[str, Any]) -> dict[str, Any]:
    return _without_era_fields(result)


def content_for(blocks: list[Any], version: str) -> list[Any]:
    """Content blocks the downstream revision cannot carry, as text stand-ins."""
    f = features(version)
    if f.resource_links and f.audio:
        return blocks
    out: list[Any] = []
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "resource_link" and not f.resource_links:
            out.append({"type": "text", "text": f"Resource: {block.get('uri')}"})
        elif kind == "audio" and not f.audio:
            out.append({"type": "text", "text": f"[audio content ({block.get('mimeType')}) not supported by protocol {version}]"})
        else:
            out.append(block)
    return out


def failure_text(link: Link, exc: Exception) -> str:
    """The isError text of a call the upstream could not answer."""
    name = link.settings.name
    if isinstance(exc, Unavailable):
        return str(exc)
    if isinstance(exc, RequestTimeout):
        return f"upstream {name} did not answer in time"
    if isinstance(exc, McpError):
        text = f"upstream {name} failed: {exc.message}"
        why = link.error  # while connected, set only when the gateway itself ended the session
        if isinstance(exc, ConnectionClosed) and why and why not in exc.message:
            text += f" (the gateway restarted the session: {why})"  # e.g. a message over the size limit
        return text
    return f"upstream {name} failed: {exc}"
