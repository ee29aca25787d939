"""Wire types: request params decoded straight from the raw bytes, and content blocks.

Only what the server reads is typed strictly; unknown fields are ignored, as JSON-RPC peers of
newer revisions may add some.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec
from msgspec import UNSET, UnsetType, field

# _meta keys of the stateless era
META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_LOG_LEVEL = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID = "io.modelcontextprotocol/subscriptionId"
#: the Tasks extension's identifier (in capabilities.extensions)
TASKS_EXTENSION = "io.modelcontextprotocol/tasks"

LogLevel = Literal["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
LOG_LEVELS: tuple[str, ...] = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

Meta = dict[str, Any]
ProgressToken = Union[int, str]


class Params(msgspec.Struct, kw_only=True):
    meta: Union[Meta, UnsetType] = field(default=UNSET, name="_meta")


class InitializeParams(Params, kw_only=True):
    protocolVersion: str
    capabilities: dict[str, Any] = {}
    clientInfo: dict[str, Any] = {}


class PaginatedParams(Params, kw_only=True):
    cursor: Union[str, None, UnsetType] = UNSET


class MrtrParams(Params, kw_only=True):
    """Params of requests that may be retried with input responses (2026-07-28 MRTR)."""

    inputResponses: Union[dict[str, Any], None, UnsetType] = UNSET
    requestState: Union[str, None, UnsetType] = UNSET


class CallToolParams(MrtrParams, kw_only=True):
    name: str
    arguments: Union[dict[str, Any], None] = None


class GetPromptParams(MrtrParams, kw_only=True):
    name: str
    arguments: Union[dict[str, str], None] = None


class ReadResourceParams(Params, kw_only=True):
    uri: str


class SubscribeParams(Params, kw_only=True):
    uri: str


class SetLevelParams(Params, kw_only=True):
    level: LogLevel


class CompletionRef(msgspec.Struct, kw_only=True):
    type: Literal["ref/prompt", "ref/resource"]
    name: Union[str, UnsetType] = UNSET
    uri: Union[str, UnsetType] = UNSET


class CompletionArgument(msgspec.Struct, kw_only=True):
    name: str
    value: str


class CompletionContext(msgspec.Struct, kw_only=True):
    arguments: dict[str, str] = {}


class CompleteParams(Params, kw_only=True):
    ref: CompletionRef
    argument: CompletionArgument
    context: Union[CompletionContext, UnsetType] = UNSET


class CancelledParams(Params, kw_only=True):
    requestId: Union[int, str, UnsetType] = UNSET
    reason: Union[str, UnsetType] = UNSET


class SubscriptionFilter(msgspec.Struct, kw_only=True, omit_defaults=True):
    toolsListChanged: Union[bool, UnsetType] = UNSET
    promptsListChanged: Union[bool, UnsetType] = UNSET
    resourcesListChanged: Union[bool, UnsetType] = UNSET
    resourceSubscriptions: Union[list[str], UnsetType] = UNSET
    taskIds: Union[list[str], UnsetType] = UNSET  # the tasks extension


class TaskParams(Params, kw_only=True):
    """tasks/get and tasks/cancel (the tasks extension)."""

    taskId: str


class UpdateTaskParams(TaskParams, kw_only=True):
    inputResponses: dict[str, Any]


class ListenParams(Params, kw_only=True):
    notifications: SubscriptionFilter = field(default_factory=SubscriptionFilter)


class StatelessMeta(msgspec.Struct, kw_only=True):
    """The per-request envelope of the stateless era, read from ``params._meta``."""

    protocolVersion: str = field(name=META_PROTOCOL_VERSION)
    clientCapabilities: dict[str, Any] = field(name=META_CLIENT_CAPABILITIES)
    clientInfo: Union[dict[str, Any], UnsetType] = field(default=UNSET, name=META_CLIENT_INFO)
    logLevel: Union[LogLevel, UnsetType] = field(default=UNSET, name=META_LOG_LEVEL)
    progressToken: Union[ProgressToken, UnsetType] = UNSET


#: Each request method's params type: a request's params are decoded into it once
#: (``RequestReceived.params_as``); methods not named here decode as bare :class:`Params`.
PARAMS_TYPES: dict[str, type[Params]] = {
    "tools/call": CallToolParams, "prompts/get": GetPromptParams, "resources/read": ReadResourceParams,
    "tools/list": PaginatedParams, "prompts/list": PaginatedParams, "resources/list": PaginatedParams,
    "resources/templates/list": PaginatedParams, "completion/complete": CompleteParams,
    "tasks/get": TaskParams, "tasks/update": UpdateTaskParams, "tasks/cancel": TaskParams,
    "subscriptions/listen": ListenParams,
}


class MetaOnly(msgspec.Struct):
    """Just enough of any request's params to route it."""

    meta: Union[Meta, None, UnsetType] = field(default=UNSET, name="_meta")


