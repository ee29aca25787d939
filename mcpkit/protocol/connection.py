"""The server side of one MCP connection as a state machine, with no I/O.

Feed it frames with :meth:`ServerConnection.receive`; it answers the lifecycle messages itself
(initialize, ping, logging/setLevel, resources/subscribe) and hands everything else back as events
for the dispatcher. One connection is one stdio process or one HTTP session; stateless-era requests
carry their own envelope and are served on any connection.
"""

from __future__ import annotations

import itertools
import logging
from dataclasses import dataclass, field
from typing import Any, TypeVar, Union

import msgspec

from . import http_rules, jsonrpc
from .jsonrpc import Answer, Invalid, Message, ProtocolError, RequestId
from .types import (
    META_PROTOCOL_VERSION,
    CancelledParams,
    InitializeParams,
    LogLevel,
    MetaOnly,
    PARAMS_TYPES,
    Params,
    SetLevelParams,
    StatelessMeta,
    SubscribeParams,
)
from .versions import HANDSHAKE_VERSIONS, STATELESS_VERSIONS, Features, features, negotiate

_META_KEY = META_PROTOCOL_VERSION.encode()
T = TypeVar("T")
#: Methods the stateless era removed; asking for them there is "method not found".
REMOVED_IN_STATELESS = frozenset(
    {"initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"}
)
#: Methods that exist only in the stateless era.
STATELESS_ONLY = frozenset({"server/discover", "subscriptions/listen"})


@dataclass(slots=True)
class RequestReceived:
    """A request for the dispatcher, with the revision it is to be answered in."""

    id: RequestId
    method: str
    params: Union[msgspec.Raw, msgspec.UnsetType]
    features: Features
    #: The per-request envelope (stateless era) or None (handshake era).
    envelope: StatelessMeta | None
    #: client info, capabilities and log level in force for this request
    client_info: dict[str, Any]
    client_capabilities: dict[str, Any]
    log_level: LogLevel | None
    #: who is asking, as the transport established it (a verified bearer identity); None
    #: where nobody is identified (stdio, an HTTP endpoint without auth)
    principal: Any = None
    #: who owns what this request creates (tasks) when there is no principal: the stdio
    #: connection, or everyone ("anonymous", an open HTTP endpoint)
    owner: str = "anonymous"
    #: the HTTP request's headers (lower-case names) where the Streamable HTTP binding's header
    #: rules apply (stateless era); None elsewhere
    headers: dict[str, str] | None = None
    #: params decoded into their method's type (see :meth:`params_as`)
    typed: Any = None

    def params_as(self, type_: type[T]) -> T:
        """The params decoded into ``type_`` (INVALID_PARAMS when they do not fit), decoded once
        however many readers (header rules, middleware, the handler) ask."""
        typed = self.typed
        if type(typed) is not type_:
            typed = self.typed = jsonrpc.decode_params(self.params, type_)
        return typed


@dataclass(slots=True)
class NotificationReceived:
    method: str
    params: Union[msgspec.Raw, msgspec.UnsetType]


@dataclass(slots=True)
class CancelRequested:
    request_id: RequestId
    reason: str | None


@dataclass(slots=True)
class ResponseReceived:
    """The client's answer to a request the server sent (sampling, elicitation, roots)."""

    id: RequestId
    result: Any = None
    error: jsonrpc.ErrorObject | None = None


@dataclass(slots=True)
class Reply:
    """An answer to send back at once (lifecycle answers and protocol errors)."""

    answer: Answer
    #: the request it answers, for observers: a lifecycle request (initialize, ping,
    #: logging/setLevel, resources/subscribe, resources/unsubscribe) or one refused before any
    #: handler; None when no request could be read (a parse error, an invalid message)
    request: Message | None = None


@dataclass(slots=True)
class Batch:
    """A JSON-RPC batch: answer every request in it, then send the answers as one array."""

    events: list["Event"]


