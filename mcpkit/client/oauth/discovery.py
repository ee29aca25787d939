"""Finding out where to get a token: the resource's metadata (RFC 9728) and its
authorization server's (RFC 8414 / OpenID Connect Discovery), checked as MCP requires."""

from __future__ import annotations

import logging
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import httpx

from ...protocol.oauth import issuer_metadata_urls, resource_metadata_urls
from ..errors import AuthorizationFailed
from ._challenge import Challenge
from ...bounded_fetch import TooLarge, json_or_none, read_bounded

log = logging.getLogger("mcpkit.client.oauth")


@dataclass
class ResourceInfo:
    """What the protected resource (the MCP server) said about itself."""

    resource: str
    authorization_servers: list[str]
    scopes_supported: list[str] | None = None
    raw: dict[str, Any] = field(default_factory=dict)


@dataclass
class ServerInfo:
    """An authorization server's metadata, its issuer checked against where it came from."""

    issuer: str
    raw: dict[str, Any]

    def get(self, name: str) -> Any:
        return self.raw.get(name)

    def endpoint(self, name: str) -> str | None:
        value = self.raw.get(name)
        return value if isinstance(value, str) and value.lower().startswith(("https://", "http://")) else None

    def supports(self, name: str, value: str) -> bool:
        listed = self.raw.get(name)
        return isinstance(listed, list) and value in listed


async def request_json(http: httpx.AsyncClient, method: str, url: str, what: str, *,
                       answer_headers: dict[str, str] | None = None, **kwargs: Any) -> tuple[int, Any]:
    """(status, JSON or None) of one request; AuthorizationFailed when it cannot be made.
    The answer's headers go into ``answer_headers`` when given."""
    headers = {"Accept": "application/json", **kwargs.pop("headers", {})}
    try:
        status, body, got = await read_bounded(http, method, url, headers=headers, **kwargs)
    except httpx.HTTPError as exc:
        raise AuthorizationFailed(f"could not reach {what} at {url}: {exc or type(exc).__name__}") from None
    except TooLarge as exc:
        raise AuthorizationFailed(f"{what}: {exc}") from None
    if answer_headers is not None:
        answer_headers.update((k.lower(), v) for k, v in got.items())
    return status, json_or_none(body)


async def get_json(http: httpx.AsyncClient, url: str, what: str) -> tuple[int, Any]:
    return await request_json(http, "GET", url, what)


def resource_matches(server_url: str, resource: str) -> bool:
    """The metadata's ``resource`` covers the URL we talk to: same origin, and our path at or
    under its path (a server at the root may publish its origin)."""
    ours, theirs = urllib.parse.urlsplit(server_url), urllib.parse.urlsplit(resource)
    if (ours.scheme.lower(), ours.netloc.lower()) != (theirs.scheme.lower(), theirs.netloc.lower()) or theirs.fragment:
        return False
    base = theirs.path.rstrip("/")
    return ours.path == base or ours.path.rstrip("/") == base or ours.path.startswith(base + "/")


async def _resource_metadata(http: httpx.AsyncClient, server_url: str, challenge: Challenge | None) -> tuple[str, dict[str, Any]] | None:
    """(where, document) of the Protected Resource Metadata: from the challenge's
    ``resource_metadata``, else at the well-known URLs (path first, then root)."""
    named = challenge.params.get("resource_metadata") if challenge else None
    urls = [named] if named else resource_metadata_urls(server_url)
    for url in urls:
        status, doc = await get_json(http, url, "the protected resource metadata")
        if status == 200 and isinstance(doc, dict):
            return url, doc
        log.debug("no protected resource metadata at %s (HTTP %s)", url, status)
    return None


def _authorization_servers(doc: dict[str, Any]) -> list[str] | None:
    servers = doc.get("authorization_servers")
    return servers if isinstance(servers, list) and servers and all(isinstance(s, str) for s in servers) else None


async def find_resource_info(http: httpx.AsyncClient, server_url: str, challenge: Challenge | None) -> ResourceInfo | None:
    """The Protected Resource Metadata, checked. None when the server publishes none."""
    found = await _resource_metadata(http, server_url, challenge)
    if found is None:
        return None
    url, doc = found
    resource = doc.get("resource")
    if not isinstance(resource, str) or not resource_matches(server_url, resource):
        raise AuthorizationFailed(f"the protected resource metadata at {url} is for {resource!r}, not for {server_url}: "
                                  "refusing to get a token for it")
    servers = _authorization_servers(doc)
    if servers is None:
        raise AuthorizationFailed(f"the protected resource metadata at {url} names no authorization server")
    scopes = doc.get("scopes_supported")
    return ResourceInfo(resource, servers, [s for s in scopes if isinstance(s, str)] if isinstance(scopes, list) else None, doc)


async def names_authorization_server(http: httpx.AsyncClient, server_url: str, challenge: Challenge | None) -> bool | None:
    """Whether the server's metadata names somewhere to get a token (OAuth would work): True or
    False, None when it publishes no metadata or it cannot be fetched. A server that only takes
    a fixed bearer token names none."""
    try:
        found = await _resource_metadata(http, server_url, challenge)
    except AuthorizationFailed:
        return None
    return None if found is None else _authorization_servers(found[1]) is not None


async def find_server_info(http: httpx.AsyncClient, issuer: str) -> ServerInfo:
    """The authorization server's metadata, from the first well-known URL that has it. A
    document whose ``issuer`` is not exactly the issuer asked about is not used."""
    tried: list[str] = []
    for url in issuer_metadata_urls(issuer):
        status, doc = await get_json(http, url, "the authorization server metadata")
        if status != 200 or not isinstance(doc, dict):
            tried.append(f"{url} (HTTP {status})")
            continue
        if doc.get("issuer") != issuer:
            raise AuthorizationFailed(f"the authorization server metadata at {url} names issuer {doc.get('issuer')!r}, "
                                      f"not {issuer!r}: refusing to use it")
        info = ServerInfo(issuer, doc)
        for name in ("authorization_endpoint", "token_endpoint"):
            if doc.get(name) is not None and info.endpoint(name) is None:
                raise AuthorizationFailed(f"the authorization server metadata has an invalid {name}")
        return info
    raise AuthorizationFailed(f"authorization server {issuer} publishes no metadata (tried {', '.join(tried)})")
