"""Talking to the token issuer, for the bundled verifiers: one HTTP client with short timeouts,
bounded JSON fetches whose failures say what could not be had, and the issuer's metadata
(RFC 8414, OpenID Connect Discovery) for its ``jwks_uri``."""

from __future__ import annotations

from typing import Any

import httpx

from ....bounded_fetch import TooLarge, json_or_none, read_bounded
from ....protocol.oauth import issuer_metadata_urls
from ....server.auth import AuthSettings, VerifierUnavailable


def http_client(auth: AuthSettings) -> httpx.AsyncClient:
    """The client a verifier talks to its issuer with: short timeouts, no redirects."""
    return httpx.AsyncClient(timeout=httpx.Timeout(auth.timeout_s), follow_redirects=False,
                             limits=httpx.Limits(max_connections=20, max_keepalive_connections=5))


async def fetch_json(client: httpx.AsyncClient, method: str, url: str, what: str, **kwargs: Any) -> tuple[int, Any]:
    """(status, decoded JSON) of one request; VerifierUnavailable when it cannot be had."""
    try:
        status, body, _ = await read_bounded(client, method, url, **kwargs)
    except httpx.HTTPError as exc:
        raise VerifierUnavailable(f"{what} at {url} could not be fetched: {type(exc).__name__}: {exc or 'no detail'}") from None
    except TooLarge as exc:
        raise VerifierUnavailable(f"{what}: {exc}") from None
    if status >= 500:
        raise VerifierUnavailable(f"{what} at {url} answered HTTP {status}")
    doc = json_or_none(body)
    if doc is None and status < 400:
        raise VerifierUnavailable(f"{what} at {url} is not JSON (HTTP {status})")
    return status, doc


async def discover_issuer_metadata(client: httpx.AsyncClient, issuer: str) -> dict[str, Any]:
    """The first metadata document found for ``issuer`` whose ``issuer`` matches exactly."""
    reasons: list[str] = []
    for url in issuer_metadata_urls(issuer):
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