Event = Union[RequestReceived, NotificationReceived, CancelRequested, ResponseReceived, Reply, Batch]


@dataclass
class ServerConnection:
    """Lifecycle state of one connection, server side."""

    server_info: dict[str, Any]
    capabilities: dict[str, Any]
    instructions: str | None = None
    #: Serve the handshake era on this connection (HTTP stateless requests never handshake).
    allow_handshake: bool = True
    version: str | None = None  # negotiated handshake revision
    initialized: bool = False  # notifications/initialized seen
    client_info: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    log_level: LogLevel | None = None
    subscriptions: set[str] = field(default_factory=set)
    #: the owner stamped on this connection's requests (see RequestReceived.owner)
    owner: str = "anonymous"
    #: counts changes of the state above (initialized, log level, subscriptions), so a
    #: transport that keeps it elsewhere knows when to write it
    revision: int = 0
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    # -- incoming ------------------------------------------------------------------------------

    def receive(self, data: bytes, *, stateless: bool | None = None, headers: dict[str, str] | None = None) -> list[Event]:
        """Take one frame; return what to do about it.

        ``stateless`` is the transport's word on the era (HTTP knows it from headers); None lets
        the message decide (stdio).
        """
        try:
            decoded = jsonrpc.decode(data)
        except ProtocolError as exc:
            return [Reply(Answer.failure(None, exc))]
        if isinstance(decoded, list):
            return [self._batch(decoded)]
        return self._one(decoded, stateless, headers)

    def receive_message(self, msg: Message | Invalid, *, stateless: bool | None = None,
                        headers: dict[str, str] | None = None) -> list[Event]:
        """Like :meth:`receive` for a message the transport already decoded.

        ``headers`` (lower-case names) are the HTTP request's, where the Streamable HTTP
        binding's header rules apply to a stateless-era request: they are checked here, in the
        order the spec's validation implies, and kept on the request for the rules that need
        the tool (``Mcp-Param-*``)."""
        return self._one(msg, stateless, headers)

    def _batch(self, items: list[Message | Invalid]) -> Event:
        if not items:
            return Reply(Answer.failure(None, ProtocolError(jsonrpc.INVALID_REQUEST, "Invalid Request: empty batch")))
        if self.version is None or not features(self.version).batches:
            err = ProtocolError(jsonrpc.INVALID_REQUEST, "Invalid Request: JSON-RPC batches are only accepted in protocol version 2025-03-26")
            return Reply(Answer.failure(None, err))
        events: list[Event] = []
        for item in items:
            if isinstance(item, Message) and item.method == "initialize":
                rid = item.id if isinstance(item.id, (int, str)) else None
                err = ProtocolError(jsonrpc.INVALID_REQUEST, "Invalid Request: initialize must not be part of a batch")
                events.append(Reply(Answer.failure(rid, err)))
            else:
                events.extend(self._one(item, False))
        return Batch(events)

    def _one(self, msg: Message | Invalid, stateless: bool | None, headers: dict[str, str] | None = None) -> list[Event]:
        if isinstance(msg, Invalid):
            return [Reply(Answer.failure(msg.id, ProtocolError(jsonrpc.INVALID_REQUEST, f"Invalid Request: {msg.reason}")))]
        if msg.is_response:
            assert msg.id is not msgspec.UNSET and msg.id is not None
            result = None if msg.result is msgspec.UNSET else msgspec.json.decode(msg.result)
            error = None if msg.error is msgspec.UNSET else msg.error
            return [ResponseReceived(msg.id, result, error)]
        if msg.is_notification:
            return self._notification(msg)
        try:
            event = self._request(msg, stateless, headers)
        except ProtocolError as exc:
            return [Reply(Answer.failure(msg.id, exc), msg)]  # type: ignore[arg-type]
        except Exception:  # a bug here must cost one answer, never the connection
            logging.getLogger("mcpkit.protocol").exception("internal error handling %s", msg.method)
            return [Reply(Answer.failure(msg.id, ProtocolError(jsonrpc.INTERNAL_ERROR, "Internal error")))]  # type: ignore[arg-type]
        return [event]

    def _notification(self, msg: Message) -> list[Event]:
        method = msg.method
        assert isinstance(method, str)
        if method == "notifications/initialized":
            if self.version is not None and not self.initialized:
                self.initialized = True
                self.revision += 1
            return []
        if method == "notifications/cancelled":
            try:
                params = jsonrpc.decode_params(msg.params, CancelledParams)
            except ProtocolError:
                return []  # malformed notifications are dropped: there is no one to answer
            if params.requestId is msgspec.UNSET:
                return []
            reason = None if params.reason is msgspec.UNSET else params.reason
            return [CancelRequested(params.requestId, reason)]
        return [NotificationReceived(method, msg.params)]

    def _request(self, msg: Message, stateless: bool | None, headers: dict[str, str] | None = None) -> Event:
        method = msg.method
        assert isinstance(method, str) and isinstance(msg.id, (int, str))
        if stateless is None:
            stateless = method in STATELESS_ONLY or (
                msg.params is not msgspec.UNSET and _META_KEY in bytes(msg.params)
            )
        if stateless:
            return self._stateless_request(msg, method, headers)
        return self._handshake_request(msg, method)

    def _stateless_request(self, msg: Message, method: str, headers: dict[str, str] | None) -> Event:
        version = None
        if headers is not None:
            version = headers.get("mcp-protocol-version")
            if version is None:
                raise http_rules.mismatch("the MCP-Protocol-Version header is required")
        typed = jsonrpc.decode_params(msg.params, PARAMS_TYPES.get(method, Params))
        envelope = envelope_of(typed.meta)
        if version is not None and version.strip() != envelope.protocolVersion:
            raise http_rules.mismatch(f"MCP-Protocol-Version header {version!r} does not match _meta protocolVersion {envelope.protocolVersion!r}")
        if envelope.protocolVersion not in STATELESS_VERSIONS:
            raise unsupported_version(envelope.protocolVersion)
        if method in REMOVED_IN_STATELESS:
            raise ProtocolError(jsonrpc.METHOD_NOT_FOUND, f"Method not found: {method} does not exist in protocol version {envelope.protocolVersion}")
        if headers is not None:
            http_rules.check_standard_headers(headers, method, typed)
        info = {} if envelope.clientInfo is msgspec.UNSET else envelope.clientInfo
        level = None if envelope.logLevel is msgspec.UNSET else envelope.logLevel
        return RequestReceived(
            msg.id, method, msg.params, features(envelope.protocolVersion), envelope,  # type: ignore[arg-type]
            info, envelope.clientCapabilities, level, owner=self.owner, headers=headers, typed=typed,
        )

    def _handshake_request(self, msg: Message, method: str) -> Event:
        rid = msg.id
        assert isinstance(rid, (int, str))
        if method == "ping":
            return Reply(Answer(rid, {}), msg)
        if method == "initialize":
            return Reply(Answer(rid, self._initialize(msg)), msg)
        if not self.allow_handshake:
            raise ProtocolError(jsonrpc.INVALID_REQUEST, "Invalid Request: this endpoint serves only stateless requests")
        if self.version is None:
            raise ProtocolError(jsonrpc.INVALID_REQUEST, "Invalid Request: the server is not initialized; send initialize first")
        if method == "logging/setLevel":
            self.log_level = jsonrpc.decode_params(msg.params, SetLevelParams).level
            self.revision += 1
            return Reply(Answer(rid, {}), msg)
        if method in ("resources/subscribe", "resources/unsubscribe"):
            uri = jsonrpc.decode_params(msg.params, SubscribeParams).uri
            if method == "resources/subscribe":
                self.subscriptions.add(uri)
                self.revision += 1
            else:
                self.subscriptions.discard(uri)
                self.revision += 1
            return Reply(Answer(rid, {}), msg)
        return RequestReceived(
            rid, method, msg.params, features(self.version), None,
            self.client_info, self.client_capabilities, self.log_level, owner=self.owner,
        )

    def _initialize(self, msg: Message) -> dict[str, Any]:
        if not self.allow_handshake:
            raise ProtocolError(jsonrpc.INVALID_REQUEST, "Invalid Request: this endpoint serves only stateless requests")
        if self.version is not None:
            raise ProtocolError(jsonrpc.INVALID_REQUEST, "Invalid Request: the connection is already initialized")
        params = jsonrpc.decode_params(msg.params, InitializeParams)
        self.version = negotiate(params.protocolVersion)
        self.client_info = params.clientInfo
        self.client_capabilities = params.capabilities
        result: dict[str, Any] = {
            "protocolVersion": self.version,
            "capabilities": capabilities_for(self.capabilities, features(self.version)),
            "serverInfo": self.server_info,
        }
        if self.instructions:
            result["instructions"] = self.instructions
        return result

    # -- outgoing ------------------------------------------------------------------------------

    def change_notice(self, event: str, arg: Any) -> bytes | None:
        """The notification this (handshake-era) connection gets for a server-side change:
        ``tools/list_changed`` and the like once initialized, ``resources/updated`` only for
        subscribed URIs. None when it gets nothing."""
        if self.version is None:
            return None
        if event == "resources/updated":
            if arg not in self.subscriptions:
                return None
            return jsonrpc.encode_notification("notifications/resources/updated", {"uri": arg})
        if not event.endswith("/list_changed"):
            return None  # task status (stateless era, through subscriptions/listen) and the like
        return jsonrpc.encode_notification(f"notifications/{event}")

    def next_request_id(self) -> int:
        """Id for a request the server sends to the client."""
        return next(self._ids)