# --- content blocks (also the public API for tool authors) ----------------------------------

class Annotations(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Hints on a content block or resource: who it is for, how important, when it changed."""

    audience: Union[list[Literal["user", "assistant"]], UnsetType] = UNSET
    priority: Union[float, UnsetType] = UNSET
    lastModified: Union[str, UnsetType] = UNSET


class TextContent(msgspec.Struct, tag="text", tag_field="type", kw_only=True, omit_defaults=True):
    """A block of text in a tool result or prompt message."""

    text: str
    annotations: Union[Annotations, UnsetType] = UNSET
    meta: Union[Meta, UnsetType] = field(default=UNSET, name="_meta")


class ImageContent(msgspec.Struct, tag="image", tag_field="type", kw_only=True, omit_defaults=True):
    """An image (base64 ``data`` and its ``mimeType``) in a tool result or prompt message."""

    data: str  # base64
    mimeType: str
    annotations: Union[Annotations, UnsetType] = UNSET
    meta: Union[Meta, UnsetType] = field(default=UNSET, name="_meta")


class AudioContent(msgspec.Struct, tag="audio", tag_field="type", kw_only=True, omit_defaults=True):
    """Audio (base64 ``data`` and its ``mimeType``); revisions before 2025-03-26 get a text stand-in."""

    data: str  # base64
    mimeType: str
    annotations: Union[Annotations, UnsetType] = UNSET
    meta: Union[Meta, UnsetType] = field(default=UNSET, name="_meta")


class ResourceLink(msgspec.Struct, tag="resource_link", tag_field="type", kw_only=True, omit_defaults=True):
    """A link to a resource the client may read; revisions before 2025-06-18 get a text stand-in."""

    uri: str
    name: str
    title: Union[str, UnsetType] = UNSET
    description: Union[str, UnsetType] = UNSET
    mimeType: Union[str, UnsetType] = UNSET
    size: Union[int, UnsetType] = UNSET
    annotations: Union[Annotations, UnsetType] = UNSET
    meta: Union[Meta, UnsetType] = field(default=UNSET, name="_meta")


class TextResourceContents(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The text of a resource, as ``resources/read`` returns it."""

    uri: str
    text: str
    mimeType: Union[str, UnsetType] = UNSET
    meta: Union[Meta, UnsetType] = field(default=UNSET, name="_meta")


class BlobResourceContents(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The bytes of a resource (base64 ``blob``), as ``resources/read`` returns them."""

    uri: str
    blob: str  # base64
    mimeType: Union[str, UnsetType] = UNSET
    meta: Union[Meta, UnsetType] = field(default=UNSET, name="_meta")


ResourceContents = Union[TextResourceContents, BlobResourceContents]


class EmbeddedResource(msgspec.Struct, tag="resource", tag_field="type", kw_only=True, omit_defaults=True):
    """A resource's contents carried inside a tool result or prompt message."""

    resource: Union[TextResourceContents, BlobResourceContents]
    annotations: Union[Annotations, UnsetType] = UNSET
    meta: Union[Meta, UnsetType] = field(default=UNSET, name="_meta")


Content = Union[TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource]
CONTENT_TYPES = (TextContent, ImageContent, AudioContent, ResourceLink, EmbeddedResource)


class PromptMessage(msgspec.Struct, kw_only=True):
    """One message of a prompt: a ``role`` and one content block."""

    role: Literal["user", "assistant"]
    content: Content
