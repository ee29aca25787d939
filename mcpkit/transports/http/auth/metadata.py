"""The issuer's metadata (RFC 8414, OpenID Connect Discovery), for its ``jwks_uri``."""

from __future__ import annotations

import urllib.parse
from typing import Any

import httpx

from ....server.auth import VerifierUnavailable
from .verifiers import fetch_json


def metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be, in the order RFC 8414 section 5 gives."""
    parts = urllib.parse.urlsplit(issuer)
    path = parts.path.rstrip("/")
    origin = f"{parts.scheme}://{parts.netloc}"
    if not path:
        return [f"{origin}/.well-known/oauth-authorization-server", f"{origin}/.well-known/openid-configuration"]
    return [f"{origin}/.well-known/oauth-authorization-server{path}", f"{origin}/.well-known/openid-configuration{path}",
            f"{origin}{path}/.well-known/openid-configuration"]


async def discover_issuer_metadata(client: httpx.AsyncClient, issuer: str) -> dict[str, Any]:
    """The first metadata document found for ``issuer`` whose ``issuer`` matches exactly."""
    reasons: list[str] = []
    for url in metadata_urls(issuer):
        try:
            status, doc = await fetch_json(client, "GET", url, "the issuer metadata")
        except VerifierUnavailable as exc:
            reasons.append(str(exc))
            continue
        if status != 200 or not isinstance(doc, dict):
            reasons.append(f"{url}: HTTP {status}")
            continue
        if doc.get("issuer") != issuer:
            reasons.append(f"{url} names issuer {doc.get('issuer')!r}, not {issuer!r}")
            continue
        return doc
    raise VerifierUnavailable(f"no metadata found for issuer {issuer}: {'; '.join(reasons)}")