def parse_envelope(params: Union[msgspec.Raw, msgspec.UnsetType]) -> StatelessMeta:
    """Read and check the stateless ``_meta`` envelope; a missing field is -32602."""
    meta = None
    if params is not msgspec.UNSET:
        try:
            meta = msgspec.json.decode(params, type=MetaOnly).meta
        except msgspec.DecodeError:
            raise ProtocolError(jsonrpc.INVALID_PARAMS, "Invalid params: params must be an object") from None
    return envelope_of(meta)


def envelope_of(meta: Any) -> StatelessMeta:
    """Check the ``_meta`` of a stateless-era request as an envelope; a missing field is -32602."""
    if not isinstance(meta, dict):
        raise ProtocolError(jsonrpc.INVALID_PARAMS, "Invalid params: _meta is required and must carry io.modelcontextprotocol/protocolVersion and io.modelcontextprotocol/clientCapabilities")
    try:
        return msgspec.convert(meta, StatelessMeta)
    except msgspec.ValidationError as exc:
        raise ProtocolError(jsonrpc.INVALID_PARAMS, f"Invalid params: _meta {exc}") from None


def unsupported_version(requested: str) -> ProtocolError:
    return ProtocolError(
        jsonrpc.UNSUPPORTED_PROTOCOL_VERSION,
        "Unsupported protocol version",
        {"supported": list(STATELESS_VERSIONS), "requested": requested},
    )


def capabilities_for(caps: dict[str, Any], feats: Features) -> dict[str, Any]:
    """The server capabilities as the given revision can express them."""
    out = dict(caps)
    if not feats.stateless:
        out.pop("extensions", None)  # extensions (tasks) are served in the stateless era only
    if not feats.tool_annotations:
        out.pop("completions", None)  # completions capability arrived in 2025-03-26
    return out


__all__ = [
    "Batch", "CancelRequested", "Event", "NotificationReceived", "Reply", "RequestReceived",
    "ResponseReceived", "ServerConnection", "HANDSHAKE_VERSIONS", "parse_envelope",
]
