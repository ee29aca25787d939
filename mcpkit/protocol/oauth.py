"""Well-known URLs of OAuth metadata, shared by the resource server and the OAuth client."""

from __future__ import annotations

import urllib.parse

#: RFC 9728 Protected Resource Metadata
PRM_SUFFIX = "/.well-known/oauth-protected-resource"


def issuer_metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be, in the order MCP gives (RFC 8414 section 3.1 with
    path insertion, then OpenID Connect Discovery inserted and appended)."""
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    origin = f"{parts.scheme}://{parts.netloc}"
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]
    return [f"{origin}/.well-known/oauth-authorization-server{path}", f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration"]


def resource_metadata_urls(resource_url: str) -> list[str]:
    """Where a resource's metadata may be when its 401 named none: at the path of the
    endpoint, then at the root."""
    parts = urllib.parse.urlsplit(resource_url)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    return ([f"{origin}{PRM_SUFFIX}{path}"] if path else []) + [f"{origin}{PRM_SUFFIX}"]
