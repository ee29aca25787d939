"""mcpkit: serve tools, resources and prompts from pluggy plugins over MCP.

This module is the public API plugin authors build on; everything else is internal.
"""


from ._version import __version__
from .plugins.hookspecs import hookimpl
from .protocol.types import (
    Annotations,
    AudioContent,
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    PromptMessage,
    ResourceLink,
    TextContent,
    TextResourceContents,
)
from .server.auth import AuthSettings, InvalidToken, Principal, TokenVerifier, VerifierUnavailable
from .protocol.jsonrpc import ProtocolError
from .server.context import Context, PeerError, SyncContext
from .server.data_dir import data_dir
from .server.errors import DefinitionError, InputRequired, MissingCapability, PluginError, ResourceNotFound, ToolError
from .server.middleware import Call, MiddlewareDef, middleware
from .server.prompts import CompletionDef, PromptDef, completion, prompt
from .server.redis_client import redis_client
from .server.resources import ResourceDef, resource
from .server.tools import ToolDef, ToolResult, tool


__all__ = [
    "__version__", "hookimpl", "data_dir",
    "tool", "ToolDef", "ToolResult", "ToolError",
    "resource", "ResourceDef", "ResourceNotFound", "DefinitionError", "PluginError",
    "middleware", "MiddlewareDef", "Call",
    "prompt", "PromptDef", "PromptMessage", "completion", "CompletionDef",
    "Context", "SyncContext", "PeerError", "MissingCapability", "InputRequired", "ProtocolError",
    "TextContent", "ImageContent", "AudioContent", "ResourceLink", "EmbeddedResource",
    "TextResourceContents", "BlobResourceContents", "Annotations",
    "Principal", "TokenVerifier", "InvalidToken", "VerifierUnavailable", "AuthSettings",
    "http_client", "redis_client", "HttpClient", "HttpResponse", "HttpClientError", "HttpStatusError", "HttpTimeout",
]


#: The HTTP client is imported on first use, so a server that never calls out (stdio) does not
#: load it and httptools: ``mcpkit.http_client`` and the rest behave as ordinary attributes.
_LAZY = {name: ".httpclient" for name in
         ("http_client", "HttpClient", "HttpResponse", "HttpClientError", "HttpStatusError", "HttpTimeout")}


def __getattr__(name: str) -> object:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'mcpkit' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(where, __name__), name)
    globals()[name] = value
    return value


import typing as _typing  # noqa: E402  (here, beside what it serves)

if _typing.TYPE_CHECKING:
    from .httpclient import HttpClient, HttpClientError, HttpResponse, HttpStatusError, HttpTimeout, http_client
